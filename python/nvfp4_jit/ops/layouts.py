"""The weight's layouts: convert_scales (block scales between layouts) and prepack (gemm's own
layout of a weight and its scales)."""
import torch
from torch import Tensor

from .. import _C
from .._core import SCALE_LAYOUTS, enum_value, fields, prepacked_bytes
from ._launch import _launch
from ._registry import _none, _pick, _register
from ._tensors import _FP4, _scale_shape, _scales, _shape, _tensor

_CONVERT_SCALES = fields("convert_scales")
_PREPACK = fields("prepack")


def _convert_scales_launch(out: Tensor, scales: Tensor, rows: int, k: int, src_layout: int, dst_layout: int) -> None:
    _launch(_C.convert_scales, scales.get_device(), _CONVERT_SCALES({
        "src": scales.data_ptr(), "src_layout": src_layout, "dst": out.data_ptr(), "dst_layout": dst_layout,
        "rows": rows, "k": k}))


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


def _prepack_launch(out: Tensor, weight: Tensor, scales: Tensor, layout: int, swiglu_interleave: int) -> None:
    n, k = weight.shape[0], 2 * weight.shape[1]
    _launch(_C.prepack, weight.get_device(), _PREPACK({
        "weight.data": weight.data_ptr(), "weight.row_stride_bytes": weight.stride(0), "weight.scales": scales.data_ptr(),
        "weight.scale_layout": layout, "weight.global_scale.value": 1.0, "weight.global_scale.device_ptr": 0,
        "weight.global_scale.per_row": False, "n": n, "k": k, "out": out.data_ptr(),
        "swiglu_interleave": swiglu_interleave}))


def _prepack(weight: Tensor, scales: Tensor, layout: int, swiglu_interleave: int) -> Tensor:
    out = weight.new_empty([prepacked_bytes(weight.shape[0], 2 * weight.shape[1])], dtype=torch.uint8)
    _prepack_launch(out, weight, scales, layout, swiglu_interleave)
    return out


_register("prepack", _prepack,
          lambda w, s, layout, swiglu_interleave: w.new_empty([prepacked_bytes(w.shape[0], 2 * w.shape[1])],
                                                              dtype=torch.uint8))
_register("prepack_out", _prepack_launch, _none, ("out",))


def prepack(weight, weight_scale, *, scale_layout="linear", out=None, swiglu_interleave=None):
    """A weight [n, k/2] (uint8 / float4_e2m1fn_x2) and its scales -> gemm's own layout, uint8
    [prepacked_bytes(n, k)] (pass it to gemm with b_prepacked=True, n=n; same bits).
    swiglu_interleave: a gate_up weight for gemm(..., epilogue="swiglu"), its rows as stored: 0
    gate rows [0, n/2) then up rows (ModelOpt), g > 0 groups of g gate rows each followed by g
    up rows; None: a plain weight (a swiglu gemm on it writes NaN, and a plain one on a swiglu
    weight too)."""
    op = "prepack"
    interleave = -1 if swiglu_interleave is None else int(swiglu_interleave)
    weight = _tensor(weight, op, "weight", _FP4)
    n, k = weight.shape[0], 2 * weight.shape[1]
    layout = enum_value(SCALE_LAYOUTS, scale_layout, op, "scale_layout")
    _scales(weight_scale, op, "weight_scale", n, k, layout, weight.get_device())
    if out is None:
        return _pick(op, _prepack, weight)(weight, weight_scale, layout, interleave)
    _tensor(out, op, "out", (torch.uint8,), 1, weight.get_device())
    _shape(out, op, "out", [prepacked_bytes(n, k)])
    _pick(op + "_out", _prepack_launch, weight)(out, weight, weight_scale, layout, interleave)
    return out
