"""The package's build backend: scikit-build-core, whose wheel auditwheel then checks and tags.

The binaries are linked for manylinux_2_28 (cmake/portable.cmake); `auditwheel repair` confirms
that they need nothing newer than glibc 2.28 and no library outside the manylinux set, and
renames the wheel from linux_x86_64 to manylinux_2_28_x86_64. It grafts nothing: NVRTC and
libcuda are loaded by the library at run time, never bundled. With
`--config-settings=cmake.define.NVFP4_JIT_PORTABLE=OFF` (a wheel over a library built for this
machine only) the wheel stays linux_x86_64, unrepaired.
"""
import os
import shutil
import subprocess
import sys
import tempfile

from scikit_build_core.build import (build_editable, build_sdist, get_requires_for_build_editable,  # noqa: F401
                                     get_requires_for_build_sdist, get_requires_for_build_wheel,
                                     prepare_metadata_for_build_editable, prepare_metadata_for_build_wheel)
from scikit_build_core.build import build_wheel as _build_wheel

PLATFORM = "manylinux_2_28_x86_64"


def _portable(config_settings):
    value = (config_settings or {}).get("cmake.define.NVFP4_JIT_PORTABLE", "ON")
    return str(value).upper() not in ("OFF", "0", "FALSE", "NO")


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    if not _portable(config_settings):
        return _build_wheel(wheel_directory, config_settings, metadata_directory)
    with tempfile.TemporaryDirectory() as tmp:
        built = _build_wheel(tmp, config_settings, metadata_directory)
        repaired = os.path.join(tmp, "repaired")
        print(f"nvfp4_jit: auditwheel repair --plat {PLATFORM} {built}", flush=True)
        subprocess.run([sys.executable, "-m", "auditwheel", "repair", "--plat", PLATFORM, "--only-plat",
                        "--exclude", "libnvrtc.so.*", "--exclude", "libcuda.so.*", "-w", repaired,
                        os.path.join(tmp, built)], check=True)
        (name,) = os.listdir(repaired)
        shutil.move(os.path.join(repaired, name), os.path.join(wheel_directory, name))
        return name
