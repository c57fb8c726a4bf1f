"""gemm and grouped_gemm: out = alpha * A . dequant(B)^T (+ bias), B an NVFP4 weight (per group),
A bf16 / fp16 (W4A16) or NVFP4 (W4A4); optionally SwiGLU fused in (epilogue="swiglu", its output
also as NVFP4: out_fp4) or run on FP8 tensor cores (precision="w4a8"); gemm also with A's RMSNorm
(a_rmsnorm_weight) and a residual add (residual) in the kernel."""
from typing import Optional

import torch
from torch import Tensor

from .. import _C
from .._core import GEMM_EPILOGUES, GEMM_PRECISIONS, GROUPED_LAYOUTS, SCALE_LAYOUTS, SCALE_MODES, bad, enum_value, fields
from ._launch import _launch
from ._qout import _qout_check, _qout_fields
from ._registry import _compiling, _named, _none, _pick, _register
from ._tensors import (_ACT, _FP4, _LAYOUT_NAMES, _NVFP4, _gs_values, _gscale, _prepacked_bytes, _ptr, _scales, _shape,
                       _tensor)

_GEMM = fields("gemm")
_EPILOGUE_NAMES = {v: k for k, v in GEMM_EPILOGUES.items()}
_PRECISION_NAMES = {v: k for k, v in GEMM_PRECISIONS.items()}
_GEMM_WORKSPACE_BYTES = fields("gemm_workspace_bytes")
_GROUPED_GEMM = fields("grouped_gemm")
_GROUPED_GEMM_WORKSPACE_BYTES = fields("grouped_gemm_workspace_bytes")


def _gemm_fields(m, n, k, a, a_scales, a_gs, a_gs_value, a_layout, b, b_scales, b_gs, b_gs_value, b_layout,
                 b_prepacked, bias, alpha, out, weights_static, ws, epilogue, precision, a_rmsnorm_weight=None,
                 a_rmsnorm_eps=1e-6, residual=None, b_swiglu_interleave=0):
    """GemmArgs' fields by name. a: activations, or packed NVFP4 when a_scales is set; out None:
    NVFP4 D (its d_fp4 fields set by the caller)."""
    w4a4 = a_scales is not None
    b_value, b_ptr, b_per_row = _gs_values(b_gs, b_gs_value)
    a_value, a_ptr, a_per_row = _gs_values(a_gs, a_gs_value)
    return {"m": m, "n": n, "k": k, "a": 0 if w4a4 else a.data_ptr(), "a_dtype": _NVFP4 if w4a4 else _ACT[a.dtype],
            "a_row_stride": 0 if w4a4 else a.stride(-2), "b.data": b.data_ptr(),
            "b.row_stride_bytes": 0 if b_prepacked else b.stride(-2), "b.scales": _ptr(b_scales),
            "b.scale_layout": b_layout, "b.global_scale.value": b_value, "b.global_scale.device_ptr": b_ptr,
            "b.global_scale.per_row": b_per_row, "d": _ptr(out), "d_dtype": _ACT[out.dtype] if out is not None else _NVFP4,
            "d_row_stride": out.stride(-2) if out is not None else 0, "bias": _ptr(bias), "bias_dtype": _ACT[bias.dtype] if bias is not None else 0,
            "alpha": alpha, "a_fp4.data": a.data_ptr() if w4a4 else 0,
            "a_fp4.row_stride_bytes": a.stride(-2) if w4a4 else 0, "a_fp4.scales": _ptr(a_scales),
            "a_fp4.scale_layout": a_layout, "a_fp4.global_scale.value": a_value,
            "a_fp4.global_scale.device_ptr": a_ptr, "a_fp4.global_scale.per_row": a_per_row,
            "workspace": _ptr(ws), "workspace_bytes": ws.numel() if ws is not None else 0,
            "b_prepacked": b_prepacked, "weights_static": weights_static, "epilogue": epilogue, "precision": precision,
            **_fusion_fields(a_rmsnorm_weight, a_rmsnorm_eps, residual), "b_swiglu_interleave": b_swiglu_interleave}


def _fusion_fields(a_rmsnorm_weight=None, a_rmsnorm_eps=1e-6, residual=None):
    """GemmArgs' RMSNorm-of-A and residual fields by name (None: neither)."""
    return {"a_rmsnorm_weight": _ptr(a_rmsnorm_weight),
            "a_rmsnorm_weight_fp32": a_rmsnorm_weight is not None and a_rmsnorm_weight.dtype == torch.float32,
            "a_rmsnorm_eps": a_rmsnorm_eps, "residual": _ptr(residual),
            "residual_row_stride": residual.stride(-2) if residual is not None else 0, **_d_fp4_fields()}


def _d_fp4_fields(q=None, scales=None, layout=0, gs=None, gs_value=1.0):
    """GemmArgs' d_fp4 fields (NVFP4 D of the SwiGLU epilogue: q, its scales in `layout`, the
    global scale given) by name; all unset without q."""
    if q is None:
        return {"d_fp4.data": 0, "d_fp4.row_stride_bytes": 0, "d_fp4.scales": 0, "d_fp4.scale_layout": 0,
                "d_fp4.scale_mode": SCALE_MODES["given"], "d_fp4.global_scale.value": 1.0,
                "d_fp4.global_scale.device_ptr": 0, "d_fp4.global_scale.per_row": False, "d_fp4.global_scale_out": 0}
    return {"d_fp4." + key[len("out."):]: value
            for key, value in _qout_fields(q, scales, layout, SCALE_MODES["given"], gs, gs_value, None).items()}


def _out_cols(n, epilogue):
    """D's columns: n, or I = n/2 where SwiGLU pairs gate row i with up row i."""
    return n // 2 if epilogue == GEMM_EPILOGUES["swiglu"] else n


def _modes(op, epilogue, precision):
    """The epilogue and precision names -> their enum values."""
    return (enum_value(GEMM_EPILOGUES, epilogue, op, "epilogue"), enum_value(GEMM_PRECISIONS, precision, op, "precision"))


def _with_workspace(fields, a, nbytes):
    """fields with the workspace of `nbytes` (W4A4's, W4A8's, or W4A16's rows gathered through
    row_index) allocated through torch (caching allocator, current stream); none where 0."""
    if nbytes == 0:
        return
    ws = a.new_empty([nbytes], dtype=torch.uint8)
    fields["workspace"], fields["workspace_bytes"] = ws.data_ptr(), ws.numel()


def _gemm_launch(out: Tensor, workspace: Optional[Tensor], a: Tensor, a_scales: Optional[Tensor], a_gs: Optional[Tensor],
                 a_gs_value: float, a_layout: int, b: Tensor, b_scales: Optional[Tensor], b_gs: Optional[Tensor],
                 b_gs_value: float, b_layout: int, b_prepacked: bool, n: int, k: int, bias: Optional[Tensor],
                 alpha: float, weights_static: bool, epilogue: int, precision: int, a_rmsnorm_weight: Optional[Tensor],
                 a_rmsnorm_eps: float, residual: Optional[Tensor], b_swiglu_interleave: int = 0) -> None:
    fields = _gemm_fields(out.shape[0], n, k, a, a_scales, a_gs, a_gs_value, a_layout, b, b_scales, b_gs, b_gs_value,
                          b_layout, b_prepacked, bias, alpha, out, weights_static, workspace, epilogue, precision,
                          a_rmsnorm_weight, a_rmsnorm_eps, residual, b_swiglu_interleave)
    _run_gemm(fields, a, a_scales, precision, workspace)


def _run_gemm(fields, a, a_scales, precision, workspace):
    """_C.gemm on GemmArgs' fields, W4A4's or W4A8's workspace allocated where none is given."""
    if (a_scales is not None or precision) and workspace is None:
        _with_workspace(fields, a, _C.gemm_workspace_bytes(*_GEMM_WORKSPACE_BYTES(fields)))
    _launch(_C.gemm, a.get_device(), _GEMM(fields))


def _gemm_fp4_launch(q: Tensor, q_scales: Tensor, workspace: Optional[Tensor], a: Tensor, a_scales: Optional[Tensor],
                     a_gs: Optional[Tensor], a_gs_value: float, a_layout: int, b: Tensor, b_scales: Optional[Tensor],
                     b_gs: Optional[Tensor], b_gs_value: float, b_layout: int, b_prepacked: bool, n: int, k: int,
                     bias: Optional[Tensor], alpha: float, weights_static: bool, epilogue: int, precision: int,
                     q_gs: Optional[Tensor], q_gs_value: float, q_layout: int, b_swiglu_interleave: int = 0) -> None:
    """gemm with the SwiGLU epilogue's D as NVFP4: q [m, n/4] and q_scales in q_layout, its values
    divided by the global scale q_gs (or q_gs_value)."""
    fields = _gemm_fields(q.shape[0], n, k, a, a_scales, a_gs, a_gs_value, a_layout, b, b_scales, b_gs, b_gs_value,
                          b_layout, b_prepacked, bias, alpha, None, weights_static, workspace, epilogue, precision,
                          b_swiglu_interleave=b_swiglu_interleave)
    fields.update(_d_fp4_fields(q, q_scales, q_layout, q_gs, q_gs_value))
    _run_gemm(fields, a, a_scales, precision, workspace)


def _gemm(a: Tensor, a_scales: Optional[Tensor], a_gs: Optional[Tensor], a_gs_value: float, a_layout: int, b: Tensor,
          b_scales: Optional[Tensor], b_gs: Optional[Tensor], b_gs_value: float, b_layout: int, b_prepacked: bool, n: int,
          k: int, bias: Optional[Tensor], alpha: float, out_dtype: torch.dtype, weights_static: bool, epilogue: int,
          precision: int, a_rmsnorm_weight: Optional[Tensor], a_rmsnorm_eps: float, residual: Optional[Tensor],
          b_swiglu_interleave: int = 0) -> Tensor:
    if not b_swiglu_interleave:  # the fast path's arguments hold no interleave
        a_global = None if a_scales is None else (a_gs_value if a_gs is None else a_gs)
        y = _C.gemm_checked(a, b, b_scales, b_gs_value if b_gs is None else b_gs, _LAYOUT_NAMES[b_layout], b_prepacked, n,
                            a_scales, a_global, _LAYOUT_NAMES[a_layout], bias, alpha, out_dtype, None, None, weights_static,
                            _EPILOGUE_NAMES[epilogue], _PRECISION_NAMES[precision], a_rmsnorm_weight, a_rmsnorm_eps,
                            residual)
        if y is not NotImplemented:
            return y
    out = a.new_empty([a.shape[0], _out_cols(n, epilogue)], dtype=out_dtype)
    _gemm_launch(out, None, a, a_scales, a_gs, a_gs_value, a_layout, b, b_scales, b_gs, b_gs_value, b_layout, b_prepacked,
                 n, k, bias, alpha, weights_static, epilogue, precision, a_rmsnorm_weight, a_rmsnorm_eps, residual,
                 b_swiglu_interleave)
    return out


_register("gemm", _gemm, _named(_gemm, lambda a, n, out_dtype, epilogue, **_: a.new_empty([a.shape[0], _out_cols(n, epilogue)],
                                                                                          dtype=out_dtype)))
_register("gemm_out", _gemm_launch, _none, ("out", "workspace"))
_register("gemm_fp4_out", _gemm_fp4_launch, _none, ("q", "q_scales", "workspace"))


def _fp4_out(op, out_fp4, out_global_scale, out_scale_layout, out, out_dtype, epilogue, m, cols, device):
    """out_fp4 = (q, scales), NVFP4 D of the SwiGLU epilogue, checked -> (q, scales, gs, gs_value, layout)."""
    if epilogue != GEMM_EPILOGUES["swiglu"]:
        bad(op, "out_fp4 (NVFP4 D) is the SwiGLU epilogue's output: give epilogue='swiglu'")
    if out is not None or out_dtype is not None:
        bad(op, "give out_fp4 (NVFP4 D) or out / out_dtype, not both")
    if not isinstance(out_fp4, (tuple, list)) or len(out_fp4) != 2:
        bad(op, "out_fp4 must be a pair (q [m, n/4] uint8 or float4_e2m1fn_x2, scales)")
    layout = enum_value(SCALE_LAYOUTS, out_scale_layout, op, "out_scale_layout")
    q, scales = out_fp4
    _qout_check(op, q, scales, None, m, cols, layout, SCALE_MODES["given"], device, ("out_fp4[0]", "out_fp4[1]"))
    gs, gs_value = _gscale(out_global_scale, op, "out_global_scale", device, m)
    return q, scales, gs, gs_value, layout


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


def _prologue(op, a_rmsnorm_weight, a_rmsnorm_eps, a, k):
    """a_rmsnorm_weight: [k] in A's 16-bit dtype or fp32, A BF16 / FP16; its eps a number (the
    library checks its range)."""
    if not isinstance(a_rmsnorm_eps, (int, float)) or isinstance(a_rmsnorm_eps, bool):
        bad(op, f"a_rmsnorm_eps must be a number, got {a_rmsnorm_eps!r}")
    if a_rmsnorm_weight is None:
        return
    if a.dtype not in (torch.bfloat16, torch.float16):
        bad(op, "a_rmsnorm_weight (RMSNorm of A in the GEMM) needs bf16 / fp16 activations (W4A16), "
                f"got a of {str(a.dtype).replace('torch.', '')}")
    _tensor(a_rmsnorm_weight, op, "a_rmsnorm_weight", (a.dtype, torch.float32), 1, a.get_device())
    _shape(a_rmsnorm_weight, op, "a_rmsnorm_weight", [k])


def _residual(op, residual, m, cols, out_dtype, device):
    """residual: [m, cols] in out's dtype, unit column stride."""
    if residual is None:
        return
    _tensor(residual, op, "residual", (out_dtype,), 2, device)
    _shape(residual, op, "residual", [m, cols])
    if residual.stride(-1) != 1:
        bad(op, f"residual's columns must be contiguous (stride(-1) = 1), got strides {list(residual.stride())}")


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
         weights_static=False, epilogue="none", precision="exact", a_rmsnorm_weight=None, a_rmsnorm_eps=1e-6,
         residual=None, out_fp4=None, out_global_scale=None, out_scale_layout="linear", b_swiglu_interleave=0):
    """out[m, n] = alpha * A . dequant(B)^T (+ bias) (+ residual), fp32 accumulation.

    a: [m, k] bf16/fp16 (W4A16), or packed NVFP4 [m, k/2] (uint8 / float4_e2m1fn_x2) with
    a_scales and a_global_scale (W4A4). b: the ModelOpt weight [n, k/2] with b_scales
    (float8_e4m3fn [n, k/16], or the flat swizzled buffer) and b_global_scale (weight_scale_2:
    float, or fp32 tensor on the device, which CUDA graphs see change), or prepack()'s output
    with b_prepacked=True and n. out_dtype defaults to a's dtype (bf16 for W4A4). out=: a static
    [m, n] buffer. weights_static: see the C++ GemmArgs (programmatic dependent launch).
    epilogue="swiglu": b is a gate_up weight [2I, k], on sm_90a prepacked with prepack(...,
    swiglu_interleave=...), on sm_100a / sm_120a (W4A4) as stored: gate rows [0, I) then up rows,
    or b_swiglu_interleave=g (a power of two dividing I) for a checkpoint that alternates groups of
    g gate rows and g up rows; out is [m, I] = silu(gate) * up from the fp32 sums (bias: [2I]).
    With out_fp4 = (q, scales) (every arch) that D is written as NVFP4 instead, for a W4A4 down
    projection: q [m, I/2] (uint8 or float4_e2m1fn_x2) and its E4M3 scales in out_scale_layout,
    exactly what quantize() makes of the fp32 values with out_global_scale (a float or an fp32
    tensor of 1 or m values: one per row); returns (q, scales).
    precision="w4a8" (sm_90a, prepacked b; a bf16/fp16 or NVFP4): FP8 tensor cores on A rounded to
    E4M3 per row (NVFP4 A decoded exactly first) and the weight folded to E4M3, about 2.5% relative
    error (docs/formats.md, "W4A8");
    calls of at most 256 rows run the exact mode. See the C++ GemmEpilogue and GemmPrecision.
    a_rmsnorm_weight (sm_90a, bf16/fp16 a, exact, no grouping): a [k] weight in a's dtype or fp32;
    a's rows go in un-normalized and the kernel applies RMSNorm (eps a_rmsnorm_eps) itself, so
    no rmsnorm kernel runs before it. residual (sm_90a, bf16/fp16 a, exact, no fused epilogue):
    [m, n] in out's dtype, added in fp32 before the one rounding (may be out itself). Numerics:
    the C++ GemmArgs::a_rmsnorm_weight and GemmArgs::residual.
    """
    op = "gemm"
    interleave = _interleave(op, b_swiglu_interleave)
    if not _compiling() and out_fp4 is None and not interleave:
        y = _C.gemm_checked(a, b, b_scales, b_global_scale, b_scale_layout, b_prepacked, n, a_scales, a_global_scale,
                            a_scale_layout, bias, alpha, out_dtype, out, workspace, weights_static, epilogue, precision,
                            a_rmsnorm_weight, a_rmsnorm_eps, residual)
        if y is not NotImplemented:
            return y
    modes = _modes(op, epilogue, precision)
    m = a.shape[0] if isinstance(a, Tensor) else 0
    k, a_gs, a_gs_value, a_layout = _activations(op, a, a_scales, a_global_scale, a_scale_layout, m, 2)
    n, b_gs, b_gs_value, b_layout = _weight(op, b, b_scales, b_global_scale, b_scale_layout, b_prepacked, n, k, a.get_device())
    if out_fp4 is not None:
        if a_rmsnorm_weight is not None or residual is not None:
            bad(op, "out_fp4 (NVFP4 D) takes no a_rmsnorm_weight or residual")
        q, scales, q_gs, q_gs_value, q_layout = _fp4_out(op, out_fp4, out_global_scale, out_scale_layout, out, out_dtype,
                                                        modes[0], m, _out_cols(n, modes[0]), a.get_device())
        _epilogue(op, bias, None, a, n)
        if workspace is not None:
            _tensor(workspace, op, "workspace", (torch.uint8,), 1, a.get_device())
        _pick(op + "_fp4_out", _gemm_fp4_launch, a)(q, scales, workspace, a, a_scales, a_gs, a_gs_value, a_layout, b,
                                                     b_scales, b_gs, b_gs_value, b_layout, bool(b_prepacked), int(n), k,
                                                     bias, float(alpha), bool(weights_static), *modes, q_gs, q_gs_value,
                                                     q_layout, interleave)
        return q, scales
    if out_global_scale is not None:
        bad(op, "out_global_scale is for out_fp4 (NVFP4 D)")
    out_dtype = _epilogue(op, bias, out.dtype if out is not None else out_dtype, a, n)
    _prologue(op, a_rmsnorm_weight, a_rmsnorm_eps, a, k)
    _residual(op, residual, m, _out_cols(n, modes[0]), out_dtype, a.get_device())
    args = (a, a_scales, a_gs, a_gs_value, a_layout, b, b_scales, b_gs, b_gs_value, b_layout, bool(b_prepacked), int(n), k,
            bias, float(alpha))
    fused = (a_rmsnorm_weight, float(a_rmsnorm_eps), residual)
    if out is None:
        return _pick(op, _gemm, a)(*args, out_dtype, bool(weights_static), *modes, *fused, interleave)
    _tensor(out, op, "out", tuple(_ACT), 2, a.get_device())
    _shape(out, op, "out", [m, _out_cols(n, modes[0])])
    if workspace is not None:
        _tensor(workspace, op, "workspace", (torch.uint8,), 1, a.get_device())
    _pick(op + "_out", _gemm_launch, a)(out, workspace, *args, bool(weights_static), *modes, *fused, interleave)
    return out


def _interleave(op, b_swiglu_interleave):
    """b_swiglu_interleave as an int (the library checks it against the epilogue, the weight and
    the arch)."""
    if not isinstance(b_swiglu_interleave, int) or isinstance(b_swiglu_interleave, bool):
        bad(op, f"b_swiglu_interleave must be an int (0, or a group size g), got {b_swiglu_interleave!r}")
    return b_swiglu_interleave


def _grouped_fields(g, layout, group_ends, masked_m, expected_m, per_group, row_index, a_rows, gemm_fields,
                    combine=(None, None, None, None)):
    """GroupedGemmArgs' fields by name: gemm_fields (GemmArgs', updated in place) and its own;
    combine: the moe_combine epilogue's (positions, row_token, weights, out) or Nones."""
    if per_group:  # the device scales are per group, not per row (GroupedGemmArgs)
        gemm_fields["a_fp4.global_scale.per_row"] = False
    positions, row_token, weights, out = combine
    gemm_fields.update({"groups": g, "layout": layout, "group_ends": _ptr(group_ends), "masked_m": _ptr(masked_m),
                        "expected_m": expected_m, "a_global_scale_per_group": per_group, "row_index": _ptr(row_index),
                        "a_rows": a_rows, "combine.positions": _ptr(positions), "combine.row_token": _ptr(row_token),
                        "combine.weights": _ptr(weights), "combine.weights_dtype": _ACT[weights.dtype] if weights is not None else 2,
                        "combine.tokens": positions.shape[0] if positions is not None else 0,
                        "combine.topk": positions.shape[1] if positions is not None else 0, "combine.out": _ptr(out),
                        "combine.out_dtype": _ACT[out.dtype] if out is not None else 0,
                        "combine.out_row_stride": out.stride(0) if out is not None else 0, "combine.counters": 0,
                        "combine.counters_bytes": 0})
    return gemm_fields


def _grouped_gemm_launch(out: Tensor, workspace: Optional[Tensor], a: Tensor, a_scales: Optional[Tensor],
                         a_gs: Optional[Tensor], a_gs_value: float, a_layout: int, b: Tensor, b_scales: Optional[Tensor],
                         b_gs: Optional[Tensor], b_gs_value: float, b_layout: int, b_prepacked: bool, n: int, k: int,
                         bias: Optional[Tensor], alpha: float, weights_static: bool, groups: int, layout: int,
                         group_ends: Optional[Tensor], masked_m: Optional[Tensor], expected_m: int,
                         a_gs_per_group: bool, row_index: Optional[Tensor], epilogue: int, precision: int,
                         combine_positions: Optional[Tensor], combine_row_token: Optional[Tensor],
                         combine_weights: Optional[Tensor], combine_out: Optional[Tensor],
                         b_swiglu_interleave: int = 0) -> None:
    m = out.shape[-2]
    fields = (m, n, k, a, a_scales, a_gs, a_gs_value, a_layout, b, b_scales, b_gs, b_gs_value, b_layout, b_prepacked,
              bias, alpha, out, weights_static)
    fields = _grouped_fields(groups, layout, group_ends, masked_m, expected_m, a_gs_per_group, row_index,
                             a.shape[0] if row_index is not None else 0,
                             _gemm_fields(*fields, workspace, epilogue, precision,
                                          b_swiglu_interleave=b_swiglu_interleave),
                             (combine_positions, combine_row_token, combine_weights, combine_out))
    if (a_scales is not None or precision or row_index is not None) and workspace is None:
        _with_workspace(fields, a, _C.grouped_gemm_workspace_bytes(*_GROUPED_GEMM_WORKSPACE_BYTES(fields)))
    _launch(_C.grouped_gemm, a.get_device(), _GROUPED_GEMM(fields))


def _grouped_out_shape(a, n, row_index, epilogue):
    cols = _out_cols(n, epilogue)
    return [row_index.shape[0], cols] if row_index is not None else list(a.shape[:-1]) + [cols]


def _grouped_gemm(a: Tensor, a_scales: Optional[Tensor], a_gs: Optional[Tensor], a_gs_value: float, a_layout: int,
                  b: Tensor, b_scales: Optional[Tensor], b_gs: Optional[Tensor], b_gs_value: float, b_layout: int,
                  b_prepacked: bool, n: int, k: int, bias: Optional[Tensor], alpha: float, out_dtype: torch.dtype,
                  weights_static: bool, groups: int, layout: int, group_ends: Optional[Tensor],
                  masked_m: Optional[Tensor], expected_m: int, a_gs_per_group: bool,
                  row_index: Optional[Tensor], epilogue: int, precision: int, b_swiglu_interleave: int = 0) -> Tensor:
    out = a.new_empty(_grouped_out_shape(a, n, row_index, epilogue), dtype=out_dtype)
    _grouped_gemm_launch(out, None, a, a_scales, a_gs, a_gs_value, a_layout, b, b_scales, b_gs, b_gs_value, b_layout,
                         b_prepacked, n, k, bias, alpha, weights_static, groups, layout, group_ends, masked_m, expected_m,
                         a_gs_per_group, row_index, epilogue, precision, None, None, None, None, b_swiglu_interleave)
    return out


_register("grouped_gemm", _grouped_gemm,
          _named(_grouped_gemm, lambda a, n, row_index, out_dtype, epilogue, **_: a.new_empty(
              _grouped_out_shape(a, n, row_index, epilogue), dtype=out_dtype)))
_register("grouped_gemm_out", _grouped_gemm_launch, _none, ("out", "workspace", "combine_out"))


def grouped_gemm(a, b, b_scales=None, b_global_scale=1.0, *, group_ends=None, masked_m=None, expected_m=0,
                 b_scale_layout="linear", b_prepacked=False, n=None, a_scales=None, a_global_scale=None,
                 a_scale_layout="linear", a_global_scale_per_group=False, row_index=None, bias=None, alpha=1.0,
                 out_dtype=None, out=None, workspace=None, weights_static=False, epilogue="none", precision="exact",
                 combine_positions=None, combine_row_token=None, combine_weights=None, combine_out=None,
                 b_swiglu_interleave=0):
    """A grouped GEMM (mixture of experts), one kernel for all groups.

    Contiguous layout (group_ends: int32 [G] cumulative row ends, on the device): a [m, k] sorted
    by group, out [m, n]. Masked layout (masked_m: int32 [G] rows per group): a [G, m, k], out
    [G, m, n]. b: [G, n, k/2] with b_scales [G, n, k/16] (or the flat swizzled buffers), or
    prepacked [G * prepacked_bytes(n, k)] with n. b_global_scale: float, or fp32 tensor of 1 or G
    values (per expert). W4A4 as in gemm; a_global_scale_per_group: a_global_scale holds G values
    (ModelOpt's per-expert input_scale). row_index (contiguous layout; moe_route's, int32 [m]):
    sorted row r is row row_index[r] of a [tokens, k] (W4A4: [tokens, k/2], a_scales the tokens'
    too), so the tokens need no sorted copy; out [m, n]. Rows past the last group end are left
    alone. W4A16 copies the rows into `workspace` in sorted order first (uint8, as many bytes as
    the library's grouped_gemm_workspace_bytes; none given: torch's allocator). epilogue,
    precision and b_swiglu_interleave: as in gemm (out's last dimension is I = n/2 with "swiglu").
    epilogue="moe_combine" (contiguous layout; an MoE down projection on moe_route's
    rows): out is D as always, and combine_out [tokens, n] (bf16, fp16 or fp32) gets each token's
    router-weighted sum of its rows, exactly moe_combine's, deterministic; combine_positions and
    combine_row_token are moe_route's positions [tokens, topk] and row_index [m], combine_weights
    the router weights [tokens, topk] (fp32 or bf16). A token none of whose entries this call
    holds (padding ids, other ranks' experts) keeps its combine_out row. Returns combine_out.
    """
    op = "grouped_gemm"
    modes = _modes(op, epilogue, precision)
    interleave = _interleave(op, b_swiglu_interleave)
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
    combine = _combine(op, modes[0], combine_positions, combine_row_token, combine_weights, combine_out, n, dev)
    fused_combine = modes[0] == GEMM_EPILOGUES["moe_combine"]
    if out is None and not fused_combine:
        return _pick(op, _grouped_gemm, a)(*args, out_dtype, bool(weights_static), *grouped, *modes, interleave)
    if out is None:  # the combine's D, written as always; the caller asked for the combined rows
        out = a.new_empty(_grouped_out_shape(a, n, row_index, modes[0]), dtype=out_dtype)
    _tensor(out, op, "out", tuple(_ACT), dim, a.get_device())
    _shape(out, op, "out", _grouped_out_shape(a, n, row_index, modes[0]))
    _pick(op + "_out", _grouped_gemm_launch, a)(out, workspace, *args, bool(weights_static), *grouped, *modes, *combine,
                                                interleave)
    return combine_out if fused_combine else out


def _combine(op, epilogue, positions, row_token, weights, out, n, device):
    """The moe_combine epilogue's tensors (all four with it, none without) -> a tuple of them."""
    given = [x is not None for x in (positions, row_token, weights, out)]
    if epilogue != GEMM_EPILOGUES["moe_combine"]:
        if any(given):
            bad(op, 'combine_positions, combine_row_token, combine_weights and combine_out go with epilogue="moe_combine"')
        return (None, None, None, None)
    if not all(given):
        bad(op, 'epilogue="moe_combine" needs combine_positions, combine_row_token, combine_weights and combine_out')
    _tensor(positions, op, "combine_positions", (torch.int32,), 2, device)
    tokens, topk = positions.shape
    _tensor(row_token, op, "combine_row_token", (torch.int32,), 1, device)
    _tensor(weights, op, "combine_weights", (torch.float32, torch.bfloat16), 2, device)
    _shape(weights, op, "combine_weights", [tokens, topk])
    _tensor(out, op, "combine_out", tuple(_ACT), 2, device)
    _shape(out, op, "combine_out", [tokens, n])
    if not positions.is_contiguous() or not weights.is_contiguous() or not row_token.is_contiguous():
        bad(op, "combine_positions, combine_row_token and combine_weights must be contiguous")
    return (positions, row_token, weights, out)
