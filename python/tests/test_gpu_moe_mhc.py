"""The MoE routing ops, mHC's fused pre-block and the newer options of moe_stage and grouped_gemm
on the GPU: bit for bit against the library's CPU references (which the C++ GPU suite shows
equal to the kernels), the grouped GEMM's gathered rows against float64. Fresh random data
each run; ragged sizes; outputs poisoned before out= calls."""
import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed here: the torch layer runs on the GPU machine")
import nvfp4_jit  # noqa: E402
from nvfp4_jit import cpu  # noqa: E402
from test_gpu import DEV, activations, assert_same_bits, decoded64, host, poisoned_like, rel_err  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.torch_layer]


def router_ids(tokens, topk, experts, dtype):
    """Ids in [-1, experts + 2): padding (-1) and other ranks' experts included."""
    return torch.randint(-1, experts + 2, (tokens, topk), dtype=dtype, device=DEV)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("first_expert", [0, 2])
@pytest.mark.parametrize("tokens", [37, 3000])  # one CTA; nine CTAs and a workspace from torch
def test_moe_route_matches_cpu_reference(dtype, first_expert, tokens):
    topk, groups = 6, 9
    ids = router_ids(tokens, topk, groups + first_expert, dtype)
    got = nvfp4_jit.moe_route(ids, groups, first_expert=first_expert)
    want = cpu.moe_route(host(ids), groups, first_expert=first_expert)
    for g, w, what in zip(got, want, ("group_ends", "row_index", "positions", "counts")):
        assert_same_bits(g, w, f"moe_route {what} ({dtype}, first_expert {first_expert})")
    out = tuple(torch.full_like(t, -7) for t in got)
    nvfp4_jit.moe_route(ids, groups, first_expert=first_expert, out=out)
    for g, w, what in zip(out, want, ("group_ends", "row_index", "positions", "counts")):
        assert_same_bits(g, w, f"moe_route out= {what}")


@pytest.mark.parametrize("d_dtype,w_dtype,out_dtype", [(torch.bfloat16, torch.float32, torch.bfloat16),
                                                       (torch.float32, torch.bfloat16, torch.float32),
                                                       (torch.float16, torch.float32, torch.float16)])
def test_moe_combine_matches_cpu_reference(d_dtype, w_dtype, out_dtype):
    tokens, topk, groups, n = 21, 4, 5, 192
    ids = router_ids(tokens, topk, groups, torch.int32)
    ends, row_index, positions, counts = nvfp4_jit.moe_route(ids, groups)
    d = torch.randn(tokens * topk, n, device=DEV).to(d_dtype)
    w = torch.rand(tokens, topk, device=DEV).to(w_dtype)
    y = nvfp4_jit.moe_combine(d, positions, w, out_dtype=out_dtype)
    names = {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32"}
    want = cpu.moe_combine(host(d), host(positions), host(w), out_dtype=names[out_dtype],
                           in_dtype="bf16" if d_dtype == torch.bfloat16 else None,
                           weights_dtype="bf16" if w_dtype == torch.bfloat16 else None)
    assert_same_bits(y, want, f"moe_combine {d_dtype} {w_dtype} -> {out_dtype}")
    out = poisoned_like(y)
    nvfp4_jit.moe_combine(d, positions, w, out=out)
    assert_same_bits(out, want, "moe_combine out=")


@pytest.mark.parametrize("n_hc", [1, 4])
@pytest.mark.parametrize("given,layout,fp32_weight", [(False, "linear", False), (True, "swizzled128x4", False),
                                                      (False, "swizzled128x4", True)])
def test_mhc_rmsnorm_quantize_matches_cpu_reference(n_hc, given, layout, fp32_weight):
    rows, k = 13, 512
    x = activations(rows * n_hc, k).view(rows, n_hc, k)
    mix = torch.rand(rows, n_hc, device=DEV) / n_hc
    w = torch.rand(k, device=DEV) + 0.5
    w = w if fp32_weight else w.to(torch.bfloat16)
    g = 0.02 if given else None
    q, s, gs, h, normed, inv = nvfp4_jit.mhc_rmsnorm_quantize(x, mix, w, 1e-5, g, scale_layout=layout, return_h=True,
                                                              return_normed=True, return_inv_rms=True)
    cq, cs, cg, ch, cn, ci = cpu.mhc_rmsnorm_quantize(host(x), host(mix), host(w), 1e-5, g, scale_layout=layout,
                                                      in_dtype="bf16")
    for got, want, what in [(q, cq, "values"), (s, cs, "scales"), (h, ch, "h"), (normed, cn, "normed"),
                            (inv, ci, "inv_rms")]:
        assert_same_bits(got, want, f"mhc n_hc={n_hc} {what}")
    if not given:
        assert_same_bits(gs, cg, "mhc global scales")
    oq, os_, og = poisoned_like(q), poisoned_like(s), None if given else torch.full_like(gs, float("nan"))
    r = nvfp4_jit.mhc_rmsnorm_quantize(x, mix, w, 1e-5, g, scale_layout=layout, out=oq, out_scales=os_,
                                       out_global_scale=og)
    assert len(r) == 3
    assert_same_bits(oq, cq, "mhc out= values")
    assert_same_bits(os_, cs, "mhc out= scales")


@pytest.mark.parametrize("ids_dtype", [torch.int32, torch.int64])
def test_moe_stage_takes_int64_ids(ids_dtype):
    rows, k, topk = 11, 256, 4
    x = activations(rows, k)
    ids = torch.randint(0, 64, (rows, topk), dtype=torch.int64, device=DEV)
    ids[0, 0], ids[3, 2] = 2 ** 40, -5  # 2**40 does not fit int32: an int32 copy gets -1
    wts = torch.rand(rows, topk, device=DEV)
    q, s, g, ids_out, w_out = nvfp4_jit.moe_stage(x, ids, wts, ids_dtype=ids_dtype)
    cq, cs, cg, cids, cw = cpu.moe_stage(host(x), host(ids), host(wts), in_dtype="bf16",
                                         ids_dtype=np.int32 if ids_dtype == torch.int32 else np.int64)
    assert ids_out.dtype == ids_dtype
    for got, want, what in [(q, cq, "values"), (s, cs, "scales"), (g, cg, "global scales"), (ids_out, cids, "ids"),
                            (w_out, cw, "weights")]:
        assert_same_bits(got, want, f"moe_stage int64 ids -> {ids_dtype} {what}")
    if ids_dtype == torch.int32:
        assert int(ids_out[0, 0]) == -1 and int(ids_out[3, 2]) == -5


@pytest.mark.parametrize("per_group", [False, True])
def test_grouped_gemm_gathers_rows_through_row_index(per_group):
    """Contiguous W4A4 with row_index (moe_route's): the tokens' NVFP4 rows read in sorted order,
    no sorted copy, against float64 of the gathered rows; the global scale of A one or per group."""
    tokens, topk, groups, n, k = 19, 3, 6, 128, 256
    ids = torch.randint(0, groups, (tokens, topk), dtype=torch.int32, device=DEV)
    ends, row_index, positions, counts = nvfp4_jit.moe_route(ids, groups)
    x = activations(tokens, k)
    qa, sa, ga = nvfp4_jit.quantize(x)  # one global scale for the tokens
    w = torch.randint(0, 256, (groups, n, k // 2), dtype=torch.uint8, device=DEV)
    s = torch.randint(0x20, 0x48, (groups, n, k // 16), dtype=torch.uint8, device=DEV).view(torch.float8_e4m3fn)
    g_b = np.random.uniform(0.001, 0.01, groups).astype(np.float32)
    g_a = np.random.uniform(0.5, 2, groups).astype(np.float32) * float(ga) if per_group else np.float32(float(ga))
    a_gs = torch.tensor(g_a, device=DEV) if per_group else ga
    m = tokens * topk
    out = torch.full((m, n), float("nan"), device=DEV)
    nvfp4_jit.grouped_gemm(qa, w, s, torch.tensor(g_b, device=DEV), group_ends=ends, a_scales=sa, a_global_scale=a_gs,
                           a_global_scale_per_group=per_group, row_index=row_index, out=out)
    tok64 = decoded64(qa, sa, k)
    rows, ends_h = host(row_index), host(ends)
    start = 0
    for e in range(groups):
        end = int(ends_h[e])
        if end > start:
            scale_a = np.float64(g_a[e] if per_group else g_a)
            ref = tok64[rows[start:end]] @ decoded64(w[e], s[e], k).T * scale_a * np.float64(g_b[e])
            assert rel_err(out[start:end], ref) < 1e-5, f"group {e} (rows {start}..{end}, per_group {per_group})"
        start = max(start, end)
    y = nvfp4_jit.grouped_gemm(qa, w, s, torch.tensor(g_b, device=DEV), group_ends=ends, a_scales=sa,
                               a_global_scale=a_gs, a_global_scale_per_group=per_group, row_index=row_index,
                               out_dtype=torch.float32)
    assert y.shape == (m, n)
    assert_same_bits(y[:int(ends_h[-1])], host(out[:int(ends_h[-1])]), "allocated vs out=")


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_grouped_gemm_w4a16_gathers_rows_through_row_index(dtype):
    """Contiguous W4A16 with row_index: the kernel reads the tokens' rows in sorted order as it
    loads them (no sorted copy), bit for bit the grouped GEMM of the sorted copy."""
    tokens, topk, groups, n, k = 37, 4, 8, 192, 512
    ids = torch.randint(0, groups, (tokens, topk), dtype=torch.int32, device=DEV)
    ends, row_index, positions, counts = nvfp4_jit.moe_route(ids, groups)
    x = activations(tokens, k).to(dtype)
    w = torch.randint(0, 256, (groups, n, k // 2), dtype=torch.uint8, device=DEV)
    s = torch.randint(0x20, 0x48, (groups, n, k // 16), dtype=torch.uint8, device=DEV).view(torch.float8_e4m3fn)
    g_b = torch.rand(groups, device=DEV) * 0.01 + 0.001
    m, routed = tokens * topk, int(host(ends)[-1])
    out = torch.full((m, n), float("nan"), dtype=dtype, device=DEV)
    nvfp4_jit.grouped_gemm(x, w, s, g_b, group_ends=ends, row_index=row_index, out=out)
    sorted_x = x[row_index[:routed].long()]
    want = nvfp4_jit.grouped_gemm(sorted_x, w, s, g_b, group_ends=ends.clamp(max=routed))
    assert_same_bits(out[:routed], host(want), f"{dtype} gathered vs sorted copy")
    assert torch.isnan(out[routed:]).all(), "rows past the routed ones were written"


@pytest.mark.parametrize("w_dtype", [torch.float32, torch.bfloat16])
def test_grouped_gemm_moe_combine_epilogue_equals_moe_combine(w_dtype):
    """The down projection with the combine in its epilogue: D as without it, and each token's
    output row bit for bit moe_combine's of that D; a token with no entry held (padding ids,
    other ranks' experts) keeps its row."""
    tokens, topk, groups, n, k = 37, 4, 8, 192, 512
    ids = router_ids(tokens, topk, groups, torch.int32)
    ids[0] = -1  # a token none of whose entries is held here
    ends, row_index, positions, counts = nvfp4_jit.moe_route(ids, groups)
    h = activations(tokens * topk, k)
    w = torch.randint(0, 256, (groups, n, k // 2), dtype=torch.uint8, device=DEV)
    s = torch.randint(0x20, 0x48, (groups, n, k // 16), dtype=torch.uint8, device=DEV).view(torch.float8_e4m3fn)
    g_b = torch.rand(groups, device=DEV) * 0.01 + 0.001
    wts = torch.rand(tokens, topk, device=DEV).to(w_dtype)
    d = torch.full((tokens * topk, n), float("nan"), dtype=torch.bfloat16, device=DEV)
    combined = torch.full((tokens, n), 7.0, dtype=torch.bfloat16, device=DEV)
    y = nvfp4_jit.grouped_gemm(h, w, s, g_b, group_ends=ends, out=d, epilogue="moe_combine", combine_positions=positions,
                               combine_row_token=row_index, combine_weights=wts, combine_out=combined)
    assert y is combined
    routed = int(host(ends)[-1])
    plain = nvfp4_jit.grouped_gemm(h, w, s, g_b, group_ends=ends)
    assert_same_bits(d[:routed], host(plain[:routed]), "D with the combine epilogue")
    held = (positions >= 0).any(dim=1)
    want = nvfp4_jit.moe_combine(d, positions, wts, out_dtype=torch.bfloat16)
    assert_same_bits(combined[held], host(want[held]), "combined rows")
    assert (combined[~held] == 7.0).all(), "a token with no entry held was written"
    with pytest.raises(nvfp4_jit.InvalidArgument, match="combine_out"):
        nvfp4_jit.grouped_gemm(h, w, s, g_b, group_ends=ends, epilogue="moe_combine", combine_positions=positions,
                               combine_row_token=row_index, combine_weights=wts)
    with pytest.raises(nvfp4_jit.InvalidArgument, match="combine_weights"):
        nvfp4_jit.grouped_gemm(h, w, s, g_b, group_ends=ends, epilogue="moe_combine", combine_positions=positions,
                               combine_row_token=row_index, combine_weights=wts[:, :2], combine_out=combined)


def test_new_ops_trace_with_fake_tensors_under_compile():
    tokens, topk, groups, n, k = 8, 2, 4, 128, 256

    def block(ids, d, w, x, mix, norm_w):
        ends, row_index, positions, counts = nvfp4_jit.moe_route(ids, groups)
        y = nvfp4_jit.moe_combine(d, positions, w, out_dtype=torch.float32)
        q, s, g = nvfp4_jit.mhc_rmsnorm_quantize(x, mix, norm_w)
        return y, q, s, g, ends, counts

    ids = torch.randint(0, groups, (tokens, topk), dtype=torch.int64, device=DEV)
    d = torch.randn(tokens * topk, n, device=DEV).to(torch.bfloat16)
    w = torch.rand(tokens, topk, device=DEV)
    x = activations(tokens * 2, k).view(tokens, 2, k)
    mix = torch.rand(tokens, 2, device=DEV)
    norm_w = torch.ones(k, dtype=torch.bfloat16, device=DEV)
    eager = block(ids, d, w, x, mix, norm_w)
    torch._dynamo.reset()
    compiled = torch.compile(block, fullgraph=True)(ids, d, w, x, mix, norm_w)
    for got, want, what in zip(compiled, eager, ("combine", "q", "scales", "gscale", "ends", "counts")):
        assert_same_bits(got, host(want), f"compiled {what}")
