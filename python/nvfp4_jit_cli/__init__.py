"""The `nvfp4-jit` console script: runs the command the wheel carries (nvfp4_jit/bin/nvfp4-jit) in
this process's place, with its arguments; its exit code is the script's. A package of its own,
so that starting the command imports neither nvfp4_jit nor torch. The command finds NVRTC as the
library does (README, Environment): the nvrtc extra's copy beside the package among them."""
import importlib.util
import os
import sys


def main():
    package = importlib.util.find_spec("nvfp4_jit")  # found, not imported
    if package is None or not package.submodule_search_locations:
        sys.exit("nvfp4-jit: the nvfp4_jit package is not installed beside this script")
    command = os.path.join(package.submodule_search_locations[0], "bin", "nvfp4-jit")
    os.execv(command, ["nvfp4-jit", *sys.argv[1:]])
