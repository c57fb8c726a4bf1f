"""quantize and the quantizers with a fused prologue: rmsnorm_quantize, swiglu_quantize,
mhc_rmsnorm_quantize."""
from typing import Optional, Tuple

import torch
from torch import Tensor

from .. import _C
from .._core import SCALE_LAYOUTS, SCALE_MODES, bad, enum_value, fields
from ._launch import _launch
from ._qout import _mode, _out_scale, _qout_alloc, _qout_check, _qout_fields, _result
from ._registry import _compiling, _none, _pick, _register
from ._tensors import _ACT, _LAYOUT_NAMES, _MODE_NAMES, _gs_values, _gscale, _ptr, _shape, _tensor

_QUANTIZE = fields("quantize")
_RMSNORM_QUANTIZE = fields("rmsnorm_quantize")
_SWIGLU_QUANTIZE = fields("swiglu_quantize")
_MHC_RMSNORM_QUANTIZE = fields("mhc_rmsnorm_quantize")


def _quantize_launch(q: Tensor, scales: Tensor, g_out: Tensor, x: Tensor, gs: Optional[Tensor], gs_value: float,
                     layout: int, mode: int) -> None:
    rows, k = x.shape
    value, device_ptr, per_row = _gs_values(gs, gs_value)
    # QuantizeArgs holds QuantizedOutput's fields flat, under their own names
    _launch(_C.quantize, x.get_device(), _QUANTIZE({
        "in": x.data_ptr(), "in_dtype": _ACT[x.dtype], "in_row_stride": x.stride(0), "rows": rows, "k": k,
        "out": q.data_ptr(), "out_row_stride_bytes": q.stride(0), "scales": scales.data_ptr(), "scale_layout": layout,
        "scale_mode": mode, "global_scale.value": value, "global_scale.device_ptr": device_ptr,
        "global_scale.per_row": per_row, "global_scale_out": _ptr(g_out) if mode != SCALE_MODES["given"] else 0}))


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


def _rmsnorm_alloc(x, layout, mode, want_normed, want_inv_rms):
    rows, k = x.shape
    return (*_qout_alloc(x, rows, k, layout, mode), x.new_empty([rows, k] if want_normed else [0], dtype=x.dtype),
            x.new_empty([rows] if want_inv_rms else [0], dtype=torch.float32))


def _rmsnorm_quantize_launch(q: Tensor, scales: Tensor, g_out: Tensor, normed: Tensor, inv_rms: Tensor, x: Tensor,
                             weight: Tensor, eps: float, gs: Optional[Tensor], gs_value: float, layout: int, mode: int,
                             want_normed: bool, want_inv_rms: bool) -> None:
    rows, k = x.shape
    _launch(_C.rmsnorm_quantize, x.get_device(), _RMSNORM_QUANTIZE({
        "in": x.data_ptr(), "in_dtype": _ACT[x.dtype], "in_row_stride": x.stride(0), "rows": rows, "k": k,
        "weight": weight.data_ptr(), "weight_fp32": weight.dtype != x.dtype, "eps": eps,
        **_qout_fields(q, scales, layout, mode, gs, gs_value, g_out),
        "normed": normed.data_ptr() if want_normed else 0, "normed_row_stride": normed.stride(0) if want_normed else 0,
        "inv_rms": inv_rms.data_ptr() if want_inv_rms else 0}))


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


def _swiglu_quantize_launch(q: Tensor, scales: Tensor, g_out: Tensor, x: Tensor, interleave: int, gs: Optional[Tensor],
                            gs_value: float, layout: int, mode: int) -> None:
    rows, k = x.shape[0], x.shape[1] // 2
    _launch(_C.swiglu_quantize, x.get_device(), _SWIGLU_QUANTIZE({
        "in": x.data_ptr(), "in_dtype": _ACT[x.dtype], "in_row_stride": x.stride(0), "rows": rows, "k": k,
        "interleave": interleave, **_qout_fields(q, scales, layout, mode, gs, gs_value, g_out)}))


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
    _launch(_C.mhc_rmsnorm_quantize, x.get_device(), _MHC_RMSNORM_QUANTIZE({
        "in": x.data_ptr(), "in_dtype": _ACT[x.dtype], "rows": rows, "n_hc": n_hc, "k": k,
        "in_row_stride": x.stride(0), "in_hc_stride": x.stride(1), "mix": mix.data_ptr(),
        "mix_row_stride": mix.stride(0), "weight": weight.data_ptr(), "weight_fp32": weight.dtype != x.dtype, "eps": eps,
        **_qout_fields(q, scales, layout, mode, gs, gs_value, g_out),
        "h": h.data_ptr() if want_h else 0, "h_row_stride": h.stride(0) if want_h else 0,
        "normed": normed.data_ptr() if want_normed else 0, "normed_row_stride": normed.stride(0) if want_normed else 0,
        "inv_rms": inv_rms.data_ptr() if want_inv_rms else 0}))


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
