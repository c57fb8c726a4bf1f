"""What needs neither torch nor numpy: the binding, its enums, its calls by field name, sizes,
version and cache root."""
import os
from operator import itemgetter

from . import _C
from ._C import Error, InvalidArgument, NoDevice, NotLoadedInCapture, Unsupported  # noqa: F401

# The C API's enum values (include/nvfp4/jit.h).
DTYPES = {"bf16": 0, "fp16": 1, "fp32": 2, "nvfp4": 3}
SCALE_LAYOUTS = {"linear": 0, "swizzled128x4": 1}
SCALE_MODES = {"given": 0, "per_tensor": 1, "per_row": 2}
GROUPED_LAYOUTS = {"contiguous": 1, "masked": 2}
GEMM_EPILOGUES = {"none": 0, "swiglu": 1, "moe_combine": 2}
GEMM_PRECISIONS = {"exact": 0, "w4a8": 1}


def fields(method):
    """The binding method _C.<method>'s positional arguments from a dict of its fields by name:
    the names _C.fields(method) lists, in its order (the C++ structs' fields, nested ones as
    "b.global_scale.value"). The list is the binding's own, so a field added, removed or moved
    there cannot put a value in the wrong slot here: a field the dict lacks or one the binding
    does not read raises KeyError naming it. An op's trailing "stream" is left out (_launch
    adds it). -> pack(dict) -> tuple."""
    names = _C.fields(method)
    if names[-1:] == ("stream",):
        names = names[:-1]
    get = itemgetter(*names) if len(names) > 1 else lambda values: (values[names[0]],)
    count = len(names)

    def pack(values):
        try:
            args = get(values)
        except KeyError as e:
            raise KeyError(f"nvfp4_jit._C.{method}: field {e.args[0]!r} is not given") from None
        if len(values) != count:
            extra = ", ".join(repr(k) for k in values if k not in names)
            raise KeyError(f"nvfp4_jit._C.{method} reads no field {extra}")
        return args

    pack.method, pack.names = method, names
    return pack


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


SCALE_BYTES = fields("scale_bytes")
PREPACKED_BYTES = fields("prepacked_bytes")


def scale_bytes(rows, k, scale_layout="linear"):
    """Bytes of the E4M3 block scales of an NVFP4 [rows, k] matrix in `scale_layout`."""
    layout = enum_value(SCALE_LAYOUTS, scale_layout, "scale_bytes", "scale_layout")
    return _C.scale_bytes(*SCALE_BYTES({"layout": layout, "rows": rows, "k": k}))


def prepacked_bytes(n, k):
    """Bytes of a weight [n, k] prepacked for gemm."""
    return _C.prepacked_bytes(*PREPACKED_BYTES({"n": n, "k": k}))


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
