"""The quantized output (q, scales, global scale) that quantize, rmsnorm_quantize,
swiglu_quantize, moe_stage and mhc_rmsnorm_quantize write: allocation, checks, fields."""
import torch

from .._core import SCALE_MODES, bad, enum_value
from ._tensors import _FP4, _gs_values, _ptr, _scale_shape, _scales, _shape, _tensor

_GIVEN = SCALE_MODES["given"]


def _qout_alloc(x, rows, k, layout, mode):
    q = x.new_empty([rows, k // 2], dtype=torch.uint8)
    scales = x.new_empty(_scale_shape(rows, k, layout), dtype=torch.float8_e4m3fn)
    g_out = x.new_empty([0 if mode == SCALE_MODES["given"] else (rows if mode == SCALE_MODES["per_row"] else 1)],
                        dtype=torch.float32)
    return q, scales, g_out


def _qout_fields(q, scales, layout, mode, gs, gs_value, g_out):
    """A QuantizedOutput's fields, named as the ops' nested `out` ("out.data", ...)."""
    value, device_ptr, per_row = _gs_values(gs, gs_value)
    return {"out.data": q.data_ptr(), "out.row_stride_bytes": q.stride(0), "out.scales": scales.data_ptr(),
            "out.scale_layout": layout, "out.scale_mode": mode, "out.global_scale.value": value,
            "out.global_scale.device_ptr": device_ptr, "out.global_scale.per_row": per_row,
            "out.global_scale_out": _ptr(g_out) if mode != _GIVEN else 0}


def _qout_check(op, q, scales, g_out, rows, k, layout, mode, device, names=("out", "out_scales")):
    _tensor(q, op, names[0], _FP4, 2, device)
    _shape(q, op, names[0], [rows, k // 2])
    _scales(scales, op, names[1], rows, k, layout, device)
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
