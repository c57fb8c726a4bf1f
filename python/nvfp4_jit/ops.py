"""The ops on torch tensors, as torch.library custom ops (torch.ops.nvfp4_jit.*) and as a raw
eager path that skips the dispatcher.

Each op exists in three layers:
- `_<op>_args`: the public function's checks (shapes, dtypes, devices, strides; they run on
  fake tensors too, so torch.compile reports them while tracing) and its normalized arguments;
- `_<op>_alloc`: the outputs, allocated with `new_empty` (torch's caching allocator on the
  current device and stream; on fake tensors the fake implementation);
- `_<op>_launch`: the binding call on the tensors' addresses and torch's current stream.
The custom op `nvfp4_jit::<op>` allocates and launches; `nvfp4_jit::<op>_out` launches into
given outputs (CUDA-graph static buffers). The public `nvfp4_jit.<op>` calls the custom op
while torch.compile traces, and the same functions directly otherwise.
"""
import os
import warnings
from typing import Optional, Tuple

import torch
import torch.utils.dlpack
from torch import Tensor

from . import _C
from ._core import DTYPES, GROUPED_LAYOUTS, SCALE_LAYOUTS, SCALE_MODES, Error, NotLoadedInCapture, bad, enum_value
from .deploy import prewarm_shapes

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


# ---------------------------------------------------------------------------------------------
# Reading tensors


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
    return _C.prepacked_bytes(n, k)


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


def _gs_fields(g, value, rows):
    return (value, _ptr(g), g is not None and g.numel() > 1) if g is not None else (value, 0, False)


def _launch(fn, index, *args):
    """fn(*args, stream) on torch's current stream of CUDA device `index`, with that device
    current (the library runs a call in its stream's context; torch's current stream of a device
    that is not current would still be another device's legacy stream)."""
    try:
        if torch._C._cuda_getDevice() == index:
            return fn(*args, torch._C._cuda_getCurrentRawStream(index))
        with torch.cuda.device(index):
            return fn(*args, torch._C._cuda_getCurrentRawStream(index))
    except NotLoadedInCapture as e:
        raise NotLoadedInCapture(f"{e} From Python: run the op once before capturing (the usual warm-up "
                                 f"pass), or nvfp4_jit.prewarm(...) / Nvfp4Linear.prewarm(...) for a GEMM.") from None


_compiling = torch.compiler.is_compiling


# The ops are defined and implemented through torch.library.Library rather than
# torch.library.custom_op: custom_op wraps every call in Python kernels on several dispatch keys
# (autograd, ADInplaceOrView, the backend), which costs tens of microseconds a call; a plain
# CUDA kernel costs one dispatcher hop. The ops have no autograd formula (inference only).
_LIB = torch.library.Library("nvfp4_jit", "DEF")


_PYTHON_KERNELS = {}  # op name -> its Python kernel (the CUDA kernel where _torch_ops.so has none)


def _register(name, fn, fake, mutates=()):
    """The op nvfp4_jit::name (its schema from fn's annotations) with fake as its fake
    implementation (meta and fake tensors: torch.compile, shape propagation). Its CUDA kernel
    is registered at the end of this module: _torch_ops.so's C++ one, else fn."""
    # int, not SymInt: the ops' integers are enums and weight sizes, never a traced batch size,
    # and a plain int is the cheaper argument to pass through the dispatcher.
    _LIB.define(name + torch.library.infer_schema(fn, mutates_args=mutates).replace("SymInt ", "int "))
    torch.library.register_fake(f"nvfp4_jit::{name}", fake, lib=_LIB)
    _PYTHON_KERNELS[name] = fn


def _register_cuda_kernels():
    """Loads _torch_ops.so (the hot ops' kernels in C++, one dispatcher hop and no Python) when
    the package has one and NVFP4_JIT_TORCH_OPS is not `python`; Python kernels for the rest.
    -> the ops served in C++."""
    path = os.path.join(os.path.dirname(__file__), "_torch_ops.so")
    if os.path.exists(path) and os.environ.get("NVFP4_JIT_TORCH_OPS", "") != "python":
        try:
            torch.ops.load_library(path)
        except OSError as e:  # a torch older than the stable ABI it targets: the Python kernels serve
            warnings.warn(f"nvfp4_jit: {path} did not load ({e}); the torch ops run their Python kernels")
    native = []
    for name, fn in _PYTHON_KERNELS.items():
        if torch._C._dispatch_has_kernel_for_dispatch_key(f"nvfp4_jit::{name}", "CUDA"):
            native.append(name)
        else:
            _LIB.impl(name, fn, "CUDA")
    return tuple(native)


def _none(*args):
    return None


def _pick(name, eager, t):
    """The custom op while torch.compile traces or when `t` is no plain tensor (a fake, functional
    or other subclass tensor), else the plain function (no dispatcher)."""
    return getattr(torch.ops.nvfp4_jit, name) if type(t) is not Tensor or _compiling() else eager


# ---------------------------------------------------------------------------------------------
# Quantized outputs (quantize, rmsnorm_quantize, swiglu_quantize, moe_stage)


def _qout_alloc(x, rows, k, layout, mode):
    q = x.new_empty([rows, k // 2], dtype=torch.uint8)
    scales = x.new_empty(_scale_shape(rows, k, layout), dtype=torch.float8_e4m3fn)
    g_out = x.new_empty([0 if mode == SCALE_MODES["given"] else (rows if mode == SCALE_MODES["per_row"] else 1)],
                        dtype=torch.float32)
    return q, scales, g_out


def _qout_fields(q, scales, layout, mode, gs, gs_value, g_out, rows):
    return (q.data_ptr(), q.stride(0), scales.data_ptr(), layout, mode, *_gs_fields(gs, gs_value, rows),
            _ptr(g_out) if mode != SCALE_MODES["given"] else 0)


def _qout_check(op, q, scales, g_out, rows, k, layout, mode, device):
    _tensor(q, op, "out", _FP4, 2, device)
    _shape(q, op, "out", [rows, k // 2])
    _scales(scales, op, "out_scales", rows, k, layout, device)
    if mode != SCALE_MODES["given"]:
        if g_out is None:
            bad(op, "out_global_scale must be given with out= when the global scale is computed")
        _tensor(g_out, op, "out_global_scale", (torch.float32,), 1, device)
        _shape(g_out, op, "out_global_scale", [rows if mode == SCALE_MODES["per_row"] else 1])


def _mode(op, global_scale, scale_mode, allowed):
    if global_scale is not None:
        return SCALE_MODES["given"]
    mode = enum_value(SCALE_MODES, scale_mode, op, "scale_mode")
    if mode not in allowed:
        bad(op, f"scale_mode must be one of {', '.join(k for k, v in SCALE_MODES.items() if v in allowed)} "
                f"(or a global_scale given), got {scale_mode!r}")
    return mode


def _result(q, scales, g_out, mode, global_scale):
    return q, scales, (global_scale if mode == SCALE_MODES["given"] else g_out)



def _out_scale(op, global_scale, mode, x, rows, out_global_scale):
    if mode == SCALE_MODES["given"]:
        return x.new_empty([0], dtype=torch.float32)
    return out_global_scale


# quantize -------------------------------------------------------------------------------------


def _quantize_launch(q: Tensor, scales: Tensor, g_out: Tensor, x: Tensor, gs: Optional[Tensor], gs_value: float,
                     layout: int, mode: int) -> None:
    rows, k = x.shape
    _launch(_C.quantize, x.get_device(), x.data_ptr(), _ACT[x.dtype], x.stride(0), rows, k,
            *_qout_fields(q, scales, layout, mode, gs, gs_value, g_out, rows))


def _quantize(x: Tensor, gs: Optional[Tensor], gs_value: float, layout: int, mode: int) -> Tuple[Tensor, Tensor, Tensor]:
    if mode != SCALE_MODES["given"]:  # the binding's checked path (a given scale returns no g_out tensor)
        r = _C.quantize_checked(x, None, _MODE_NAMES[mode], _LAYOUT_NAMES[layout], None, None, None)
        if r is not NotImplemented:
            return r
    q, scales, g_out = _qout_alloc(x, x.shape[0], x.shape[1], layout, mode)
    _quantize_launch(q, scales, g_out, x, gs, gs_value, layout, mode)
    return q, scales, g_out


_register("quantize", _quantize, lambda x, gs, gs_value, layout, mode: _qout_alloc(x, x.shape[0], x.shape[1], layout, mode))
_register("quantize_out", _quantize_launch, _none, ("q", "scales", "g_out"))


def quantize(x, global_scale=None, *, scale_mode="per_tensor", scale_layout="linear", out=None, out_scales=None,
             out_global_scale=None):
    """x [rows, k] (bf16 / fp16 / fp32) -> (q uint8 [rows, k/2], scales float8_e4m3fn, global scale).

    global_scale: a float or an fp32 CUDA tensor (1 value, or one per row); None computes it on
    the device (scale_mode 'per_tensor' or 'per_row') and returns it as an fp32 tensor. Scales
    are [rows, k/16] when linear, the flat padded buffer when 'swizzled128x4'. With out= (and
    out_scales=, plus out_global_scale= for a computed scale) the results go into those tensors.
    """
    if not _compiling():
        r = _C.quantize_checked(x, global_scale, scale_mode, scale_layout, out, out_scales, out_global_scale)
        if r is not NotImplemented:
            return r
    x = _tensor(x, "quantize", "x", tuple(_ACT))
    rows, k = x.shape
    mode = _mode("quantize", global_scale, scale_mode, (SCALE_MODES["per_tensor"], SCALE_MODES["per_row"]))
    layout = enum_value(SCALE_LAYOUTS, scale_layout, "quantize", "scale_layout")
    gs, gs_value = _gscale(global_scale, "quantize", "global_scale", x.get_device(), rows)
    if out is None:
        q, scales, g_out = _pick("quantize", _quantize, x)(x, gs, gs_value, layout, mode)
    else:
        q, scales, g_out = out, out_scales, _out_scale("quantize", global_scale, mode, x, rows, out_global_scale)
        _qout_check("quantize", q, scales, g_out, rows, k, layout, mode, x.get_device())
        _pick("quantize_out", _quantize_launch, x)(q, scales, g_out, x, gs, gs_value, layout, mode)
    return _result(q, scales, g_out, mode, global_scale)


# rmsnorm_quantize -----------------------------------------------------------------------------


def _rmsnorm_alloc(x, layout, mode, want_normed, want_inv_rms):
    rows, k = x.shape
    return (*_qout_alloc(x, rows, k, layout, mode), x.new_empty([rows, k] if want_normed else [0], dtype=x.dtype),
            x.new_empty([rows] if want_inv_rms else [0], dtype=torch.float32))


def _rmsnorm_quantize_launch(q: Tensor, scales: Tensor, g_out: Tensor, normed: Tensor, inv_rms: Tensor, x: Tensor,
                             weight: Tensor, eps: float, gs: Optional[Tensor], gs_value: float, layout: int, mode: int,
                             want_normed: bool, want_inv_rms: bool) -> None:
    rows, k = x.shape
    _launch(_C.rmsnorm_quantize, x.get_device(), x.data_ptr(), _ACT[x.dtype], x.stride(0), rows, k, weight.data_ptr(),
            weight.dtype != x.dtype, eps,
            *_qout_fields(q, scales, layout, mode, gs, gs_value, g_out, rows),
            normed.data_ptr() if want_normed else 0, normed.stride(0) if want_normed else 0,
            inv_rms.data_ptr() if want_inv_rms else 0)


def _rmsnorm_quantize(x: Tensor, weight: Tensor, eps: float, gs: Optional[Tensor], gs_value: float, layout: int,
                      mode: int, want_normed: bool, want_inv_rms: bool) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    outs = _rmsnorm_alloc(x, layout, mode, want_normed, want_inv_rms)
    _rmsnorm_quantize_launch(*outs, x, weight, eps, gs, gs_value, layout, mode, want_normed, want_inv_rms)
    return outs


_register("rmsnorm_quantize", _rmsnorm_quantize,
          lambda x, weight, eps, gs, gs_value, layout, mode, wn, wi: _rmsnorm_alloc(x, layout, mode, wn, wi))
_register("rmsnorm_quantize_out", _rmsnorm_quantize_launch, _none, ("q", "scales", "g_out", "normed", "inv_rms"))


def rmsnorm_quantize(x, weight, eps=1e-6, global_scale=None, *, scale_layout="linear", return_normed=False,
                     return_inv_rms=False, out=None, out_scales=None, out_global_scale=None, out_normed=None,
                     out_inv_rms=None):
    """RMSNorm (weight [k] in x's dtype or fp32, eps) then quantize, in one pass: (q, scales,
    global scale), plus (normed [rows, k] in x's dtype, inv_rms fp32 [rows]) when return_normed /
    return_inv_rms ask for them (None for the one not asked for). The global scale is given (float
    or tensor) or, when None, computed per row."""
    op = "rmsnorm_quantize"
    x = _tensor(x, op, "x", tuple(_ACT))
    rows, k = x.shape
    weight = _tensor(weight, op, "weight", (x.dtype, torch.float32), 1, x.get_device())
    _shape(weight, op, "weight", [k])
    mode = _mode(op, global_scale, "per_row", (SCALE_MODES["per_row"],))
    layout = enum_value(SCALE_LAYOUTS, scale_layout, op, "scale_layout")
    gs, gs_value = _gscale(global_scale, op, "global_scale", x.get_device(), rows)
    want_normed, want_inv = bool(return_normed or out_normed is not None), bool(return_inv_rms or out_inv_rms is not None)
    if out is None:
        q, scales, g_out, normed, inv_rms = _pick(op, _rmsnorm_quantize, x)(x, weight, float(eps), gs, gs_value, layout, mode,
                                                                         want_normed, want_inv)
    else:
        q, scales, g_out = out, out_scales, _out_scale(op, global_scale, mode, x, rows, out_global_scale)
        _qout_check(op, q, scales, g_out, rows, k, layout, mode, x.get_device())
        normed = out_normed if out_normed is not None else x.new_empty([0], dtype=x.dtype)
        inv_rms = out_inv_rms if out_inv_rms is not None else x.new_empty([0], dtype=torch.float32)
        if want_normed:
            _tensor(normed, op, "out_normed", (x.dtype,), 2, x.get_device())
            _shape(normed, op, "out_normed", [rows, k])
        if want_inv:
            _tensor(inv_rms, op, "out_inv_rms", (torch.float32,), 1, x.get_device())
            _shape(inv_rms, op, "out_inv_rms", [rows])
        _pick(op + "_out", _rmsnorm_quantize_launch, x)(q, scales, g_out, normed, inv_rms, x, weight, float(eps), gs,
                                                     gs_value, layout, mode, want_normed, want_inv)
    result = _result(q, scales, g_out, mode, global_scale)
    if not (want_normed or want_inv):
        return result
    return (*result, normed if want_normed else None, inv_rms if want_inv else None)


# swiglu_quantize ------------------------------------------------------------------------------


def _swiglu_quantize_launch(q: Tensor, scales: Tensor, g_out: Tensor, x: Tensor, interleave: int, gs: Optional[Tensor],
                            gs_value: float, layout: int, mode: int) -> None:
    rows, k = x.shape[0], x.shape[1] // 2
    _launch(_C.swiglu_quantize, x.get_device(), x.data_ptr(), _ACT[x.dtype], x.stride(0), rows, k, interleave,
            *_qout_fields(q, scales, layout, mode, gs, gs_value, g_out, rows))


def _swiglu_quantize(x: Tensor, interleave: int, gs: Optional[Tensor], gs_value: float, layout: int,
                     mode: int) -> Tuple[Tensor, Tensor, Tensor]:
    outs = _qout_alloc(x, x.shape[0], x.shape[1] // 2, layout, mode)
    _swiglu_quantize_launch(*outs, x, interleave, gs, gs_value, layout, mode)
    return outs


_register("swiglu_quantize", _swiglu_quantize,
          lambda x, il, gs, gv, layout, mode: _qout_alloc(x, x.shape[0], x.shape[1] // 2, layout, mode))
_register("swiglu_quantize_out", _swiglu_quantize_launch, _none, ("q", "scales", "g_out"))


def swiglu_quantize(x, global_scale=None, *, interleave=0, scale_layout="linear", out=None, out_scales=None,
                    out_global_scale=None):
    """x [rows, 2k] holding gate and up (two halves, or groups of `interleave`) -> quantized
    silu(gate) * up [rows, k]: (q, scales, global scale; computed per row when None)."""
    op = "swiglu_quantize"
    x = _tensor(x, op, "x", tuple(_ACT))
    rows, k = x.shape[0], x.shape[1] // 2
    if x.shape[1] % 2:
        bad(op, f"x must have an even number of columns (gate and up), got {x.shape[1]}")
    mode = _mode(op, global_scale, "per_row", (SCALE_MODES["per_row"],))
    layout = enum_value(SCALE_LAYOUTS, scale_layout, op, "scale_layout")
    gs, gs_value = _gscale(global_scale, op, "global_scale", x.get_device(), rows)
    if out is None:
        q, scales, g_out = _pick(op, _swiglu_quantize, x)(x, int(interleave), gs, gs_value, layout, mode)
    else:
        q, scales, g_out = out, out_scales, _out_scale(op, global_scale, mode, x, rows, out_global_scale)
        _qout_check(op, q, scales, g_out, rows, k, layout, mode, x.get_device())
        _pick(op + "_out", _swiglu_quantize_launch, x)(q, scales, g_out, x, int(interleave), gs, gs_value, layout, mode)
    return _result(q, scales, g_out, mode, global_scale)


# moe_stage ------------------------------------------------------------------------------------


def _moe_stage_alloc(x, ids, weights, layout, mode, ids_out_dtype):
    return (*_qout_alloc(x, x.shape[0], x.shape[1], layout, mode), ids.new_empty(list(ids.shape), dtype=ids_out_dtype),
            torch.empty_like(weights) if weights is not None else x.new_empty([0], dtype=torch.float32))


def _moe_stage_launch(q: Tensor, scales: Tensor, g_out: Tensor, ids_out: Tensor, weights_out: Tensor, x: Tensor,
                      ids: Tensor, weights: Optional[Tensor], gs: Optional[Tensor], gs_value: float, layout: int,
                      mode: int) -> None:
    rows, k = x.shape
    _launch(_C.moe_stage, x.get_device(), x.data_ptr(), _ACT[x.dtype], x.stride(0), rows, k,
            *_qout_fields(q, scales, layout, mode, gs, gs_value, g_out, rows), ids.shape[1], ids.data_ptr(),
            _ptr(weights), ids_out.data_ptr(), weights_out.data_ptr() if weights is not None else 0,
            _INDEX[ids.dtype], _INDEX[ids_out.dtype])


def _moe_stage(x: Tensor, ids: Tensor, weights: Optional[Tensor], gs: Optional[Tensor], gs_value: float, layout: int,
               mode: int, ids_out_dtype: torch.dtype) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    outs = _moe_stage_alloc(x, ids, weights, layout, mode, ids_out_dtype)
    _moe_stage_launch(*outs, x, ids, weights, gs, gs_value, layout, mode)
    return outs


_register("moe_stage", _moe_stage,
          lambda x, ids, w, gs, gv, layout, mode, idt: _moe_stage_alloc(x, ids, w, layout, mode, idt))
_register("moe_stage_out", _moe_stage_launch, _none, ("q", "scales", "g_out", "ids_out", "weights_out"))


def moe_stage(tokens, topk_ids, topk_weights=None, global_scale=None, *, scale_layout="linear", ids_dtype=None,
              out=None, out_scales=None, out_global_scale=None, out_topk_ids=None, out_topk_weights=None):
    """MoE input staging in one launch: tokens [rows, k] quantized, the router's topk_ids (int32
    or int64, DeepEP's convention, [rows, topk]) and topk_weights (fp32, optional) copied; the
    ids copy is ids_dtype (int32 or int64; default topk_ids' dtype; an int64 id int32 cannot
    hold becomes -1). -> (q, scales, global scale, topk_ids copy, topk_weights copy or None).
    The global scale is given or computed per row."""
    op = "moe_stage"
    x = _tensor(tokens, op, "tokens", tuple(_ACT))
    rows, k = x.shape
    ids = _tensor(topk_ids, op, "topk_ids", tuple(_INDEX), 2, x.get_device())
    if ids.shape[0] != rows or not ids.is_contiguous():
        bad(op, f"topk_ids must be contiguous with {rows} rows, got shape {list(ids.shape)} strides {list(ids.stride())}")
    ids_out_dtype = ids.dtype if ids_dtype is None else ids_dtype
    if ids_out_dtype not in _INDEX:
        bad(op, f"ids_dtype must be int32 or int64, got {ids_dtype}")
    if topk_weights is not None:
        _tensor(topk_weights, op, "topk_weights", (torch.float32,), 2, x.get_device())
        _shape(topk_weights, op, "topk_weights", list(ids.shape))
        if not topk_weights.is_contiguous():
            bad(op, "topk_weights must be contiguous")
    mode = _mode(op, global_scale, "per_row", (SCALE_MODES["per_row"],))
    layout = enum_value(SCALE_LAYOUTS, scale_layout, op, "scale_layout")
    gs, gs_value = _gscale(global_scale, op, "global_scale", x.get_device(), rows)
    if out is None:
        q, scales, g_out, ids_out, w_out = _pick(op, _moe_stage, x)(x, ids, topk_weights, gs, gs_value, layout, mode,
                                                                 ids_out_dtype)
    else:
        q, scales, g_out = out, out_scales, _out_scale(op, global_scale, mode, x, rows, out_global_scale)
        _qout_check(op, q, scales, g_out, rows, k, layout, mode, x.get_device())
        ids_out = out_topk_ids
        _tensor(ids_out, op, "out_topk_ids", tuple(_INDEX), 2, x.get_device())
        _shape(ids_out, op, "out_topk_ids", list(ids.shape))
        if not ids_out.is_contiguous():
            bad(op, "out_topk_ids must be contiguous")
        w_out = out_topk_weights if topk_weights is not None else x.new_empty([0], dtype=torch.float32)
        if topk_weights is not None:
            _tensor(w_out, op, "out_topk_weights", (torch.float32,), 2, x.get_device())
            _shape(w_out, op, "out_topk_weights", list(ids.shape))
        _pick(op + "_out", _moe_stage_launch, x)(q, scales, g_out, ids_out, w_out, x, ids, topk_weights, gs, gs_value,
                                              layout, mode)
    return (*_result(q, scales, g_out, mode, global_scale), ids_out, w_out if topk_weights is not None else None)


# dequantize -----------------------------------------------------------------------------------


def _dequantize_alloc(q, k, dtype, row_indices):
    return q.new_empty([row_indices.shape[0] if row_indices is not None else q.shape[0], k], dtype=dtype)


def _dequantize_launch(out: Tensor, q: Tensor, scales: Tensor, gs: Optional[Tensor], gs_value: float, k: int,
                       layout: int, row_indices: Optional[Tensor]) -> None:
    _launch(_C.dequantize, q.get_device(), q.data_ptr(), q.stride(0), scales.data_ptr(), layout,
            *_gs_fields(gs, gs_value, q.shape[0]), q.shape[0], k, out.data_ptr(), _ACT[out.dtype], out.stride(0),
            _ptr(row_indices), out.shape[0] if row_indices is not None else 0)


def _dequantize(q: Tensor, scales: Tensor, gs: Optional[Tensor], gs_value: float, k: int, layout: int,
                dtype: torch.dtype, row_indices: Optional[Tensor]) -> Tensor:
    y = _C.dequantize_checked(q, scales, gs_value if gs is None else gs, k, _LAYOUT_NAMES[layout], dtype, row_indices,
                              None)
    if y is not NotImplemented:
        return y
    out = _dequantize_alloc(q, k, dtype, row_indices)
    _dequantize_launch(out, q, scales, gs, gs_value, k, layout, row_indices)
    return out


_register("dequantize", _dequantize, lambda q, s, gs, gv, k, layout, dtype, idx: _dequantize_alloc(q, k, dtype, idx))
_register("dequantize_out", _dequantize_launch, _none, ("out",))


def dequantize(q, scales, global_scale=1.0, *, k=None, scale_layout="linear", dtype=torch.bfloat16, row_indices=None,
               out=None):
    """NVFP4 q [src_rows, k/2] (uint8 or float4_e2m1fn_x2) with its E4M3 scales and global scale
    (float, or fp32 tensor: 1 value or one per row) -> dtype [rows, k]; row_indices (int32
    [rows]) gathers rows (an index out of range gives a NaN row)."""
    if not _compiling():
        y = _C.dequantize_checked(q, scales, global_scale, k, scale_layout, dtype, row_indices, out)
        if y is not NotImplemented:
            return y
    op = "dequantize"
    q = _tensor(q, op, "q", _FP4)
    src_rows = q.shape[0]
    k = 2 * q.shape[1] if k is None else int(k)
    layout = enum_value(SCALE_LAYOUTS, scale_layout, op, "scale_layout")
    _scales(scales, op, "scales", src_rows, k, layout, q.get_device())
    gs, gs_value = _gscale(global_scale, op, "global_scale", q.get_device(), src_rows)
    if dtype not in _ACT:
        bad(op, f"dtype must be bfloat16, float16 or float32, got {dtype}")
    if row_indices is not None:
        _tensor(row_indices, op, "row_indices", (torch.int32,), 1, q.get_device())
    if out is None:
        return _pick(op, _dequantize, q)(q, scales, gs, gs_value, k, layout, dtype, row_indices)
    _tensor(out, op, "out", tuple(_ACT), 2, q.get_device())
    _shape(out, op, "out", [row_indices.shape[0] if row_indices is not None else src_rows, k])
    _pick(op + "_out", _dequantize_launch, q)(out, q, scales, gs, gs_value, k, layout, row_indices)
    return out


# convert_scales -------------------------------------------------------------------------------


def _convert_scales_launch(out: Tensor, scales: Tensor, rows: int, k: int, src_layout: int, dst_layout: int) -> None:
    _launch(_C.convert_scales, scales.get_device(), scales.data_ptr(), src_layout, out.data_ptr(), dst_layout, rows, k)


def _convert_scales(scales: Tensor, rows: int, k: int, src_layout: int, dst_layout: int) -> Tensor:
    out = scales.new_empty(_scale_shape(rows, k, dst_layout), dtype=torch.float8_e4m3fn)
    _convert_scales_launch(out, scales, rows, k, src_layout, dst_layout)
    return out


_register("convert_scales", _convert_scales,
          lambda s, rows, k, sl, dl: s.new_empty(_scale_shape(rows, k, dl), dtype=torch.float8_e4m3fn))
_register("convert_scales_out", _convert_scales_launch, _none, ("out",))


def convert_scales(scales, rows, k, *, src_layout="linear", dst_layout="swizzled128x4", out=None):
    """E4M3 block scales of an NVFP4 [rows, k] matrix rewritten from src_layout into dst_layout
    (e.g. a ModelOpt weight_scale into the swizzled128x4 layout GEMM libraries read)."""
    op = "convert_scales"
    s = enum_value(SCALE_LAYOUTS, src_layout, op, "src_layout")
    d = enum_value(SCALE_LAYOUTS, dst_layout, op, "dst_layout")
    if not isinstance(scales, Tensor):
        raise TypeError(f"nvfp4_jit.{op}: scales must be a torch.Tensor, got {type(scales).__name__}")
    _scales(scales, op, "scales", rows, k, s, scales.get_device())
    if out is None:
        return _pick(op, _convert_scales, scales)(scales, int(rows), int(k), s, d)
    _scales(out, op, "out", rows, k, d, scales.get_device())
    _pick(op + "_out", _convert_scales_launch, scales)(out, scales, int(rows), int(k), s, d)
    return out


# prepack --------------------------------------------------------------------------------------


def _prepack_launch(out: Tensor, weight: Tensor, scales: Tensor, layout: int) -> None:
    n, k = weight.shape[0], 2 * weight.shape[1]
    _launch(_C.prepack, weight.get_device(), weight.data_ptr(), weight.stride(0), scales.data_ptr(), layout, 1.0, 0, False, n, k,
            out.data_ptr())


def _prepack(weight: Tensor, scales: Tensor, layout: int) -> Tensor:
    out = weight.new_empty([_C.prepacked_bytes(weight.shape[0], 2 * weight.shape[1])], dtype=torch.uint8)
    _prepack_launch(out, weight, scales, layout)
    return out


_register("prepack", _prepack,
          lambda w, s, layout: w.new_empty([_C.prepacked_bytes(w.shape[0], 2 * w.shape[1])], dtype=torch.uint8))
_register("prepack_out", _prepack_launch, _none, ("out",))


def prepack(weight, weight_scale, *, scale_layout="linear", out=None):
    """A weight [n, k/2] (uint8 / float4_e2m1fn_x2) and its scales -> gemm's own layout, uint8
    [prepacked_bytes(n, k)] (pass it to gemm with b_prepacked=True, n=n; same bits)."""
    op = "prepack"
    weight = _tensor(weight, op, "weight", _FP4)
    n, k = weight.shape[0], 2 * weight.shape[1]
    layout = enum_value(SCALE_LAYOUTS, scale_layout, op, "scale_layout")
    _scales(weight_scale, op, "weight_scale", n, k, layout, weight.get_device())
    if out is None:
        return _pick(op, _prepack, weight)(weight, weight_scale, layout)
    _tensor(out, op, "out", (torch.uint8,), 1, weight.get_device())
    _shape(out, op, "out", [_C.prepacked_bytes(n, k)])
    _pick(op + "_out", _prepack_launch, weight)(out, weight, weight_scale, layout)
    return out


# gemm and grouped_gemm ------------------------------------------------------------------------


def _gemm_fields(m, n, k, a, a_scales, a_gs, a_gs_value, a_layout, b, b_scales, b_gs, b_gs_value, b_layout,
                 b_prepacked, bias, alpha, out, weights_static, ws):
    """GemmArgs' fields in declaration order. a: activations, or packed NVFP4 when a_scales is set."""
    w4a4 = a_scales is not None
    return (m, n, k, 0 if w4a4 else a.data_ptr(), _NVFP4 if w4a4 else _ACT[a.dtype], 0 if w4a4 else a.stride(-2),
            b.data_ptr(), 0 if b_prepacked else b.stride(-2), _ptr(b_scales), b_layout,
            *_gs_fields(b_gs, b_gs_value, 0), out.data_ptr(), _ACT[out.dtype], out.stride(-2), _ptr(bias),
            _ACT[bias.dtype] if bias is not None else 0, alpha, a.data_ptr() if w4a4 else 0,
            a.stride(-2) if w4a4 else 0, _ptr(a_scales), a_layout, *_gs_fields(a_gs, a_gs_value, 0), _ptr(ws),
            ws.numel() if ws is not None else 0, b_prepacked, weights_static)


_WS = 26  # GemmArgs' workspace field, then workspace_bytes


def _with_workspace(fields, ws):
    """fields with W4A4's workspace, allocated through torch (caching allocator, current stream)."""
    return fields[:_WS] + (ws.data_ptr(), ws.numel()) + fields[_WS + 2:]


def _gemm_launch(out: Tensor, workspace: Optional[Tensor], a: Tensor, a_scales: Optional[Tensor], a_gs: Optional[Tensor],
                 a_gs_value: float, a_layout: int, b: Tensor, b_scales: Optional[Tensor], b_gs: Optional[Tensor],
                 b_gs_value: float, b_layout: int, b_prepacked: bool, n: int, k: int, bias: Optional[Tensor],
                 alpha: float, weights_static: bool) -> None:
    fields = _gemm_fields(out.shape[0], n, k, a, a_scales, a_gs, a_gs_value, a_layout, b, b_scales, b_gs, b_gs_value,
                          b_layout, b_prepacked, bias, alpha, out, weights_static, workspace)
    if a_scales is not None and workspace is None:
        fields = _with_workspace(fields, a.new_empty([_C.gemm_workspace_bytes(*fields)], dtype=torch.uint8))
    _launch(_C.gemm, a.get_device(), *fields)


def _gemm(a: Tensor, a_scales: Optional[Tensor], a_gs: Optional[Tensor], a_gs_value: float, a_layout: int, b: Tensor,
          b_scales: Optional[Tensor], b_gs: Optional[Tensor], b_gs_value: float, b_layout: int, b_prepacked: bool, n: int,
          k: int, bias: Optional[Tensor], alpha: float, out_dtype: torch.dtype, weights_static: bool) -> Tensor:
    a_global = None if a_scales is None else (a_gs_value if a_gs is None else a_gs)
    y = _C.gemm_checked(a, b, b_scales, b_gs_value if b_gs is None else b_gs, _LAYOUT_NAMES[b_layout], b_prepacked, n,
                        a_scales, a_global, _LAYOUT_NAMES[a_layout], bias, alpha, out_dtype, None, None, weights_static)
    if y is not NotImplemented:
        return y
    out = a.new_empty([a.shape[0], n], dtype=out_dtype)
    _gemm_launch(out, None, a, a_scales, a_gs, a_gs_value, a_layout, b, b_scales, b_gs, b_gs_value, b_layout, b_prepacked,
                 n, k, bias, alpha, weights_static)
    return out


_register("gemm", _gemm, lambda a, *r: a.new_empty([a.shape[0], r[10]], dtype=r[14]))
_register("gemm_out", _gemm_launch, _none, ("out", "workspace"))


def _activations(op, a, a_scales, a_global_scale, a_scale_layout, rows_of_all, dim, gs_rows=None):
    """A as BF16/FP16 (W4A16) or packed NVFP4 with its scales (W4A4) -> (k, a_gs, a_gs_value, a_layout)."""
    a = _tensor(a, op, "a", (torch.bfloat16, torch.float16) + _FP4, dim)
    a_layout = enum_value(SCALE_LAYOUTS, a_scale_layout, op, "a_scale_layout")
    if a.dtype in _FP4:
        if a_scales is None:
            bad(op, "a is packed NVFP4 (W4A4): a_scales (and a_global_scale) must be given")
        k = 2 * a.shape[-1]
        rows = rows_of_all
        _scales(a_scales, op, "a_scales", rows, k, a_layout, a.get_device())
        a_gs, a_gs_value = _gscale(a_global_scale, op, "a_global_scale", a.get_device(), rows if gs_rows is None else gs_rows)
        return k, a_gs, a_gs_value, a_layout
    if a_scales is not None or a_global_scale is not None:
        bad(op, f"a is {str(a.dtype).replace('torch.', '')} (W4A16): a_scales and a_global_scale must be None")
    return a.shape[-1], None, 1.0, a_layout


def _weight(op, b, b_scales, b_global_scale, b_scale_layout, b_prepacked, n, k, device, groups=None):
    """B (per group): [n, k/2] with scales, or prepacked bytes -> (n, b_gs, b_gs_value, b_layout)."""
    b_layout = enum_value(SCALE_LAYOUTS, b_scale_layout, op, "b_scale_layout")
    lead = [groups] if groups else []
    if b_prepacked:
        if n is None:
            bad(op, "n must be given with b_prepacked=True")
        b = _tensor(b, op, "b", (torch.uint8,), b.dim() if isinstance(b, Tensor) else 1, device)
        want = _prepacked_bytes(n, k) * (groups or 1)
        if not b.is_contiguous() or b.numel() != want:
            bad(op, f"b (prepacked) must be a contiguous tensor of {want} bytes (prepacked_bytes({n}, {k})"
                    f"{' x ' + str(groups) + ' groups' if groups else ''}), got shape {list(b.shape)}")
        if b_scales is not None:
            bad(op, "b_scales must be None with b_prepacked=True (the prepacked weight holds its scales)")
    else:
        b = _tensor(b, op, "b", _FP4, 2 + len(lead), device)
        n = b.shape[-2] if n is None else n
        _shape(b, op, "b", lead + [n, k // 2])
        if groups and b.stride(0) != n * b.stride(1):
            bad(op, f"b's groups must follow one another (stride(0) = n * stride(1)), got strides {list(b.stride())}")
        _scales(b_scales, op, "b_scales", n, k, b_layout, device, groups)
    b_gs, b_gs_value = _gscale(b_global_scale, op, "b_global_scale", device, groups or 1)
    return n, b_gs, b_gs_value, b_layout


def _epilogue(op, bias, out_dtype, a, n):
    if bias is not None:
        _tensor(bias, op, "bias", (torch.bfloat16, torch.float32), 1, a.get_device())
        _shape(bias, op, "bias", [n])
    if out_dtype is None:
        out_dtype = a.dtype if a.dtype in (torch.bfloat16, torch.float16) else torch.bfloat16
    if out_dtype not in _ACT:
        bad(op, f"out_dtype must be bfloat16, float16 or float32, got {out_dtype}")
    return out_dtype


def gemm(a, b, b_scales=None, b_global_scale=1.0, *, b_scale_layout="linear", b_prepacked=False, n=None, a_scales=None,
         a_global_scale=None, a_scale_layout="linear", bias=None, alpha=1.0, out_dtype=None, out=None, workspace=None,
         weights_static=False):
    """out[m, n] = alpha * A . dequant(B)^T (+ bias), fp32 accumulation.

    a: [m, k] bf16/fp16 (W4A16), or packed NVFP4 [m, k/2] (uint8 / float4_e2m1fn_x2) with
    a_scales and a_global_scale (W4A4). b: the ModelOpt weight [n, k/2] with b_scales
    (float8_e4m3fn [n, k/16], or the flat swizzled buffer) and b_global_scale (weight_scale_2:
    float, or fp32 tensor on the device, which CUDA graphs see change), or prepack()'s output
    with b_prepacked=True and n. out_dtype defaults to a's dtype (bf16 for W4A4). out=: a static
    [m, n] buffer. weights_static: see the C++ GemmArgs (programmatic dependent launch).
    """
    if not _compiling():
        y = _C.gemm_checked(a, b, b_scales, b_global_scale, b_scale_layout, b_prepacked, n, a_scales, a_global_scale,
                            a_scale_layout, bias, alpha, out_dtype, out, workspace, weights_static)
        if y is not NotImplemented:
            return y
    op = "gemm"
    m = a.shape[0] if isinstance(a, Tensor) else 0
    k, a_gs, a_gs_value, a_layout = _activations(op, a, a_scales, a_global_scale, a_scale_layout, m, 2)
    n, b_gs, b_gs_value, b_layout = _weight(op, b, b_scales, b_global_scale, b_scale_layout, b_prepacked, n, k, a.get_device())
    out_dtype = _epilogue(op, bias, out.dtype if out is not None else out_dtype, a, n)
    args = (a, a_scales, a_gs, a_gs_value, a_layout, b, b_scales, b_gs, b_gs_value, b_layout, bool(b_prepacked), int(n), k,
            bias, float(alpha))
    if out is None:
        return _pick(op, _gemm, a)(*args, out_dtype, bool(weights_static))
    _tensor(out, op, "out", tuple(_ACT), 2, a.get_device())
    _shape(out, op, "out", [m, n])
    if workspace is not None:
        _tensor(workspace, op, "workspace", (torch.uint8,), 1, a.get_device())
    _pick(op + "_out", _gemm_launch, a)(out, workspace, *args, bool(weights_static))
    return out


def _grouped_fields(g, layout, group_ends, masked_m, expected_m, per_group, row_index, a_rows, gemm_fields):
    if per_group:  # the device scales are per group, not per row (GroupedGemmArgs)
        gemm_fields = gemm_fields[:_A_PER_ROW] + (False,) + gemm_fields[_A_PER_ROW + 1:]
    return (*gemm_fields, g, layout, _ptr(group_ends), _ptr(masked_m), expected_m, per_group, _ptr(row_index), a_rows)


_A_PER_ROW = 25  # GemmArgs' a_fp4.global_scale.per_row field


def _grouped_gemm_launch(out: Tensor, workspace: Optional[Tensor], a: Tensor, a_scales: Optional[Tensor],
                         a_gs: Optional[Tensor], a_gs_value: float, a_layout: int, b: Tensor, b_scales: Optional[Tensor],
                         b_gs: Optional[Tensor], b_gs_value: float, b_layout: int, b_prepacked: bool, n: int, k: int,
                         bias: Optional[Tensor], alpha: float, weights_static: bool, groups: int, layout: int,
                         group_ends: Optional[Tensor], masked_m: Optional[Tensor], expected_m: int,
                         a_gs_per_group: bool, row_index: Optional[Tensor]) -> None:
    m = out.shape[-2]
    fields = (m, n, k, a, a_scales, a_gs, a_gs_value, a_layout, b, b_scales, b_gs, b_gs_value, b_layout, b_prepacked,
              bias, alpha, out, weights_static)
    fields = _grouped_fields(groups, layout, group_ends, masked_m, expected_m, a_gs_per_group, row_index,
                             a.shape[0] if row_index is not None else 0, _gemm_fields(*fields, workspace))
    if a_scales is not None and workspace is None:
        fields = _with_workspace(fields, a.new_empty([_C.grouped_gemm_workspace_bytes(*fields)], dtype=torch.uint8))
    _launch(_C.grouped_gemm, a.get_device(), *fields)


def _grouped_out_shape(a, n, row_index):
    return [row_index.shape[0], n] if row_index is not None else list(a.shape[:-1]) + [n]


def _grouped_gemm(a: Tensor, a_scales: Optional[Tensor], a_gs: Optional[Tensor], a_gs_value: float, a_layout: int,
                  b: Tensor, b_scales: Optional[Tensor], b_gs: Optional[Tensor], b_gs_value: float, b_layout: int,
                  b_prepacked: bool, n: int, k: int, bias: Optional[Tensor], alpha: float, out_dtype: torch.dtype,
                  weights_static: bool, groups: int, layout: int, group_ends: Optional[Tensor],
                  masked_m: Optional[Tensor], expected_m: int, a_gs_per_group: bool,
                  row_index: Optional[Tensor]) -> Tensor:
    out = a.new_empty(_grouped_out_shape(a, n, row_index), dtype=out_dtype)
    _grouped_gemm_launch(out, None, a, a_scales, a_gs, a_gs_value, a_layout, b, b_scales, b_gs, b_gs_value, b_layout,
                         b_prepacked, n, k, bias, alpha, weights_static, groups, layout, group_ends, masked_m, expected_m,
                         a_gs_per_group, row_index)
    return out


_register("grouped_gemm", _grouped_gemm,
          lambda a, *r: a.new_empty(_grouped_out_shape(a, r[10], r[22]), dtype=r[14]))
_register("grouped_gemm_out", _grouped_gemm_launch, _none, ("out", "workspace"))


def grouped_gemm(a, b, b_scales=None, b_global_scale=1.0, *, group_ends=None, masked_m=None, expected_m=0,
                 b_scale_layout="linear", b_prepacked=False, n=None, a_scales=None, a_global_scale=None,
                 a_scale_layout="linear", a_global_scale_per_group=False, row_index=None, bias=None, alpha=1.0,
                 out_dtype=None, out=None, workspace=None, weights_static=False):
    """A grouped GEMM (mixture of experts), one kernel for all groups.

    Contiguous layout (group_ends: int32 [G] cumulative row ends, on the device): a [m, k] sorted
    by group, out [m, n]. Masked layout (masked_m: int32 [G] rows per group): a [G, m, k], out
    [G, m, n]. b: [G, n, k/2] with b_scales [G, n, k/16] (or the flat swizzled buffers), or
    prepacked [G * prepacked_bytes(n, k)] with n. b_global_scale: float, or fp32 tensor of 1 or G
    values (per expert). W4A4 as in gemm; a_global_scale_per_group: a_global_scale holds G values
    (ModelOpt's per-expert input_scale). row_index (contiguous layout; moe_route's, int32 [m]):
    sorted row r is row row_index[r] of a [tokens, k] (W4A4: [tokens, k/2], a_scales the tokens'
    too), so the tokens need no sorted copy; out [m, n]. Rows past the last group end are left
    alone.
    """
    op = "grouped_gemm"
    if (group_ends is None) == (masked_m is None):
        bad(op, "give exactly one of group_ends (contiguous layout) and masked_m (masked layout)")
    if isinstance(a, Tensor) and not a.is_cuda:  # before the other tensors are compared with a's device
        bad(op, f"a must be on a CUDA device, got {a.device}")
    counts = group_ends if group_ends is not None else masked_m
    cname = "group_ends" if group_ends is not None else "masked_m"
    dev = a.get_device() if isinstance(a, Tensor) else None
    _tensor(counts, op, cname, (torch.int32,), 1, dev)
    groups = counts.shape[0]
    layout = GROUPED_LAYOUTS["contiguous" if group_ends is not None else "masked"]
    dim = 2 if group_ends is not None else 3
    if isinstance(a, Tensor) and a.dim() == dim and dim == 3:
        _shape(a, op, "a", [groups] + list(a.shape[1:]))
        if a.stride(0) != a.shape[1] * a.stride(1):
            bad(op, f"a's groups must follow one another (stride(0) = m * stride(1)), got strides {list(a.stride())}")
    rows_of_all = a.shape[0] * (a.shape[1] if dim == 3 else 1) if isinstance(a, Tensor) and a.dim() == dim else 0
    if row_index is not None:
        if group_ends is None:
            bad(op, "row_index needs the contiguous layout (group_ends)")
        _tensor(row_index, op, "row_index", (torch.int32,), 1, dev)
    if a_global_scale_per_group:
        if not isinstance(a_global_scale, Tensor):
            bad(op, f"a_global_scale_per_group needs a_global_scale as an fp32 tensor of {groups} values (one per group)")
        _shape(a_global_scale, op, "a_global_scale", [groups])
    elif row_index is not None and isinstance(a_global_scale, Tensor) and a_global_scale.numel() > 1:
        bad(op, "with row_index a_global_scale is one value or one per group (a_global_scale_per_group=True), "
                "not per row")
    gs_rows = groups if a_global_scale_per_group else rows_of_all
    k, a_gs, a_gs_value, a_layout = _activations(op, a, a_scales, a_global_scale, a_scale_layout, rows_of_all, dim, gs_rows)
    n, b_gs, b_gs_value, b_layout = _weight(op, b, b_scales, b_global_scale, b_scale_layout, b_prepacked, n, k, a.get_device(),
                                            groups)
    out_dtype = _epilogue(op, bias, out.dtype if out is not None else out_dtype, a, n)
    args = (a, a_scales, a_gs, a_gs_value, a_layout, b, b_scales, b_gs, b_gs_value, b_layout, bool(b_prepacked), int(n), k,
            bias, float(alpha))
    grouped = (groups, layout, group_ends, masked_m, int(expected_m), bool(a_global_scale_per_group), row_index)
    if out is None:
        return _pick(op, _grouped_gemm, a)(*args, out_dtype, bool(weights_static), *grouped)
    _tensor(out, op, "out", tuple(_ACT), dim, a.get_device())
    _shape(out, op, "out", _grouped_out_shape(a, n, row_index))
    _pick(op + "_out", _grouped_gemm_launch, a)(out, workspace, *args, bool(weights_static), *grouped)
    return out


# moe_route and moe_combine --------------------------------------------------------------------


def _moe_route_alloc(ids, groups):
    tokens, topk = ids.shape
    i32 = torch.int32
    return (ids.new_empty([groups], dtype=i32), ids.new_empty([tokens * topk], dtype=i32),
            ids.new_empty([tokens, topk], dtype=i32), ids.new_empty([groups], dtype=i32))


def _moe_route_launch(group_ends: Tensor, row_index: Tensor, positions: Tensor, counts: Tensor, ids: Tensor, groups: int,
                      first_expert: int) -> None:
    fields = [ids.data_ptr(), _INDEX[ids.dtype], ids.shape[0], ids.shape[1], groups, first_expert, counts.data_ptr(),
              group_ends.data_ptr(), row_index.data_ptr(), positions.data_ptr()]
    # the sort over several CTAs counts into a workspace: torch's allocator, as for every output
    workspace_bytes = _C.moe_route_workspace_bytes(*fields, None, 0)
    workspace = ids.new_empty([max(workspace_bytes, 1)], dtype=torch.uint8)
    _launch(_C.moe_route, ids.get_device(), *fields, workspace.data_ptr(), workspace_bytes)


def _moe_route(ids: Tensor, groups: int, first_expert: int) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    outs = _moe_route_alloc(ids, groups)
    _moe_route_launch(*outs, ids, groups, first_expert)
    return outs


_register("moe_route", _moe_route, lambda ids, groups, first: _moe_route_alloc(ids, groups))
_register("moe_route_out", _moe_route_launch, _none, ("group_ends", "row_index", "positions", "counts"))


def moe_route(topk_ids, groups, *, first_expert=0, out=None):
    """Router top-k ids [tokens, topk] (int32 or int64) sorted on the device into grouped_gemm's
    contiguous layout, for this rank's experts [first_expert, first_expert + groups) (ids outside
    are skipped). No host synchronization (CUDA-graph safe). -> int32 (group_ends [groups],
    row_index [tokens * topk] (the token of each sorted row, -1 past the routed rows),
    positions [tokens, topk] (each entry's sorted row, -1 where skipped: moe_combine's input),
    counts [groups]). out=: those four tensors (static buffers)."""
    op = "moe_route"
    ids = _tensor(topk_ids, op, "topk_ids", tuple(_INDEX), 2)
    if not ids.is_contiguous():
        bad(op, f"topk_ids must be contiguous, got strides {list(ids.stride())}")
    groups, first_expert = int(groups), int(first_expert)
    if out is None:
        return _pick(op, _moe_route, ids)(ids, groups, first_expert)
    if not isinstance(out, (tuple, list)) or len(out) != 4:
        bad(op, "out must be (group_ends, row_index, positions, counts)")
    tokens, topk = ids.shape
    for t, name, shape in zip(out, ("group_ends", "row_index", "positions", "counts"),
                              ([groups], [tokens * topk], [tokens, topk], [groups])):
        _tensor(t, op, f"out's {name}", (torch.int32,), len(shape), ids.get_device())
        _shape(t, op, f"out's {name}", shape)
        if not t.is_contiguous():
            bad(op, f"out's {name} must be contiguous")
    _pick(op + "_out", _moe_route_launch, ids)(*out, ids, groups, first_expert)
    return tuple(out)


def _moe_combine_launch(out: Tensor, d: Tensor, positions: Tensor, weights: Tensor) -> None:
    tokens, topk = positions.shape
    _launch(_C.moe_combine, d.get_device(), d.data_ptr(), _ACT[d.dtype], d.stride(0), d.shape[0], positions.data_ptr(),
            weights.data_ptr(), _ACT[weights.dtype], tokens, topk, d.shape[1], out.data_ptr(), _ACT[out.dtype],
            out.stride(0))


def _moe_combine(d: Tensor, positions: Tensor, weights: Tensor, out_dtype: torch.dtype) -> Tensor:
    out = d.new_empty([positions.shape[0], d.shape[1]], dtype=out_dtype)
    _moe_combine_launch(out, d, positions, weights)
    return out


_register("moe_combine", _moe_combine, lambda d, p, w, dt: d.new_empty([p.shape[0], d.shape[1]], dtype=dt))
_register("moe_combine_out", _moe_combine_launch, _none, ("out",))


def moe_combine(d, positions, weights, *, out_dtype=None, out=None):
    """The experts' outputs back to their tokens: out[t, :] = sum_j weights[t, j] *
    d[positions[t, j], :] in fp32 (in the order of j), rounded once to out_dtype (default d's).
    d [d_rows, n] (grouped_gemm's output); positions int32 [tokens, topk] (moe_route's; one
    outside [0, d_rows) adds nothing); weights fp32 or bf16 [tokens, topk]."""
    op = "moe_combine"
    d = _tensor(d, op, "d", tuple(_ACT))
    pos = _tensor(positions, op, "positions", (torch.int32,), 2, d.get_device())
    w = _tensor(weights, op, "weights", (torch.float32, torch.bfloat16), 2, d.get_device())
    _shape(w, op, "weights", list(pos.shape))
    if not (pos.is_contiguous() and w.is_contiguous()):
        bad(op, "positions and weights must be contiguous")
    if out is None:
        out_dtype = d.dtype if out_dtype is None else out_dtype
        if out_dtype not in _ACT:
            bad(op, f"out_dtype must be bfloat16, float16 or float32, got {out_dtype}")
        return _pick(op, _moe_combine, d)(d, pos, w, out_dtype)
    _tensor(out, op, "out", tuple(_ACT), 2, d.get_device())
    _shape(out, op, "out", [pos.shape[0], d.shape[1]])
    _pick(op + "_out", _moe_combine_launch, d)(out, d, pos, w)
    return out


# mhc_rmsnorm_quantize -------------------------------------------------------------------------


def _mhc_alloc(x, layout, mode, want):
    rows, k = x.shape[0], x.shape[2]
    return (*_qout_alloc(x, rows, k, layout, mode),
            *(x.new_empty([rows, k] if w else [0], dtype=x.dtype) for w in want[:2]),
            x.new_empty([rows] if want[2] else [0], dtype=torch.float32))


def _mhc_rmsnorm_quantize_launch(q: Tensor, scales: Tensor, g_out: Tensor, h: Tensor, normed: Tensor, inv_rms: Tensor,
                                 x: Tensor, mix: Tensor, weight: Tensor, eps: float, gs: Optional[Tensor],
                                 gs_value: float, layout: int, mode: int, want_h: bool, want_normed: bool,
                                 want_inv_rms: bool) -> None:
    rows, n_hc, k = x.shape
    _launch(_C.mhc_rmsnorm_quantize, x.get_device(), x.data_ptr(), _ACT[x.dtype], rows, n_hc, k, x.stride(0),
            x.stride(1), mix.data_ptr(), mix.stride(0), weight.data_ptr(), weight.dtype != x.dtype, eps,
            *_qout_fields(q, scales, layout, mode, gs, gs_value, g_out, rows),
            h.data_ptr() if want_h else 0, h.stride(0) if want_h else 0,
            normed.data_ptr() if want_normed else 0, normed.stride(0) if want_normed else 0,
            inv_rms.data_ptr() if want_inv_rms else 0)


def _mhc_rmsnorm_quantize(x: Tensor, mix: Tensor, weight: Tensor, eps: float, gs: Optional[Tensor], gs_value: float,
                          layout: int, mode: int, want_h: bool, want_normed: bool,
                          want_inv_rms: bool) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
    outs = _mhc_alloc(x, layout, mode, (want_h, want_normed, want_inv_rms))
    _mhc_rmsnorm_quantize_launch(*outs, x, mix, weight, eps, gs, gs_value, layout, mode, want_h, want_normed, want_inv_rms)
    return outs


_register("mhc_rmsnorm_quantize", _mhc_rmsnorm_quantize,
          lambda x, mix, w, eps, gs, gv, layout, mode, wh, wn, wi: _mhc_alloc(x, layout, mode, (wh, wn, wi)))
_register("mhc_rmsnorm_quantize_out", _mhc_rmsnorm_quantize_launch, _none,
          ("q", "scales", "g_out", "h", "normed", "inv_rms"))


def mhc_rmsnorm_quantize(x, mix, weight, eps=1e-6, global_scale=None, *, scale_layout="linear", return_h=False,
                         return_normed=False, return_inv_rms=False, out=None, out_scales=None, out_global_scale=None,
                         out_h=None, out_normed=None, out_inv_rms=None):
    """The pre-block of manifold-constrained hyper-connections (mHC) in one pass: x [rows, n_hc, k]
    (n_hc <= 4 streams), mix fp32 [rows, n_hc]: h = RN(sum_i mix[r, i] * x[r, i, :]), then
    rmsnorm_quantize(h, weight, eps) (weight [k] in x's dtype, or fp32). -> (q, scales, global
    scale), plus (h, normed, inv_rms) when any return_* asks (None for those not asked). The
    global scale is given or computed per row."""
    op = "mhc_rmsnorm_quantize"
    x = _tensor(x, op, "x", tuple(_ACT), 3)
    rows, n_hc, k = x.shape
    dev = x.get_device()
    mix = _tensor(mix, op, "mix", (torch.float32,), 2, dev)
    _shape(mix, op, "mix", [rows, n_hc])
    weight = _tensor(weight, op, "weight", (x.dtype, torch.float32), 1, dev)
    _shape(weight, op, "weight", [k])
    mode = _mode(op, global_scale, "per_row", (SCALE_MODES["per_row"],))
    layout = enum_value(SCALE_LAYOUTS, scale_layout, op, "scale_layout")
    gs, gs_value = _gscale(global_scale, op, "global_scale", dev, rows)
    want = (bool(return_h or out_h is not None), bool(return_normed or out_normed is not None),
            bool(return_inv_rms or out_inv_rms is not None))
    if out is None:
        q, scales, g_out, h, normed, inv_rms = _pick(op, _mhc_rmsnorm_quantize, x)(x, mix, weight, float(eps), gs, gs_value,
                                                                                layout, mode, *want)
    else:
        q, scales, g_out = out, out_scales, _out_scale(op, global_scale, mode, x, rows, out_global_scale)
        _qout_check(op, q, scales, g_out, rows, k, layout, mode, dev)
        extra = []
        for t, w, name, dtype, shape in ((out_h, want[0], "out_h", x.dtype, [rows, k]),
                                         (out_normed, want[1], "out_normed", x.dtype, [rows, k]),
                                         (out_inv_rms, want[2], "out_inv_rms", torch.float32, [rows])):
            if w:
                _tensor(t, op, name, (dtype,), len(shape), dev)
                _shape(t, op, name, shape)
            extra.append(t if w else x.new_empty([0], dtype=dtype))
        h, normed, inv_rms = extra
        _pick(op + "_out", _mhc_rmsnorm_quantize_launch, x)(q, scales, g_out, h, normed, inv_rms, x, mix, weight,
                                                         float(eps), gs, gs_value, layout, mode, *want)
    result = _result(q, scales, g_out, mode, global_scale)
    if not any(want):
        return result
    return (*result, *(t if w else None for t, w in zip((h, normed, inv_rms), want)))


# tune and prewarm -----------------------------------------------------------------------------


def _dtype_code(op, name, dtype):
    if dtype in (torch.uint8, "nvfp4") or dtype in _FP4:
        return _NVFP4
    if dtype not in _ACT:
        bad(op, f"{name} must be bfloat16, float16, float32 or 'nvfp4', got {dtype}")
    return _ACT[dtype]


def tune(n, k, *, a_dtype=torch.bfloat16, out_dtype=torch.bfloat16, scale_layout="linear", bias_dtype=None,
         b_prepacked=False, m=0, runs=10, a_scale_layout="swizzled128x4", groups=0, grouped_layout="contiguous"):
    """Times gemm's candidate tiles for the weight shape [n, k] on the current GPU per M bucket
    (or only m's bucket) and records the fastest in the cache root's tuning table, where every
    later gemm of that problem finds it. a_dtype "nvfp4" (W4A4) with a_scale_layout, the
    activation scales' layout (sm_120a's kernels read them). groups > 0: a grouped weight of that
    many experts (grouped_layout "contiguous" or "masked"), whose buckets are rows per expert
    (grouped_gemm's expected_m), up to 512. -> one dict per bucket (winner, heuristic, times)."""
    op = "tune"
    layout = enum_value(SCALE_LAYOUTS, scale_layout, op, "scale_layout")
    a_layout = enum_value(SCALE_LAYOUTS, a_scale_layout, op, "a_scale_layout")
    g_layout = enum_value(GROUPED_LAYOUTS, grouped_layout, op, "grouped_layout")
    bias_code = _dtype_code(op, "bias_dtype", bias_dtype) if bias_dtype is not None else 0
    device = torch.cuda.current_device()
    # the library tunes in the thread's current CUDA context: a synchronize creates torch's
    # primary one and makes it current, even as the process's first CUDA call
    torch.cuda.synchronize(device)
    with torch.cuda.device(device):
        return _C.tune(int(n), int(k), _dtype_code(op, "a_dtype", a_dtype), _dtype_code(op, "out_dtype", out_dtype), layout,
                       bias_dtype is not None, bias_code, bool(b_prepacked), a_layout, int(groups), g_layout, int(m),
                       int(runs))


def prewarm(n, k, ms=(1,), *, a_dtype=torch.bfloat16, out_dtype=None, scale_layout="linear", b_prepacked=False,
            bias_dtype=None, device=None, load=False):
    """Loads (compiling where the disk cache misses) the kernels a gemm of weight shape [n, k]
    runs for each M in `ms`, by running it once on scratch tensors (random weight, unit scales)
    and synchronizing. A CUDA graph captured afterwards finds them loaded. For a layer in hand,
    Nvfp4Linear.prewarm(ms) does the same with its own weight. load=True: no call, no scratch
    tensors; the library's prewarm of this variant loads its kernels for every M (`ms` unused),
    W4A4's activations quantized with linear scales; returns how many are loaded."""
    device = torch.device("cuda", torch.cuda.current_device()) if device is None else torch.device(device)
    if load:
        return prewarm_load(device, n, k, _prewarm_variants(a_dtype, out_dtype, scale_layout, b_prepacked, bias_dtype))
    gen = torch.Generator(device=device).manual_seed(0)
    b = torch.randint(0, 256, (n, k // 2), dtype=torch.uint8, device=device, generator=gen)
    scales = torch.full((n, k // 16), 0x38, dtype=torch.uint8, device=device).view(torch.float8_e4m3fn)
    if scale_layout != "linear":
        scales = convert_scales(scales, n, k, dst_layout=scale_layout)
    if b_prepacked:
        b, scales = prepack(b, scales, scale_layout=scale_layout), None
    bias = torch.zeros(n, dtype=bias_dtype, device=device) if bias_dtype is not None else None
    w4a4 = _dtype_code("prewarm", "a_dtype", a_dtype) == _NVFP4
    for m in ms:
        if w4a4:
            a = torch.randint(0, 256, (m, k // 2), dtype=torch.uint8, device=device, generator=gen)
            a_scales = torch.full((m, k // 16), 0x38, dtype=torch.uint8, device=device).view(torch.float8_e4m3fn)
            gemm(a, b, scales, 1.0, b_scale_layout=scale_layout, b_prepacked=b_prepacked, n=n, a_scales=a_scales,
                 a_global_scale=1.0, bias=bias, out_dtype=out_dtype)
        else:
            a = torch.randn(m, k, dtype=a_dtype, device=device, generator=gen)
            gemm(a, b, scales, 1.0, b_scale_layout=scale_layout, b_prepacked=b_prepacked, n=n, bias=bias,
                 out_dtype=out_dtype)
    torch.cuda.synchronize(device)


def _prewarm_variants(a_dtype, out_dtype, scale_layout, b_prepacked, bias_dtype, in_dtype=torch.bfloat16):
    """The prewarm variant fields of one gemm (see `nvfp4-jit prewarm --help`)."""
    name = {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32"}
    w4a4 = _dtype_code("prewarm", "a_dtype", a_dtype) == _NVFP4
    layout = "prepacked" if b_prepacked else "swizzled" if scale_layout == "swizzled128x4" else "linear"
    fields = [f"a-dtype={'nvfp4' if w4a4 else name[a_dtype]}", f"d-dtype={name[out_dtype or torch.bfloat16]}",
              f"bias={'none' if bias_dtype is None else name[bias_dtype]}", f"b-layout={layout}", "a-scales=linear"]
    if w4a4:
        fields += ["a-from=quantize", f"in-dtype={name[in_dtype]}"]
    return " ".join(fields)


def prewarm_load(device, n, k, variants):
    """nvfp4::jit::prewarm with load for weight shape [n, k] and `variants` (manifest fields), into
    `device`'s context (torch's); returns how many kernels are loaded there."""
    with torch.cuda.device(torch.device(device)):
        r = prewarm_shapes("prewarm", "", 1, 1, [(int(n), int(k), 1)], None, 0, variants, 0, True)
    if r["failed"]:
        raise Error(f"nvfp4_jit.prewarm: {r['failed']} of {r['kernels']} kernels failed; the first: {r['errors'][0]}")
    return r["loaded"]


# Last, once every op is defined: their CUDA kernels.
NATIVE_TORCH_OPS = _register_cuda_kernels()
