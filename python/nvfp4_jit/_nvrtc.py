"""NVRTC from the nvidia-cuda-nvrtc wheel (the `nvrtc` extra), for machines without the CUDA toolkit.

The library loads libnvrtc.so.13 by its name; where the wheel is installed, its copy is loaded
first (into this process, or onto the command's library path), so that name finds it.
"""
import ctypes
import importlib.util
import os

SONAME = "libnvrtc.so.13"


def wheel_nvrtc_dir():
    """The folder holding the nvidia-cuda-nvrtc wheel's libnvrtc.so.13, or None."""
    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations or []) if spec else []:
        folder = os.path.join(root, "cu13", "lib")
        if os.path.isfile(os.path.join(folder, SONAME)):
            return folder
    return None


def preload():
    folder = wheel_nvrtc_dir()
    if folder is not None:
        ctypes.CDLL(os.path.join(folder, SONAME), mode=ctypes.RTLD_GLOBAL)
