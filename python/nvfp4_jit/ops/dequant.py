"""dequantize: NVFP4 back to bf16 / fp16 / fp32, rows optionally gathered."""
from typing import Optional

import torch
from torch import Tensor

from .. import _C
from .._core import SCALE_LAYOUTS, bad, enum_value, fields
from ._launch import _launch
from ._registry import _compiling, _none, _pick, _register
from ._tensors import _ACT, _FP4, _LAYOUT_NAMES, _gs_values, _gscale, _ptr, _scales, _shape, _tensor

_DEQUANTIZE = fields("dequantize")


def _dequantize_alloc(q, k, dtype, row_indices):
    return q.new_empty([row_indices.shape[0] if row_indices is not None else q.shape[0], k], dtype=dtype)


def _dequantize_launch(out: Tensor, q: Tensor, scales: Tensor, gs: Optional[Tensor], gs_value: float, k: int,
                       layout: int, row_indices: Optional[Tensor]) -> None:
    value, device_ptr, per_row = _gs_values(gs, gs_value)
    _launch(_C.dequantize, q.get_device(), _DEQUANTIZE({
        "src.data": q.data_ptr(), "src.row_stride_bytes": q.stride(0), "src.scales": scales.data_ptr(),
        "src.scale_layout": layout, "src.global_scale.value": value, "src.global_scale.device_ptr": device_ptr,
        "src.global_scale.per_row": per_row, "src_rows": q.shape[0], "k": k, "out": out.data_ptr(),
        "out_dtype": _ACT[out.dtype], "out_row_stride": out.stride(0), "row_indices": _ptr(row_indices),
        "rows": out.shape[0] if row_indices is not None else 0}))


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
