"""The library's CPU references through Python on numpy arrays, bit for bit against an
independent numpy model of docs/formats.md (nvfp4_numpy.py). Fresh random data each run."""
import numpy as np
import pytest

import nvfp4_jit
from nvfp4_jit import cpu

import nvfp4_numpy as ref

RNG = np.random.default_rng()


def random_input(rows, k, scale=3.0, specials=True):
    """Gaussian values of varied magnitude per block, some zero blocks and (optionally) NaN / Inf."""
    x = (RNG.standard_normal((rows, k)) * np.exp(RNG.uniform(-4, 4, (rows, k // 16))).repeat(16, 1) * scale)
    x = x.astype(np.float32)
    x[RNG.random((rows, k // 16)).repeat(16, 1) < 0.05] = 0
    if specials and rows * k >= 64:
        flat = x.reshape(-1)
        flat[RNG.integers(0, flat.size, 3)] = [np.nan, np.inf, -np.inf]
    return x


def assert_bytes_equal(got, want, what):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    diff = np.argwhere(got != want)
    assert diff.size == 0, f"{what} {got.shape}: first wrong element {tuple(diff[0])}: {got[tuple(diff[0])]} != {want[tuple(diff[0])]}"


@pytest.mark.parametrize("rows,k", [(1, 16), (5, 48), (33, 256), (130, 1024)])
@pytest.mark.parametrize("mode", ["given", "per_tensor", "per_row"])
def test_quantize_matches_the_format_model(rows, k, mode):
    x = random_input(rows, k)
    if mode == "given":
        g = np.float32(RNG.uniform(0.01, 2.0))
        q, s, g_out = cpu.quantize(x, float(g))
        assert g_out == float(g)
    else:
        q, s, g_out = cpu.quantize(x, scale_mode=mode)
        g = ref.global_scale(x, per_row=mode == "per_row")
        assert_bytes_equal(g_out.view(np.uint32), np.atleast_1d(g).view(np.uint32), "global scale")
    want_q, want_s = ref.quantize(x, g)
    assert_bytes_equal(s, want_s, f"scales [{rows}, {k}] {mode}")
    assert_bytes_equal(q, want_q, f"values [{rows}, {k}] {mode}")


@pytest.mark.parametrize("in_dtype", ["fp16", "bf16"])
def test_quantize_reads_half_inputs_exactly(in_dtype):
    x = random_input(9, 64, specials=False)
    if in_dtype == "fp16":
        xh = x.astype(np.float16)
        x32 = xh.astype(np.float32)
        q, s, _ = cpu.quantize(xh, 0.5)
    else:
        xh = ref.bf16_bits(x)
        x32 = ref.bf16_to_f32(xh)
        q, s, _ = cpu.quantize(xh, 0.5, in_dtype="bf16")
    want_q, want_s = ref.quantize(x32, np.float32(0.5))
    assert_bytes_equal(s, want_s, "scales")
    assert_bytes_equal(q, want_q, "values")


@pytest.mark.parametrize("per_row", [False, True])
def test_dequantize_matches_the_format_model(per_row):
    rows, k = 37, 96
    q = RNG.integers(0, 256, (rows, k // 2), dtype=np.uint8)
    s = RNG.integers(0, 0x7F, (rows, k // 16), dtype=np.uint8)
    s[0, 0] = 0x7F  # NaN scale -> NaN block
    g = RNG.uniform(0.001, 4, rows).astype(np.float32) if per_row else np.float32(0.37)
    got = cpu.dequantize(q, s, g if per_row else float(g), out_dtype="fp32")
    want = ref.decode(q, s, g, k)
    assert np.isnan(got[0, :16]).all()
    assert_bytes_equal(np.nan_to_num(got, nan=7).view(np.uint32), np.nan_to_num(want, nan=7).view(np.uint32), "fp32 out")
    half = cpu.dequantize(q, s, g if per_row else float(g), out_dtype="fp16")
    assert_bytes_equal(np.nan_to_num(half, nan=7), np.nan_to_num(want.astype(np.float16), nan=7), "fp16 out")


def test_dequantize_gathers_rows_and_marks_bad_indices_nan():
    q = RNG.integers(0, 256, (10, 16), dtype=np.uint8)
    s = RNG.integers(0, 0x7E, (10, 2), dtype=np.uint8)
    idx = np.array([3, 9, 0, 12, -1], np.int32)
    got = cpu.dequantize(q, s, 1.0, row_indices=idx)
    full = ref.decode(q, s, np.float32(1), 32)
    assert_bytes_equal(got[:3], full[[3, 9, 0]], "gathered rows")
    assert np.isnan(got[3:]).all()


def test_quantize_dequantize_round_trip_bound():
    x = random_input(16, 512, specials=False)
    q, s, g = cpu.quantize(x)
    y = cpu.dequantize(q, s, float(g[0]))
    d = ref.E4M3[s].repeat(16, 1).astype(np.float32) * g[0]
    assert (np.abs(x - y) <= d + np.maximum(0, np.abs(x) - 6 * d) + 1e-30).all()


@pytest.mark.parametrize("rows,k", [(1, 16), (130, 80), (256, 512)])
def test_swizzled_scales_follow_the_layout_formula(rows, k):
    x = random_input(rows, k)
    _, lin, _ = cpu.quantize(x, 1.0)
    _, swz, _ = cpu.quantize(x, 1.0, scale_layout="swizzled128x4")
    assert swz.shape == (-(-rows // 128) * 128, -(-(k // 16) // 4) * 4)
    assert_bytes_equal(swz.reshape(-1), ref.swizzle(lin, rows, k), "quantize swizzled")
    assert_bytes_equal(cpu.convert_scales(lin, rows, k).reshape(-1), ref.swizzle(lin, rows, k), "convert_scales")
    assert_bytes_equal(cpu.convert_scales(swz, rows, k, src_layout="swizzled128x4", dst_layout="linear"), lin, "back")


@pytest.mark.parametrize("given", [False, True])
def test_rmsnorm_quantize_equals_rmsnorm_then_quantize(given):
    rows, k = 6, 256
    x = random_input(rows, k, specials=False)
    w = RNG.uniform(0.5, 1.5, k).astype(np.float32)
    g = 0.02 if given else None
    q, s, g_out, normed, inv_rms = cpu.rmsnorm_quantize(x, w, 1e-5, g)
    x64 = x.astype(np.float64)
    want_inv = 1 / np.sqrt((x64 ** 2).mean(axis=1) + 1e-5)
    np.testing.assert_allclose(inv_rms, want_inv, rtol=1e-6)
    np.testing.assert_allclose(normed, x64 * want_inv[:, None] * w, rtol=1e-6, atol=1e-30)
    uq, us, ug = cpu.quantize(normed, g, scale_mode="per_row")
    assert_bytes_equal(s, us, "scales")
    assert_bytes_equal(q, uq, "values")
    if not given:
        assert_bytes_equal(g_out.view(np.uint32), ug.view(np.uint32), "global scales")


@pytest.mark.parametrize("interleave", [0, 8, 32])
def test_swiglu_quantize_is_close_to_float64_swiglu(interleave):
    rows, k = 5, 64
    x = RNG.standard_normal((rows, 2 * k)).astype(np.float32)
    q, s, g = cpu.swiglu_quantize(x, interleave=interleave)
    if interleave == 0:
        gate, up = x[:, :k], x[:, k:]
    else:
        blocks = x.reshape(rows, -1, 2, interleave)
        gate, up = blocks[:, :, 0].reshape(rows, k), blocks[:, :, 1].reshape(rows, k)
    h = gate.astype(np.float64) / (1 + np.exp(-gate.astype(np.float64))) * up
    y = cpu.dequantize(q, s, g)
    assert np.linalg.norm(y - h) / np.linalg.norm(h) < 0.12
    # the fused quantizer equals quantize() of its own prologue: re-quantizing y's source is exact
    _, s2, _ = cpu.quantize(h.astype(np.float32), g, scale_mode="per_row")
    assert (np.abs(s2.astype(int) - s.astype(int)) <= 1).all()


def test_moe_stage_quantizes_tokens_and_copies_routing():
    rows, k, topk = 7, 128, 4
    x = random_input(rows, k, specials=False)
    ids = RNG.integers(0, 64, (rows, topk), dtype=np.int32)
    wts = RNG.random((rows, topk), dtype=np.float32)
    q, s, g, ids_out, w_out = cpu.moe_stage(x, ids, wts)
    uq, us, ug = cpu.quantize(x, scale_mode="per_row")
    assert_bytes_equal(q, uq, "values")
    assert_bytes_equal(s, us, "scales")
    assert_bytes_equal(g.view(np.uint32), ug.view(np.uint32), "global scales")
    assert_bytes_equal(ids_out, ids, "topk_ids")
    assert_bytes_equal(w_out.view(np.uint32), wts.view(np.uint32), "topk_weights")


@pytest.mark.parametrize("ids_dtype", [np.int32, np.int64])
def test_moe_stage_converts_int64_ids(ids_dtype):
    rows, k = 3, 64
    ids = np.array([[1, 2 ** 40], [-5, 7], [2 ** 31 - 1, 0]], np.int64)
    out = cpu.moe_stage(random_input(rows, k, specials=False), ids, ids_dtype=ids_dtype)[3]
    want = ids if ids_dtype == np.int64 else np.array([[1, -1], [-5, 7], [2 ** 31 - 1, 0]], np.int32)
    assert out.dtype == ids_dtype
    assert_bytes_equal(out, want, f"ids copied to {np.dtype(ids_dtype)}")


@pytest.mark.parametrize("ids_dtype", [np.int32, np.int64])
def test_moe_route_sorts_by_expert_then_token_and_skips_other_experts(ids_dtype):
    tokens, topk, groups, first = 23, 4, 6, 2
    ids = RNG.integers(-1, groups + first + 2, (tokens, topk)).astype(ids_dtype)
    ends, row_index, positions, counts = cpu.moe_route(ids, groups, first_expert=first)
    # a plain model: the entries of this rank's experts, stably sorted by expert (then token, slot)
    entries = sorted((int(ids[t, j]) - first, t, j) for t in range(tokens) for j in range(topk)
                     if first <= ids[t, j] < first + groups)
    want_counts = np.bincount([e for e, _, _ in entries], minlength=groups).astype(np.int32)
    want_rows = np.full(tokens * topk, -1, np.int32)
    want_pos = np.full((tokens, topk), -1, np.int32)
    for r, (_, t, j) in enumerate(entries):
        want_rows[r], want_pos[t, j] = t, r
    assert_bytes_equal(counts, want_counts, "counts")
    assert_bytes_equal(ends, np.cumsum(want_counts).astype(np.int32), "group_ends")
    assert_bytes_equal(row_index, want_rows, "row_index")
    assert_bytes_equal(positions, want_pos, "positions")


def test_moe_combine_sums_the_weighted_rows_of_each_token():
    tokens, topk, n, d_rows = 9, 3, 48, 20
    d = RNG.standard_normal((d_rows, n)).astype(np.float32)
    positions = RNG.integers(-1, d_rows + 2, (tokens, topk)).astype(np.int32)  # -1 and past the end add nothing
    w = RNG.random((tokens, topk), dtype=np.float32)
    out = cpu.moe_combine(d, positions, w)
    want = np.zeros((tokens, n))
    for t in range(tokens):
        for j in range(topk):
            if 0 <= positions[t, j] < d_rows:
                want[t] += np.float64(w[t, j]) * d[positions[t, j]]
    assert np.abs(out - want).max() <= 1e-5 * max(1.0, np.abs(want).max())


def test_mhc_rmsnorm_quantize_equals_the_mix_then_rmsnorm_quantize():
    rows, n_hc, k = 5, 3, 128
    x = random_input(rows * n_hc, k, specials=False).reshape(rows, n_hc, k)
    mix = RNG.random((rows, n_hc), dtype=np.float32)
    w = (RNG.random(k) + 0.5).astype(np.float32)
    q, s, g, h, normed, inv = cpu.mhc_rmsnorm_quantize(x, mix, w, 1e-5)
    h_model = np.zeros((rows, k), np.float32)
    for i in range(n_hc):  # fp32 products and sums, in the order of i
        h_model = (h_model + mix[:, i:i + 1] * x[:, i]).astype(np.float32)
    assert np.abs(h - h_model).max() <= 1e-6 * np.abs(h_model).max()
    rq, rs, rg, rn, ri = cpu.rmsnorm_quantize(h, w, 1e-5)
    for got, want, what in [(q, rq, "values"), (s, rs, "scales"), (normed, rn, "normed"), (inv, ri, "inv_rms")]:
        assert_bytes_equal(np.asarray(got).view(np.uint8), np.asarray(want).view(np.uint8), f"mhc vs rmsnorm_quantize of h: {what}")


def test_rmsnorm_quantize_takes_an_fp32_weight_on_bf16_input():
    rows, k = 7, 256
    x = random_input(rows, k, specials=False)
    bits = ((x.view(np.uint32) + 0x8000) >> 16).astype(np.uint16)  # BF16, rounded
    w = (RNG.random(k) + 0.5).astype(np.float32)  # not BF16 values
    got = cpu.rmsnorm_quantize(bits, w, 1e-5, in_dtype="bf16")
    # mHC of one stream mixed by 1 is RMSNorm of the stream itself, with the same fp32 weight
    want = cpu.mhc_rmsnorm_quantize(bits.reshape(rows, 1, k), np.ones((rows, 1), np.float32), w, 1e-5, in_dtype="bf16")
    for i, what in [(0, "values"), (1, "scales"), (2, "global scale"), (3, "normed"), (4, "inv_rms")]:
        assert_bytes_equal(np.asarray(got[i]).view(np.uint8), np.asarray(want[i if i < 3 else i + 1]).view(np.uint8),
                           f"rmsnorm_quantize vs mHC of one stream: {what}")
    # an fp32 weight holding BF16 values gives what the same weight in BF16 gives
    w_bits = ((w.view(np.uint32) + 0x8000) >> 16).astype(np.uint16)
    w_as_fp32 = (w_bits.astype(np.uint32) << 16).view(np.float32)
    as_fp32, as_bf16 = cpu.rmsnorm_quantize(bits, w_as_fp32, 1e-5, in_dtype="bf16"), cpu.rmsnorm_quantize(bits, w_bits, 1e-5, in_dtype="bf16")
    for i in (0, 1, 3):
        assert_bytes_equal(np.asarray(as_fp32[i]).view(np.uint8), np.asarray(as_bf16[i]).view(np.uint8), "BF16 weight values in fp32")


def test_prepack_is_deterministic_and_depends_on_every_byte():
    n, k = 130, 288
    w = RNG.integers(0, 256, (n, k // 2), dtype=np.uint8)
    s = RNG.integers(1, 0x7E, (n, k // 16), dtype=np.uint8)  # no zero scale: a zero-scale block's values are not stored
    p = cpu.prepack(w, s)
    assert p.size == nvfp4_jit.prepacked_bytes(n, k)
    assert_bytes_equal(cpu.prepack(w, s), p, "second prepack")
    assert_bytes_equal(cpu.prepack(w, cpu.convert_scales(s, n, k), scale_layout="swizzled128x4"), p, "from swizzled")
    w2 = w.copy()
    w2[RNG.integers(n), RNG.integers(k // 2)] ^= 0x11
    assert (cpu.prepack(w2, s) != p).sum() >= 1


def test_prepack_swiglu_interleave_pairs_gate_and_up_rows_as_stored():
    # One gate_up weight stored three ways (ModelOpt halves, groups of 4 and of 8 gate rows each
    # followed by as many up rows) prepacks to the same bytes: 8 is the kernel's own interleave.
    i, k = 24, 64
    gate = RNG.integers(0, 256, (i, k // 2), dtype=np.uint8)
    up = RNG.integers(0, 256, (i, k // 2), dtype=np.uint8)
    gs = RNG.integers(1, 0x7E, (i, k // 16), dtype=np.uint8)
    us = RNG.integers(1, 0x7E, (i, k // 16), dtype=np.uint8)

    def interleaved(g, a, b):
        return np.concatenate([x for j in range(0, i, g) for x in (a[j:j + g], b[j:j + g])])

    halves = cpu.prepack(np.concatenate([gate, up]), np.concatenate([gs, us]), swiglu_interleave=0)
    for g in (4, 8):
        assert_bytes_equal(cpu.prepack(interleaved(g, gate, up), interleaved(g, gs, us), swiglu_interleave=g), halves,
                           f"swiglu_interleave={g} against 0")
    plain = cpu.prepack(interleaved(8, gate, up), interleaved(8, gs, us))
    assert (plain != halves).sum() >= 1  # the row bytes record the order: a plain GEMM on it writes NaN
    with pytest.raises(nvfp4_jit.InvalidArgument, match="swiglu_interleave = 5 does not divide"):
        cpu.prepack(np.concatenate([gate, up]), np.concatenate([gs, us]), swiglu_interleave=5)


def test_cpu_validation_messages_name_the_argument():
    with pytest.raises(nvfp4_jit.InvalidArgument, match="x must be 2-D"):
        cpu.quantize(np.zeros(16, np.float32))
    with pytest.raises(nvfp4_jit.InvalidArgument, match="x must be float32 or float16"):
        cpu.quantize(np.zeros((1, 16), np.int32))
    with pytest.raises(nvfp4_jit.InvalidArgument, match=r"^nvfp4_jit\.cpu\.quantize: x of shape \(2, 24\): .*\bk\b"):
        cpu.quantize(np.ones((2, 24), np.float32), 1.0)
    with pytest.raises(nvfp4_jit.InvalidArgument, match="global_scale"):
        cpu.quantize(np.ones((2, 32), np.float32), -1.0)
    with pytest.raises(nvfp4_jit.InvalidArgument, match="weight must hold k = 32"):
        cpu.rmsnorm_quantize(np.ones((2, 32), np.float32), np.ones(16, np.float32))
