"""The mixture-of-experts ops around grouped_gemm: moe_stage (tokens quantized, routing copied),
moe_route (the routed rows sorted by expert) and moe_combine (the experts' outputs back to
their tokens)."""
from typing import Optional, Tuple

import torch
from torch import Tensor

from .. import _C
from .._core import SCALE_LAYOUTS, SCALE_MODES, bad, enum_value, fields
from ._launch import _launch
from ._qout import _mode, _out_scale, _qout_alloc, _qout_check, _qout_fields, _result
from ._registry import _none, _pick, _register
from ._tensors import _ACT, _INDEX, _gscale, _ptr, _shape, _tensor

_MOE_STAGE = fields("moe_stage")
_MOE_ROUTE = fields("moe_route")
_MOE_ROUTE_WORKSPACE_BYTES = fields("moe_route_workspace_bytes")
_MOE_COMBINE = fields("moe_combine")


def _moe_stage_alloc(x, ids, weights, layout, mode, ids_out_dtype):
    return (*_qout_alloc(x, x.shape[0], x.shape[1], layout, mode), ids.new_empty(list(ids.shape), dtype=ids_out_dtype),
            torch.empty_like(weights) if weights is not None else x.new_empty([0], dtype=torch.float32))


def _moe_stage_launch(q: Tensor, scales: Tensor, g_out: Tensor, ids_out: Tensor, weights_out: Tensor, x: Tensor,
                      ids: Tensor, weights: Optional[Tensor], gs: Optional[Tensor], gs_value: float, layout: int,
                      mode: int) -> None:
    rows, k = x.shape
    _launch(_C.moe_stage, x.get_device(), _MOE_STAGE({
        "tokens": x.data_ptr(), "in_dtype": _ACT[x.dtype], "in_row_stride": x.stride(0), "rows": rows, "k": k,
        **_qout_fields(q, scales, layout, mode, gs, gs_value, g_out), "topk": ids.shape[1], "topk_ids": ids.data_ptr(),
        "topk_weights": _ptr(weights), "topk_ids_out": ids_out.data_ptr(),
        "topk_weights_out": weights_out.data_ptr() if weights is not None else 0, "topk_ids_type": _INDEX[ids.dtype],
        "topk_ids_out_type": _INDEX[ids_out.dtype]}))


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


def _moe_route_alloc(ids, groups):
    tokens, topk = ids.shape
    i32 = torch.int32
    return (ids.new_empty([groups], dtype=i32), ids.new_empty([tokens * topk], dtype=i32),
            ids.new_empty([tokens, topk], dtype=i32), ids.new_empty([groups], dtype=i32))


def _moe_route_launch(group_ends: Tensor, row_index: Tensor, positions: Tensor, counts: Tensor, ids: Tensor, groups: int,
                      first_expert: int) -> None:
    fields = {"topk_ids": ids.data_ptr(), "topk_ids_type": _INDEX[ids.dtype], "tokens": ids.shape[0],
              "topk": ids.shape[1], "groups": groups, "first_expert": first_expert, "counts": counts.data_ptr(),
              "group_ends": group_ends.data_ptr(), "row_index": row_index.data_ptr(), "positions": positions.data_ptr(),
              "workspace": 0, "workspace_bytes": 0}
    # the sort over several CTAs counts into a workspace: torch's allocator, as for every output
    workspace_bytes = _C.moe_route_workspace_bytes(*_MOE_ROUTE_WORKSPACE_BYTES(fields))
    workspace = ids.new_empty([max(workspace_bytes, 1)], dtype=torch.uint8)
    fields["workspace"], fields["workspace_bytes"] = workspace.data_ptr(), workspace_bytes
    _launch(_C.moe_route, ids.get_device(), _MOE_ROUTE(fields))


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
    _launch(_C.moe_combine, d.get_device(), _MOE_COMBINE({
        "d": d.data_ptr(), "d_dtype": _ACT[d.dtype], "d_row_stride": d.stride(0), "d_rows": d.shape[0],
        "positions": positions.data_ptr(), "weights": weights.data_ptr(), "weights_dtype": _ACT[weights.dtype],
        "tokens": tokens, "topk": topk, "n": d.shape[1], "out": out.data_ptr(), "out_dtype": _ACT[out.dtype],
        "out_row_stride": out.stride(0)}))


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
