"""What needs neither torch nor numpy: the binding, its enums, sizes, version and cache root."""
import os

from . import _C
from ._C import Error, InvalidArgument, NoDevice, NotLoadedInCapture, Unsupported  # noqa: F401

# The C API's enum values (include/nvfp4/jit.h).
DTYPES = {"bf16": 0, "fp16": 1, "fp32": 2, "nvfp4": 3}
SCALE_LAYOUTS = {"linear": 0, "swizzled128x4": 1}
SCALE_MODES = {"given": 0, "per_tensor": 1, "per_row": 2}
GROUPED_LAYOUTS = {"contiguous": 1, "masked": 2}


def bad(op, message):
    """An argument check of the Python layer failed: the same exception type as the library's."""
    raise InvalidArgument(f"nvfp4_jit.{op}: {message}")


def enum_value(table, value, op, name):
    try:
        return table[value]
    except (KeyError, TypeError):
        bad(op, f"{name} must be one of {', '.join(repr(k) for k in table)}, got {value!r}")


def version():
    """The library's version (the wheel carries the library it was built with)."""
    return _C.version()


def scale_bytes(rows, k, scale_layout="linear"):
    """Bytes of the E4M3 block scales of an NVFP4 [rows, k] matrix in `scale_layout`."""
    return _C.scale_bytes(enum_value(SCALE_LAYOUTS, scale_layout, "scale_bytes", "scale_layout"), rows, k)


def prepacked_bytes(n, k):
    """Bytes of a weight [n, k] prepacked for gemm."""
    return _C.prepacked_bytes(n, k)


def cache_info():
    """Where this process's kernels are cached: the writable root and the read-only extra roots,
    by the rules of README's Environment section (NVFP4_JIT_CACHE_DIR, XDG_CACHE_HOME, HOME,
    NVFP4_JIT_CACHE_PATH)."""
    root = os.environ.get("NVFP4_JIT_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "nvfp4-jit")
    extra = [p for p in os.environ.get("NVFP4_JIT_CACHE_PATH", "").split(":") if p]
    return {"root": root, "read_only_roots": extra, "version": version()}


def nvrtc_info():
    """The NVRTC this process compiles kernels with, found at the first call by README's order
    (NVFP4_JIT_NVRTC, an NVRTC already loaded, as torch's is, the nvidia-cuda-nvrtc wheel beside
    the package, the system CUDA): {"path", "version" (major.minor, as in every cache key),
    "source" ("env", "process", "wheel" or "system"), "error" (why none was found, else "")}."""
    return _C.nvrtc_info()


def info():
    """What this process uses, without torch or a GPU: the library's version, its NVRTC
    (nvrtc_info()) and its cache roots (cache_info())."""
    return {"version": version(), "nvrtc": nvrtc_info(), **{k: v for k, v in cache_info().items() if k != "version"}}
