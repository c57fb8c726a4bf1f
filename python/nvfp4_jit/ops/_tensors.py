"""Reading and checking the torch tensors the ops take: dtypes, shapes, devices, strides, scales
and global scales (the checks name the wrong argument); and torch's objects handed to the
binding's checked fast path."""
import torch
import torch.utils.dlpack
from torch import Tensor

from .. import _C
from .._core import DTYPES, SCALE_LAYOUTS, SCALE_MODES, bad, prepacked_bytes

_ACT = {torch.bfloat16: DTYPES["bf16"], torch.float16: DTYPES["fp16"], torch.float32: DTYPES["fp32"]}
_FP4 = tuple(t for t in (torch.uint8, getattr(torch, "float4_e2m1fn_x2", None)) if t is not None)
_E4M3 = (torch.uint8, torch.float8_e4m3fn)
_NVFP4 = DTYPES["nvfp4"]
_INDEX = {torch.int32: 0, torch.int64: 1}  # IndexType
# The enum values' names, which the binding's checked paths take.
_LAYOUT_NAMES = {v: k for k, v in SCALE_LAYOUTS.items()}
_MODE_NAMES = {v: k for k, v in SCALE_MODES.items()}

# The binding's checked eager fast path (gemm_checked, quantize_checked) reads tensors itself:
# torch's objects handed over once. It answers NotImplemented for whatever its checks do not
# accept, and the Python checks below then run (and name the wrong argument).
# Tensors are read through DLPack (one call a tensor), its dtype codes learnt from a sample of
# each dtype.
if hasattr(torch._C, "_cuda_getCurrentRawStream"):
    _FAST_DTYPES = (torch.bfloat16, torch.float16, torch.float32, torch.uint8, torch.int32, torch.int64,
                    torch.float8_e4m3fn, getattr(torch, "float4_e2m1fn_x2", None))
    _C.bind_torch(torch.Tensor, _FAST_DTYPES, torch._C._cuda_getDevice, torch._C._cuda_getCurrentRawStream,
                  torch.utils.dlpack.to_dlpack, tuple(None if d is None else torch.empty(2, 3, dtype=d)
                                                      for d in _FAST_DTYPES))


def _tensor(t, op, name, dtypes, dim=2, device=None):
    """t, checked: a torch.Tensor of `dim` dimensions, one of `dtypes`, on CUDA device index
    `device` (any when None), contiguous along its last dimension. One cheap test on the
    common path; _explain names what is wrong."""
    if (isinstance(t, Tensor) and t.dtype in dtypes and t.is_cuda and t.dim() == dim
            and (device is None or t.get_device() == device) and (dim == 0 or t.stride()[-1] == 1 or t.shape[-1] <= 1)):
        return t
    _explain(t, op, name, dtypes, dim, device)


def _explain(t, op, name, dtypes, dim, device):
    if not isinstance(t, Tensor):
        raise TypeError(f"nvfp4_jit.{op}: {name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dim() != dim:
        bad(op, f"{name} must be {dim}-D, got shape {list(t.shape)}")
    if t.dtype not in dtypes:
        bad(op, f"{name} must be {' or '.join(str(d).replace('torch.', '') for d in dtypes)}, got {str(t.dtype).replace('torch.', '')}")
    if not t.is_cuda:
        bad(op, f"{name} must be on a CUDA device, got {t.device}")
    if device is not None and t.get_device() != device:
        bad(op, f"{name} is on {t.device}, the other tensors on cuda:{device}")
    bad(op, f"{name} must be contiguous along its last dimension, got strides {list(t.stride())}")


def _shape(t, op, name, shape):
    if t.shape != tuple(shape):
        bad(op, f"{name} must have shape {list(shape)}, got {list(t.shape)}")


def _swizzled_shape(rows, k):
    """The swizzled128x4 scale buffer of [rows, k] as [rows padded to 128, k/16 padded to 4]: the
    layout docs/formats.md defines (plain arithmetic, so symbolic shapes trace through it)."""
    return [(rows + 127) // 128 * 128, (k // 16 + 3) // 4 * 4]


def _scale_shape(rows, k, layout):
    """The shape of a freshly allocated scale tensor: [rows, k/16] linear, else _swizzled_shape."""
    return [rows, k // 16] if layout == SCALE_LAYOUTS["linear"] else _swizzled_shape(rows, k)


def _scales(t, op, name, rows, k, layout, device, groups=None):
    """E4M3 block scales: [rows, k/16] when linear ([groups, rows, k/16] per group), any
    contiguous tensor of the swizzled buffer's size (per group) when swizzled."""
    if not isinstance(t, Tensor):
        raise TypeError(f"nvfp4_jit.{op}: {name} must be a torch.Tensor, got {type(t).__name__}")
    _tensor(t, op, name, _E4M3, t.dim(), device)
    lead = [groups] if groups else []
    if layout == SCALE_LAYOUTS["linear"]:
        _shape(t, op, name, lead + [rows, k // 16])
        if not t.is_contiguous():  # the library takes the scales' address alone
            bad(op, f"{name} must be contiguous (linear scales have no row stride), got strides {list(t.stride())}")
        return
    sh = _swizzled_shape(rows, k)
    if not t.is_contiguous() or t.numel() != sh[0] * sh[1] * (groups or 1):
        bad(op, f"{name} must be a contiguous tensor of {lead + sh} (swizzled128x4 scales of [{rows}, {k}]), "
                f"got shape {list(t.shape)}")


@torch.compiler.assume_constant_result
def _prepacked_bytes(n: int, k: int) -> int:
    return prepacked_bytes(n, k)


def _gscale(g, op, name, device, rows):
    """A global scale: a float, or an fp32 CUDA tensor of 1 value or `rows` values (per row).
    -> (tensor or None, host value)."""
    if g is None or isinstance(g, (int, float)):
        v = 1.0 if g is None else float(g)
        if not v > 0 or v == float("inf"):
            bad(op, f"{name} must be positive and finite, got {v}")
        return None, v
    if not isinstance(g, Tensor):
        raise TypeError(f"nvfp4_jit.{op}: {name} must be a float or a torch.Tensor, got {type(g).__name__}")
    if g.dtype != torch.float32:
        bad(op, f"{name} must be float32, got {str(g.dtype).replace('torch.', '')}")
    if g.device.type == "cpu" and g.numel() == 1:
        return None, float(g.item())
    _tensor(g, op, name, (torch.float32,), g.dim(), device)
    if g.numel() not in (1, rows) or not g.is_contiguous():
        bad(op, f"{name} must hold 1 value or {rows} (one per row), contiguous; got shape {list(g.shape)}")
    return g, 1.0


def _ptr(t):
    return t.data_ptr() if t is not None else 0


def _gs_values(g, value):
    """A global scale's fields (value, device_ptr, per_row) from _gscale's (tensor or None, value)."""
    return (value, g.data_ptr(), g.numel() > 1) if g is not None else (value, 0, False)
