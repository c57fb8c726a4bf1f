"""The library's CPU references on numpy arrays: the GPU kernels' exact bits, on the host.

For tests and for quantizing weights offline without a GPU. Inputs are C-contiguous 2-D
arrays: float32, float16, or BF16 held as uint16 with in_dtype="bf16" (numpy has no bf16).
NVFP4 data is uint8 [rows, k/2]; scales are uint8 (E4M3 bits): [rows, k/16] when linear,
[rows padded to 128, k/16 padded to 4] when swizzled128x4; global scales are float32 (a scalar, or one per row).
"""
try:
    import numpy as np
except ImportError as e:  # numpy is optional for the rest of the package
    raise ImportError("nvfp4_jit.cpu needs numpy: pip install numpy (or nvfp4-jit[cpu])") from e

from . import _C
from ._core import (DTYPES, SCALE_BYTES, SCALE_LAYOUTS, SCALE_MODES, InvalidArgument, bad, enum_value, fields,
                    prepacked_bytes, scale_bytes)

_NP_DTYPES = {np.dtype(np.float32): "fp32", np.dtype(np.float16): "fp16"}


# The binding's CPU references, called by field name (_core.fields).
_QUANTIZE = fields("cpu_quantize")
_DEQUANTIZE = fields("cpu_dequantize")
_RMSNORM_QUANTIZE = fields("cpu_rmsnorm_quantize")
_SWIGLU_QUANTIZE = fields("cpu_swiglu_quantize")
_MOE_STAGE = fields("cpu_moe_stage")
_MHC_RMSNORM_QUANTIZE = fields("cpu_mhc_rmsnorm_quantize")
_MOE_ROUTE = fields("cpu_moe_route")
_MOE_COMBINE = fields("cpu_moe_combine")
_CONVERT_SCALES = fields("cpu_convert_scales")
_PREPACK = fields("cpu_prepack")


def _scale_bytes(layout, rows, k):
    return _C.scale_bytes(*SCALE_BYTES({"layout": layout, "rows": rows, "k": k}))


def _addr(a):
    return a.__array_interface__["data"][0] if a is not None else 0


def _matrix(a, op, name, dtypes=None):
    if not isinstance(a, np.ndarray):
        bad(op, f"{name} must be a numpy array, got {type(a).__name__}")
    if a.ndim != 2:
        bad(op, f"{name} must be 2-D, got shape {a.shape}")
    if dtypes is not None and a.dtype not in dtypes:
        bad(op, f"{name} must be {' or '.join(str(d) for d in dtypes)}, got {a.dtype}")
    return np.ascontiguousarray(a)


def _input(x, in_dtype, op, name="x"):
    x = _matrix(x, op, name)
    if in_dtype is None:
        if x.dtype not in _NP_DTYPES:
            bad(op, f"{name} must be float32 or float16 (or uint16 with in_dtype='bf16'), got {x.dtype}")
        in_dtype = _NP_DTYPES[x.dtype]
    elif in_dtype == "bf16" and x.dtype != np.uint16:
        bad(op, f"{name} with in_dtype='bf16' must hold BF16 bits as uint16, got {x.dtype}")
    return x, enum_value(DTYPES, in_dtype, op, "in_dtype")


def _scale_shape(rows, k, layout, nbytes):
    """[rows, k/16] when linear; the swizzled buffer as [rows padded to 128, nbytes / that]."""
    return (rows, k // 16) if layout == 0 else ((rows + 127) // 128 * 128, nbytes // ((rows + 127) // 128 * 128))


def _given(global_scale, rows, op):
    """A given global scale: a float, or a float32 array of 1 or `rows` values (per row).
    -> (value, host address, per_row, the array to keep alive)."""
    if isinstance(global_scale, np.ndarray):
        g = np.ascontiguousarray(global_scale, np.float32).reshape(-1)
        if g.size not in (1, rows):
            bad(op, f"global_scale must hold 1 or {rows} values, got {g.size}")
        return 1.0, _addr(g), g.size > 1, g
    return float(global_scale), 0, False, None


def _output(rows, k, scale_layout, global_scale, op):
    """A QuantizedOutput's buffers and fields by name ("out.data", ...): (q, scales, computed
    global scales or None, fields, what must stay alive during the call). A None global scale is
    computed per row."""
    layout = enum_value(SCALE_LAYOUTS, scale_layout, op, "scale_layout")
    try:
        nbytes = scale_bytes(rows, k, scale_layout)  # the library checks k
    except InvalidArgument as e:  # said of this function's input, not of the size query
        bad(op, f"x of shape ({rows}, {k}): {str(e).split(': ', 1)[-1]}")
    q = np.empty((rows, k // 2), np.uint8)
    scales = np.empty(_scale_shape(rows, k, layout, nbytes), np.uint8)
    g_out, keep = None, None
    if global_scale is None:
        g_out = np.empty(rows, np.float32)
        mode, (value, ptr, per_row) = SCALE_MODES["per_row"], (1.0, 0, False)
    else:
        mode = SCALE_MODES["given"]
        value, ptr, per_row, keep = _given(global_scale, rows, op)
    return q, scales, g_out, {
        "out.data": _addr(q), "out.row_stride_bytes": 0, "out.scales": _addr(scales), "out.scale_layout": layout,
        "out.scale_mode": mode, "out.global_scale.value": value, "out.global_scale.device_ptr": ptr,
        "out.global_scale.per_row": per_row, "out.global_scale_out": _addr(g_out)}, keep


def _input_fields(x, dt, rows, k, data="in"):
    """The input matrix's fields of the quantizing ops (C-contiguous: row stride 0 means dense)."""
    return {data: _addr(x), "in_dtype": dt, "in_row_stride": 0, "rows": rows, "k": k}


def quantize(x, global_scale=None, *, scale_mode="per_tensor", scale_layout="linear", in_dtype=None):
    """x [rows, k] -> (q uint8 [rows, k/2], scales uint8, global scale): given (a float, or a
    float32 array of 1 or `rows` values), or computed per tensor / per row (float32 array)."""
    op = "cpu.quantize"
    x, dt = _input(x, in_dtype, op)
    rows, k = x.shape
    mode = SCALE_MODES["given"] if global_scale is not None else enum_value(SCALE_MODES, scale_mode, op, "scale_mode")
    q, scales, g_out, out, keep = _output(rows, k, scale_layout, global_scale, op)
    if g_out is not None and mode != SCALE_MODES["per_row"]:
        g_out = np.empty(1, np.float32)
    # QuantizeArgs holds QuantizedOutput's fields flat, under their own names
    _C.cpu_quantize(*_QUANTIZE({
        **_input_fields(x, dt, rows, k), "out": out["out.data"], "out_row_stride_bytes": 0, "scales": out["out.scales"],
        "scale_layout": out["out.scale_layout"], "scale_mode": mode, "global_scale.value": out["out.global_scale.value"],
        "global_scale.device_ptr": out["out.global_scale.device_ptr"],
        "global_scale.per_row": out["out.global_scale.per_row"], "global_scale_out": _addr(g_out)}))
    return q, scales, (global_scale if g_out is None else g_out)


def dequantize(q, scales, global_scale, *, k=None, scale_layout="linear", out_dtype="fp32", row_indices=None):
    """NVFP4 [src_rows, k] -> out_dtype [rows, k] (float32, float16, or BF16 bits as uint16).
    global_scale: a float, or a float32 array of src_rows values (per row)."""
    q = _matrix(q, "cpu.dequantize", "q", [np.dtype(np.uint8)])
    src_rows = q.shape[0]
    k = 2 * q.shape[1] if k is None else k
    layout = enum_value(SCALE_LAYOUTS, scale_layout, "cpu.dequantize", "scale_layout")
    scales = np.ascontiguousarray(scales, np.uint8)
    if scales.nbytes < _scale_bytes(layout, src_rows, k):
        bad("cpu.dequantize", f"scales holds {scales.nbytes} bytes, [{src_rows}, {k}] needs "
                              f"{_scale_bytes(layout, src_rows, k)}")
    g_arr = None
    if isinstance(global_scale, np.ndarray):
        g_arr = np.ascontiguousarray(global_scale, np.float32).reshape(-1)
        if g_arr.size not in (1, src_rows):
            bad("cpu.dequantize", f"global_scale must hold 1 or {src_rows} values, got {g_arr.size}")
    idx = None if row_indices is None else np.ascontiguousarray(row_indices, np.int32).reshape(-1)
    rows = src_rows if idx is None else idx.size
    np_out = {"fp32": np.float32, "fp16": np.float16, "bf16": np.uint16}
    out = np.empty((rows, k), np_out[out_dtype] if out_dtype in np_out else np.float32)
    _C.cpu_dequantize(*_DEQUANTIZE({
        "src.data": _addr(q), "src.row_stride_bytes": 0, "src.scales": _addr(scales), "src.scale_layout": layout,
        "src.global_scale.value": float(global_scale) if g_arr is None else 1.0,
        "src.global_scale.device_ptr": _addr(g_arr), "src.global_scale.per_row": g_arr is not None and g_arr.size > 1,
        "src_rows": src_rows, "k": k, "out": _addr(out),
        "out_dtype": enum_value(DTYPES, out_dtype, "cpu.dequantize", "out_dtype"), "out_row_stride": 0,
        "row_indices": _addr(idx), "rows": rows if idx is not None else 0}))
    return out


def _norm_weight(weight, x, k, op):
    """RMSNorm's weight [k] as the kernels read it: in x's dtype, or float32 (then fp32-weight
    semantics). -> (weight, whether float32)."""
    w = np.asarray(weight).reshape(-1)
    w_fp32 = w.dtype == np.float32 and x.dtype != np.float32
    w = np.ascontiguousarray(w, np.float32 if w_fp32 else x.dtype)
    if w.size != k:
        bad(op, f"weight must hold k = {k} values, got {w.size}")
    return w, w_fp32


def rmsnorm_quantize(x, weight, eps=1e-6, global_scale=None, *, scale_layout="linear", in_dtype=None):
    """RMSNorm then quantize -> (q, scales, global scale, normed [rows, k], inv_rms [rows]).
    weight [k] in x's dtype, or float32."""
    x, dt = _input(x, in_dtype, "cpu.rmsnorm_quantize")
    rows, k = x.shape
    w, w_fp32 = _norm_weight(weight, x, k, "cpu.rmsnorm_quantize")
    q, scales, g_out, out, keep = _output(rows, k, scale_layout, global_scale, "cpu.rmsnorm_quantize")
    normed = np.empty_like(x)
    inv_rms = np.empty(rows, np.float32)
    _C.cpu_rmsnorm_quantize(*_RMSNORM_QUANTIZE({
        **_input_fields(x, dt, rows, k), "weight": _addr(w), "weight_fp32": w_fp32, "eps": float(eps), **out,
        "normed": _addr(normed), "normed_row_stride": 0, "inv_rms": _addr(inv_rms)}))
    return q, scales, (g_out if g_out is not None else global_scale), normed, inv_rms


def swiglu_quantize(x, global_scale=None, *, interleave=0, scale_layout="linear", in_dtype=None):
    """x [rows, 2k] (gate, up) -> quantized silu(gate) * up: (q, scales, global scale)."""
    x, dt = _input(x, in_dtype, "cpu.swiglu_quantize")
    rows, k = x.shape[0], x.shape[1] // 2
    q, scales, g_out, out, keep = _output(rows, k, scale_layout, global_scale, "cpu.swiglu_quantize")
    _C.cpu_swiglu_quantize(*_SWIGLU_QUANTIZE({**_input_fields(x, dt, rows, k), "interleave": int(interleave), **out}))
    return q, scales, (g_out if g_out is not None else global_scale)


_INDEX = {np.dtype(np.int32): 0, np.dtype(np.int64): 1}  # IndexType


def moe_stage(tokens, topk_ids, topk_weights=None, global_scale=None, *, scale_layout="linear", in_dtype=None,
              ids_dtype=None):
    """MoE staging -> (q, scales, global scale, topk_ids copy, topk_weights copy or None). Ids
    int32 or int64; the copy is ids_dtype (default the ids' own)."""
    op = "cpu.moe_stage"
    x, dt = _input(tokens, in_dtype, op, "tokens")
    rows, k = x.shape
    ids = _matrix(topk_ids, op, "topk_ids", list(_INDEX))
    if ids.shape[0] != rows:
        bad(op, f"topk_ids must have {rows} rows, got {ids.shape[0]}")
    ids_out_dtype = ids.dtype if ids_dtype is None else np.dtype(ids_dtype)
    if ids_out_dtype not in _INDEX:
        bad(op, f"ids_dtype must be int32 or int64, got {ids_dtype}")
    topk = ids.shape[1]
    wts = None if topk_weights is None else np.ascontiguousarray(topk_weights, np.float32)
    if wts is not None and wts.shape != ids.shape:
        bad(op, f"topk_weights must have shape {ids.shape}, got {wts.shape}")
    q, scales, g_out, out, keep = _output(rows, k, scale_layout, global_scale, op)
    ids_out = np.empty(ids.shape, ids_out_dtype)
    w_out = None if wts is None else np.empty_like(wts)
    _C.cpu_moe_stage(*_MOE_STAGE({
        **_input_fields(x, dt, rows, k, data="tokens"), **out, "topk": topk, "topk_ids": _addr(ids),
        "topk_weights": _addr(wts), "topk_ids_out": _addr(ids_out), "topk_weights_out": _addr(w_out),
        "topk_ids_type": _INDEX[ids.dtype], "topk_ids_out_type": _INDEX[ids_out.dtype]}))
    return q, scales, (g_out if g_out is not None else global_scale), ids_out, w_out


def mhc_rmsnorm_quantize(x, mix, weight, eps=1e-6, global_scale=None, *, scale_layout="linear", in_dtype=None):
    """mHC pre-block: h = RN(sum_i mix[r, i] * x[r, i, :]) then rmsnorm_quantize(h). x [rows, n_hc,
    k]; mix float32 [rows, n_hc]; weight [k] in x's dtype, or float32.
    -> (q, scales, global scale, h, normed, inv_rms)."""
    op = "cpu.mhc_rmsnorm_quantize"
    if not isinstance(x, np.ndarray) or x.ndim != 3:
        bad(op, f"x must be a 3-D numpy array [rows, n_hc, k], got {getattr(x, 'shape', type(x).__name__)}")
    rows, n_hc, k = x.shape
    x2, dt = _input(np.ascontiguousarray(x).reshape(rows, n_hc * k), in_dtype, op)
    mx = np.ascontiguousarray(mix, np.float32)
    if mx.shape != (rows, n_hc):
        bad(op, f"mix must have shape {(rows, n_hc)}, got {mx.shape}")
    w, w_fp32 = _norm_weight(weight, x2, k, op)
    q, scales, g_out, out, keep = _output(rows, k, scale_layout, global_scale, op)
    h, normed = np.empty((rows, k), x2.dtype), np.empty((rows, k), x2.dtype)
    inv_rms = np.empty(rows, np.float32)
    _C.cpu_mhc_rmsnorm_quantize(*_MHC_RMSNORM_QUANTIZE({
        "in": _addr(x2), "in_dtype": dt, "rows": rows, "n_hc": n_hc, "k": k, "in_row_stride": 0, "in_hc_stride": 0,
        "mix": _addr(mx), "mix_row_stride": 0, "weight": _addr(w), "weight_fp32": w_fp32, "eps": float(eps), **out,
        "h": _addr(h), "h_row_stride": 0, "normed": _addr(normed), "normed_row_stride": 0, "inv_rms": _addr(inv_rms)}))
    return q, scales, (g_out if g_out is not None else global_scale), h, normed, inv_rms


def moe_route(topk_ids, groups, *, first_expert=0):
    """Router top-k ids [tokens, topk] (int32 or int64) sorted into grouped_gemm's contiguous
    layout for experts [first_expert, first_expert + groups).
    -> (group_ends [groups], row_index [tokens * topk], positions [tokens, topk], counts [groups]), int32."""
    ids = _matrix(topk_ids, "cpu.moe_route", "topk_ids", list(_INDEX))
    tokens, topk = ids.shape
    ends, counts = np.empty(groups, np.int32), np.empty(groups, np.int32)
    row_index, positions = np.empty(tokens * topk, np.int32), np.empty((tokens, topk), np.int32)
    _C.cpu_moe_route(*_MOE_ROUTE({
        "topk_ids": _addr(ids), "topk_ids_type": _INDEX[ids.dtype], "tokens": tokens, "topk": topk,
        "groups": int(groups), "first_expert": int(first_expert), "counts": _addr(counts), "group_ends": _addr(ends),
        "row_index": _addr(row_index), "positions": _addr(positions), "workspace": 0, "workspace_bytes": 0}))
    return ends, row_index, positions, counts


def moe_combine(d, positions, weights, *, out_dtype="fp32", in_dtype=None, weights_dtype=None):
    """out[t, :] = sum_j weights[t, j] * d[positions[t, j], :] (fp32, in the order of j) rounded
    to out_dtype. d [d_rows, n]; positions int32 [tokens, topk]; weights float32, or BF16 bits
    as uint16 with weights_dtype='bf16'."""
    op = "cpu.moe_combine"
    d, dt = _input(d, in_dtype, op, "d")
    pos = _matrix(positions, op, "positions", [np.dtype(np.int32)])
    tokens, topk = pos.shape
    w = _matrix(weights, op, "weights")
    if w.shape != pos.shape:
        bad(op, f"weights must have shape {pos.shape}, got {w.shape}")
    w, wdt = _input(w, weights_dtype, op, "weights")
    np_out = {"fp32": np.float32, "fp16": np.float16, "bf16": np.uint16}
    out = np.empty((tokens, d.shape[1]), np_out[out_dtype] if out_dtype in np_out else np.float32)
    _C.cpu_moe_combine(*_MOE_COMBINE({
        "d": _addr(d), "d_dtype": dt, "d_row_stride": 0, "d_rows": d.shape[0], "positions": _addr(pos),
        "weights": _addr(w), "weights_dtype": wdt, "tokens": tokens, "topk": topk, "n": d.shape[1], "out": _addr(out),
        "out_dtype": enum_value(DTYPES, out_dtype, op, "out_dtype"), "out_row_stride": 0}))
    return out


def convert_scales(scales, rows, k, *, src_layout="linear", dst_layout="swizzled128x4"):
    """E4M3 scales of an NVFP4 [rows, k] matrix rewritten into dst_layout (uint8)."""
    src = np.ascontiguousarray(scales, np.uint8)
    s, d = (enum_value(SCALE_LAYOUTS, v, "cpu.convert_scales", n) for v, n in ((src_layout, "src_layout"), (dst_layout, "dst_layout")))
    if src.nbytes < _scale_bytes(s, rows, k):
        bad("cpu.convert_scales", f"scales holds {src.nbytes} bytes, [{rows}, {k}] needs {_scale_bytes(s, rows, k)}")
    dst = np.empty(_scale_shape(rows, k, d, _scale_bytes(d, rows, k)), np.uint8)
    _C.cpu_convert_scales(*_CONVERT_SCALES({"src": _addr(src), "src_layout": s, "dst": _addr(dst), "dst_layout": d,
                                            "rows": rows, "k": k}))
    return dst


def prepack(weight, weight_scale, *, scale_layout="linear", swiglu_interleave=None):
    """A weight uint8 [n, k/2] with its scales -> gemm's prepacked layout (uint8, flat);
    swiglu_interleave as in nvfp4_jit.prepack."""
    w = _matrix(weight, "cpu.prepack", "weight", [np.dtype(np.uint8)])
    n, k = w.shape[0], 2 * w.shape[1]
    layout = enum_value(SCALE_LAYOUTS, scale_layout, "cpu.prepack", "scale_layout")
    sc = np.ascontiguousarray(weight_scale, np.uint8)
    if sc.nbytes < _scale_bytes(layout, n, k):
        bad("cpu.prepack", f"weight_scale holds {sc.nbytes} bytes, [{n}, {k}] needs {_scale_bytes(layout, n, k)}")
    out = np.empty(prepacked_bytes(n, k), np.uint8)
    _C.cpu_prepack(*_PREPACK({
        "weight.data": _addr(w), "weight.row_stride_bytes": 0, "weight.scales": _addr(sc), "weight.scale_layout": layout,
        "weight.global_scale.value": 1.0, "weight.global_scale.device_ptr": 0, "weight.global_scale.per_row": False,
        "n": n, "k": k, "out": _addr(out), "swiglu_interleave": -1 if swiglu_interleave is None else int(swiglu_interleave)}))
    return out
