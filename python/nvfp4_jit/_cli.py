"""The `nvfp4-jit` console script: runs the command the wheel carries (nvfp4_jit/bin/nvfp4-jit)
in this process's place, with its arguments; its exit code is the script's."""
import os
import sys

from ._nvrtc import wheel_nvrtc_dir


def main():
    command = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "nvfp4-jit")
    env = dict(os.environ)
    folder = wheel_nvrtc_dir()
    if folder is not None:
        env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (folder, env.get("LD_LIBRARY_PATH")) if p)
    os.execve(command, ["nvfp4-jit", *sys.argv[1:]], env)
