"""The torch ops on the GPU: every op bit for bit against the library's CPU references (which
the C++ GPU suite shows equal to the kernels), the GEMMs against float64, the out= forms,
torch.compile(fullgraph=True), CUDA graph capture and replay, Nvfp4Linear. Fresh random data
each run; outputs poisoned before out= calls."""
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed here: the torch layer runs on the GPU machine")
import nvfp4_jit  # noqa: E402
from nvfp4_jit import cpu  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.torch_layer]
DEV = "cuda"
HALF = {torch.bfloat16: "bf16", torch.float16: None, torch.float32: None}


def host(t):
    """A tensor's values on the host as numpy (BF16 as uint16 bits, FP8 / FP4 as uint8)."""
    t = t.detach().cpu().contiguous()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(np.uint16)
    if t.dtype in (torch.float8_e4m3fn, getattr(torch, "float4_e2m1fn_x2", None)):
        return t.view(torch.uint8).numpy()
    return t.numpy()


def bits(a):
    a = np.asarray(a)
    return a.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[a.itemsize]) if a.dtype.kind == "f" else a


def assert_same_bits(got, want, what):
    got, want = bits(host(got) if isinstance(got, torch.Tensor) else got), bits(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    wrong = np.argwhere(got != want)
    assert wrong.size == 0, f"{what} {got.shape}: first wrong element {tuple(wrong[0])}: {got[tuple(wrong[0])]} != {want[tuple(wrong[0])]}"


def activations(rows, k, dtype=torch.bfloat16, nan=False):
    """Gaussian values whose magnitude varies per 16-block, some zero blocks, optionally a NaN."""
    mag = torch.exp(torch.empty(rows, k // 16, device=DEV).uniform_(-3, 3)).repeat_interleave(16, 1)
    x = torch.randn(rows, k, device=DEV) * mag
    x[torch.rand(rows, k // 16, device=DEV).repeat_interleave(16, 1) < 0.05] = 0
    if nan and rows * k >= 64:
        x.view(-1)[torch.randint(0, rows * k, (1,))] = float("nan")
    return x.to(dtype)


def nvfp4_weight(n, k):
    """Random packed values and finite scales (a realistic spread), as ModelOpt stores them."""
    w = torch.randint(0, 256, (n, k // 2), dtype=torch.uint8, device=DEV)
    s = torch.randint(0x20, 0x48, (n, k // 16), dtype=torch.uint8, device=DEV).view(torch.float8_e4m3fn)
    return w, s


def poisoned_like(t):
    return torch.full_like(t.view(torch.uint8) if t.element_size() == 1 else t, 0xFF if t.element_size() == 1 else float("nan")).view(t.dtype)


def rel_err(got, ref):
    got = got.double().cpu().numpy()
    assert not np.isnan(got).any(), "NaN in the output"
    return np.linalg.norm(got - ref) / np.linalg.norm(ref)


# ---------------------------------------------------------------------------------------------
# The quantizers, bit for bit against the CPU references


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("layout", ["linear", "swizzled128x4"])
@pytest.mark.parametrize("mode", ["float", "tensor", "row_tensor", "per_tensor", "per_row"])
def test_quantize_matches_cpu_reference(dtype, layout, mode):
    rows, k = 37, 512
    x = activations(rows, k, dtype, nan=True)
    g_host = np.random.uniform(0.001, 0.1, rows if mode == "row_tensor" else 1).astype(np.float32)
    given = {"float": float(g_host[0]), "tensor": torch.tensor(g_host[:1], device=DEV),
             "row_tensor": torch.tensor(g_host, device=DEV)}.get(mode)
    kw = dict(scale_layout=layout, scale_mode=mode if given is None else "per_tensor")
    q, s, g = nvfp4_jit.quantize(x, given, **kw)
    cq, cs, cg = cpu.quantize(host(x), None if given is None else (g_host if mode == "row_tensor" else g_host[:1]),
                              in_dtype=HALF[dtype], **kw)
    assert_same_bits(s, cs, f"scales {mode} {layout}")
    assert_same_bits(q, cq, f"values {mode} {layout}")
    if given is None:
        assert_same_bits(g, cg, "computed global scale")
    # out=: poisoned static buffers get the same bits
    oq, os_ = poisoned_like(q), poisoned_like(s)
    og = None if given is not None else torch.full_like(g, float("nan"))
    nvfp4_jit.quantize(x, given, out=oq, out_scales=os_, out_global_scale=og, **kw)
    assert_same_bits(oq, cq, "out= values")
    assert_same_bits(os_, cs, "out= scales")


@pytest.mark.parametrize("out_dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("layout", ["linear", "swizzled128x4"])
@pytest.mark.parametrize("per_row,gather", [(False, False), (True, False), (False, True)])
def test_dequantize_matches_cpu_reference(out_dtype, layout, per_row, gather):
    rows, k = 45, 256
    q, s_lin = nvfp4_weight(rows, k)
    s = s_lin if layout == "linear" else nvfp4_jit.convert_scales(s_lin, rows, k)
    g_host = np.random.uniform(0.01, 2, rows if per_row else 1).astype(np.float32)
    g = torch.tensor(g_host, device=DEV) if per_row else float(g_host[0])
    idx = torch.randint(-2, rows + 2, (17,), dtype=torch.int32, device=DEV) if gather else None
    y = nvfp4_jit.dequantize(q, s, g, scale_layout=layout, dtype=out_dtype, row_indices=idx)
    want = cpu.dequantize(host(q), host(s), g_host if per_row else float(g_host[0]), scale_layout=layout,
                          out_dtype={torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32"}[out_dtype],
                          row_indices=None if idx is None else host(idx))
    assert_same_bits(y, want, f"dequantize {out_dtype} {layout}")
    out = poisoned_like(y)
    nvfp4_jit.dequantize(q, s, g, scale_layout=layout, dtype=out_dtype, row_indices=idx, out=out)
    assert_same_bits(out, want, "out=")


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("given,fp32_weight", [(False, False), (True, False), (False, True)])
def test_rmsnorm_quantize_matches_cpu_reference(dtype, given, fp32_weight):
    rows, k = 19, 1024
    x = activations(rows, k, dtype)
    w = torch.rand(k, device=DEV) + 0.5
    w = w if fp32_weight else w.to(dtype)
    g = 0.01 if given else None
    q, s, gs, normed, inv = nvfp4_jit.rmsnorm_quantize(x, w, 1e-5, g, return_normed=True, return_inv_rms=True)
    cq, cs, cg, cn, ci = cpu.rmsnorm_quantize(host(x), host(w), 1e-5, g, in_dtype=HALF[dtype])
    for got, want, what in [(q, cq, "values"), (s, cs, "scales"), (normed, cn, "normed"), (inv, ci, "inv_rms")]:
        assert_same_bits(got, want, what)
    if not given:
        assert_same_bits(gs, cg, "global scales")


@pytest.mark.parametrize("interleave", [0, 16])
def test_swiglu_quantize_matches_cpu_reference(interleave):
    rows, k = 23, 512
    x = activations(rows, 2 * k)
    q, s, g = nvfp4_jit.swiglu_quantize(x, interleave=interleave, scale_layout="swizzled128x4")
    cq, cs, cg = cpu.swiglu_quantize(host(x), interleave=interleave, scale_layout="swizzled128x4", in_dtype="bf16")
    assert_same_bits(q, cq, "values")
    assert_same_bits(s, cs, "scales")
    assert_same_bits(g, cg, "global scales")


def test_moe_stage_matches_cpu_reference():
    rows, k, topk = 29, 256, 8
    x = activations(rows, k)
    ids = torch.randint(0, 256, (rows, topk), dtype=torch.int32, device=DEV)
    wts = torch.rand(rows, topk, device=DEV)
    q, s, g, ids_out, w_out = nvfp4_jit.moe_stage(x, ids, wts, 0.02)
    cq, cs, _, cids, cw = cpu.moe_stage(host(x), host(ids), host(wts), 0.02, in_dtype="bf16")
    for got, want, what in [(q, cq, "values"), (s, cs, "scales"), (ids_out, cids, "ids"), (w_out, cw, "weights")]:
        assert_same_bits(got, want, what)


def test_convert_scales_and_prepack_match_cpu_reference():
    n, k = 300, 768
    w, s = nvfp4_weight(n, k)
    swz = nvfp4_jit.convert_scales(s, n, k)
    assert_same_bits(swz, cpu.convert_scales(host(s), n, k), "linear -> swizzled")
    assert_same_bits(nvfp4_jit.convert_scales(swz, n, k, src_layout="swizzled128x4", dst_layout="linear"), host(s), "back")
    p = nvfp4_jit.prepack(w, s)
    assert_same_bits(p, cpu.prepack(host(w), host(s)), "prepack")
    assert_same_bits(nvfp4_jit.prepack(w, swz, scale_layout="swizzled128x4"), host(p), "prepack from swizzled")


# ---------------------------------------------------------------------------------------------
# GEMMs against float64


def decoded64(q, s, k, layout="linear"):
    """float64 values e2m1 * e4m3 (no global scale), from the CPU reference (exact)."""
    return cpu.dequantize(host(q), host(s), 1.0, k=k, scale_layout=layout).astype(np.float64)


@pytest.mark.parametrize("m", [1, 130])
@pytest.mark.parametrize("out_dtype,bias", [(torch.float32, True), (torch.bfloat16, False)])
def test_gemm_w4a16_against_float64(m, out_dtype, bias):
    n, k = 200, 512
    a = activations(m, k) / 8
    w, s = nvfp4_weight(n, k)
    g = torch.tensor([0.003], device=DEV)
    b = torch.randn(n, device=DEV).to(torch.bfloat16) if bias else None
    y = nvfp4_jit.gemm(a, w, s, g, bias=b, alpha=0.5, out_dtype=out_dtype)
    ref = 0.5 * np.float64(np.float32(0.003)) * (host(a.float()).astype(np.float64) @ decoded64(w, s, k).T)
    if bias:
        ref += host(b.float())
    assert rel_err(y, ref) < (1e-5 if out_dtype == torch.float32 else 8e-3)
    # the same bits through: a prepacked weight, float4_e2m1fn_x2 storage, out=, swizzled scales
    p = nvfp4_jit.prepack(w, s)
    assert_same_bits(nvfp4_jit.gemm(a, p, None, g, b_prepacked=True, n=n, bias=b, alpha=0.5, out_dtype=out_dtype),
                     host(y), "prepacked")
    if hasattr(torch, "float4_e2m1fn_x2"):
        assert_same_bits(nvfp4_jit.gemm(a, w.view(torch.float4_e2m1fn_x2), s, g, bias=b, alpha=0.5, out_dtype=out_dtype),
                         host(y), "float4_e2m1fn_x2 weight")
    out = poisoned_like(y)
    nvfp4_jit.gemm(a, w, s, g, bias=b, alpha=0.5, out=out)
    assert_same_bits(out, host(y), "out=")
    swz = nvfp4_jit.convert_scales(s, n, k)
    assert_same_bits(nvfp4_jit.gemm(a, w, swz, g, b_scale_layout="swizzled128x4", bias=b, alpha=0.5, out_dtype=out_dtype),
                     host(y), "swizzled scales")


@pytest.mark.parametrize("m", [1, 16])
@pytest.mark.parametrize("fp32_weight", [False, True])
def test_gemm_a_rmsnorm_weight_against_float64(m, fp32_weight):
    """RMSNorm of A in the GEMM (un-normalized rows in) against float64 of norm-then-GEMM, within
    BF16's rounding of the normalized operand; the native and Python paths the same bits."""
    n, k = 256, 1024
    a = activations(m, k)
    w, s = nvfp4_weight(n, k)
    g = torch.rand(k, device=DEV) + 0.5
    g = g if fp32_weight else g.to(torch.bfloat16)
    y = nvfp4_jit.gemm(a, w, s, 0.003, a_rmsnorm_weight=g, a_rmsnorm_eps=1e-5, out_dtype=torch.float32)
    a64, g64 = host(a.float()).astype(np.float64), host(g.float()).astype(np.float64)
    normed = a64 / np.sqrt((a64 * a64).mean(axis=1, keepdims=True) + 1e-5) * g64
    ref = np.float64(np.float32(0.003)) * (normed @ decoded64(w, s, k).T)
    assert rel_err(y, ref) < 8e-3
    out = poisoned_like(y)
    nvfp4_jit.gemm(a, w, s, 0.003, a_rmsnorm_weight=g, a_rmsnorm_eps=1e-5, out=out)
    assert_same_bits(out, host(y), "out=")
    p = nvfp4_jit.prepack(w, s)
    assert_same_bits(nvfp4_jit.gemm(a, p, None, 0.003, b_prepacked=True, n=n, a_rmsnorm_weight=g, a_rmsnorm_eps=1e-5,
                                    out_dtype=torch.float32), host(y), "prepacked")


@pytest.mark.parametrize("m", [1, 130])
def test_gemm_residual_is_one_rounding_of_the_fp32_sum(m):
    """residual: out = RN(gemm's fp32 result + residual), into a new tensor or in place."""
    n, k = 192, 512
    a = activations(m, k) / 8
    w, s = nvfp4_weight(n, k)
    r = torch.randn(m, n, device=DEV).to(torch.bfloat16)
    plain = nvfp4_jit.gemm(a, w, s, 0.004, out_dtype=torch.float32)
    want = (plain + r.float()).to(torch.bfloat16)
    y = nvfp4_jit.gemm(a, w, s, 0.004, residual=r)
    assert_same_bits(y, host(want), "residual")
    inplace = r.clone()
    nvfp4_jit.gemm(a, w, s, 0.004, residual=inplace, out=inplace)
    assert_same_bits(inplace, host(want), "residual, out= the residual itself")


def test_gemm_fused_options_refuse_bad_arguments():
    n, k = 128, 256
    a = activations(4, k)
    w, s = nvfp4_weight(n, k)
    with pytest.raises(nvfp4_jit.InvalidArgument, match="a_rmsnorm_weight"):
        nvfp4_jit.gemm(a, w, s, 1.0, a_rmsnorm_weight=torch.ones(k - 16, device=DEV, dtype=torch.bfloat16))
    with pytest.raises(nvfp4_jit.InvalidArgument, match="a_rmsnorm_weight"):
        nvfp4_jit.gemm(a, w, s, 1.0, a_rmsnorm_weight=torch.ones(k, device=DEV, dtype=torch.float16))
    q, qs, qg = nvfp4_jit.quantize(a, scale_mode="per_row")
    with pytest.raises(nvfp4_jit.InvalidArgument, match="a_rmsnorm_weight"):
        nvfp4_jit.gemm(q, w, s, 1.0, a_scales=qs, a_global_scale=qg, a_rmsnorm_weight=torch.ones(k, device=DEV))
    with pytest.raises(nvfp4_jit.InvalidArgument, match="a_rmsnorm_eps"):
        nvfp4_jit.gemm(a, w, s, 1.0, a_rmsnorm_weight=torch.ones(k, device=DEV), a_rmsnorm_eps="1e-6")
    with pytest.raises(nvfp4_jit.InvalidArgument, match="residual"):
        nvfp4_jit.gemm(a, w, s, 1.0, residual=torch.zeros(4, n, device=DEV))  # fp32 residual, bf16 out
    with pytest.raises(nvfp4_jit.InvalidArgument, match="residual"):
        nvfp4_jit.gemm(a, w, s, 1.0, residual=torch.zeros(4, n + 8, device=DEV, dtype=torch.bfloat16))


@pytest.mark.parametrize("m", [3, 64])
@pytest.mark.parametrize("per_row", [False, True])
def test_gemm_w4a4_against_float64(m, per_row):
    n, k = 256, 512
    x = activations(m, k)
    qa, sa, ga = nvfp4_jit.quantize(x, scale_mode="per_row" if per_row else "per_tensor")
    w, s = nvfp4_weight(n, k)
    y = nvfp4_jit.gemm(qa, w, s, 0.004, a_scales=sa, a_global_scale=ga, out_dtype=torch.float32)
    a64 = decoded64(qa, sa, k) * host(ga).astype(np.float64).reshape(-1, 1)
    ref = (a64 @ decoded64(w, s, k).T) * np.float64(np.float32(0.004))
    assert rel_err(y, ref) < 1e-5
    ws = torch.empty(m * k * 2, dtype=torch.uint8, device=DEV)
    out = poisoned_like(y)
    nvfp4_jit.gemm(qa, w, s, 0.004, a_scales=sa, a_global_scale=ga, out=out, workspace=ws)
    assert_same_bits(out, host(y), "out= with a given workspace")


def test_grouped_gemm_contiguous_and_masked_against_float64():
    groups, n, k = 5, 128, 256
    sizes = torch.tensor([3, 0, 17, 1, 9])
    total = int(sizes.sum())
    ends = torch.cumsum(sizes, 0).to(torch.int32).to(DEV)
    a = activations(total + 4, k) / 8
    w = torch.randint(0, 256, (groups, n, k // 2), dtype=torch.uint8, device=DEV)
    s = torch.randint(0x20, 0x48, (groups, n, k // 16), dtype=torch.uint8, device=DEV).view(torch.float8_e4m3fn)
    g_host = np.random.uniform(0.001, 0.01, groups).astype(np.float32)
    g = torch.tensor(g_host, device=DEV)
    out = torch.full((total + 4, n), float("nan"), device=DEV)
    nvfp4_jit.grouped_gemm(a, w, s, g, group_ends=ends, out=out)
    a64 = host(a.float()).astype(np.float64)
    start = 0
    for e in range(groups):
        end = start + int(sizes[e])
        ref = a64[start:end] @ decoded64(w[e], s[e], k).T * np.float64(g_host[e])
        if end > start:
            assert rel_err(out[start:end], ref) < 1e-5, f"group {e}"
        start = end
    assert torch.isnan(out[total:]).all(), "rows past the last group end were written"
    # masked: [groups, m, k], the first masked_m[g] rows of each group
    mm = torch.tensor([2, 0, 5, 1, 3], dtype=torch.int32, device=DEV)
    a3 = activations(groups * 6, k).view(groups, 6, k) / 8
    y3 = torch.full((groups, 6, n), float("nan"), device=DEV)
    nvfp4_jit.grouped_gemm(a3, w, s, g, masked_m=mm, out=y3)
    for e in range(groups):
        r = int(mm[e])
        if r:
            ref = host(a3[e, :r].float()).astype(np.float64) @ decoded64(w[e], s[e], k).T * np.float64(g_host[e])
            assert rel_err(y3[e, :r], ref) < 1e-5, f"masked group {e}"


@pytest.mark.parametrize("m", [5, 300])
def test_gemm_swiglu_epilogue_against_the_fp32_sums(m):
    # A ModelOpt gate_up weight (gate rows [0, I), then up rows) prepacked for the fused
    # epilogue: out [m, I] = silu(gate) * up from the same fp32 sums the plain GEMM writes.
    inter, k = 96, 256
    a = activations(m, k) / 8
    w, s = nvfp4_weight(2 * inter, k)
    bias = torch.randn(2 * inter, device=DEV)
    p = nvfp4_jit.prepack(w, s, swiglu_interleave=0)
    y = nvfp4_jit.gemm(a, p, None, 0.01, b_prepacked=True, n=2 * inter, bias=bias, out_dtype=torch.float32,
                       epilogue="swiglu")
    assert y.shape == (m, inter)
    h = host(nvfp4_jit.gemm(a, w, s, 0.01, bias=bias, out_dtype=torch.float32)).astype(np.float64)
    gate, up = h[:, :inter], h[:, inter:]
    swiglu = gate / (1 + np.exp(-gate)) * up
    assert rel_err(y, swiglu) < 1e-5
    out = poisoned_like(y)
    nvfp4_jit.gemm(a, p, None, 0.01, b_prepacked=True, n=2 * inter, bias=bias, out=out, epilogue="swiglu")
    assert_same_bits(out, host(y), "swiglu out=")
    # grouped, contiguous: two experts, the second one's rows only
    ends = torch.tensor([0, m], dtype=torch.int32, device=DEV)
    yg = nvfp4_jit.grouped_gemm(a, torch.cat([p, p]), None, 0.01, group_ends=ends, b_prepacked=True, n=2 * inter,
                                bias=bias, out_dtype=torch.float32, epilogue="swiglu")
    assert rel_err(yg, swiglu) < 1e-5  # its own tile: another summation order
    # b_swiglu_interleave reaches the library (sm_100a / sm_120a read an interleaved weight as
    # stored; a prepacked one records its order), from every path
    with pytest.raises(nvfp4_jit.InvalidArgument, match="b_swiglu_interleave = 4 with b_prepacked"):
        nvfp4_jit.gemm(a, p, None, 0.01, b_prepacked=True, n=2 * inter, epilogue="swiglu", b_swiglu_interleave=4)
    with pytest.raises(nvfp4_jit.InvalidArgument, match="b_swiglu_interleave = 4 with b_prepacked"):
        nvfp4_jit.gemm(a, p, None, 0.01, b_prepacked=True, n=2 * inter, epilogue="swiglu", out=out, b_swiglu_interleave=4)
    with pytest.raises(nvfp4_jit.InvalidArgument, match="b_swiglu_interleave = 4 with b_prepacked"):
        nvfp4_jit.grouped_gemm(a, torch.cat([p, p]), None, 0.01, group_ends=ends, b_prepacked=True, n=2 * inter,
                               epilogue="swiglu", b_swiglu_interleave=4)
    with pytest.raises(nvfp4_jit.Unsupported, match="b_swiglu_interleave = 3: .* power of two dividing I"):
        nvfp4_jit.gemm(a, w, s, 0.01, epilogue="swiglu", b_swiglu_interleave=3)


@pytest.mark.parametrize("layout,per_row", [("linear", False), ("swizzled128x4", True)])
def test_gemm_swiglu_nvfp4_out_is_quantize_of_the_fp32_values(layout, per_row):
    # out_fp4: the SwiGLU epilogue's D as NVFP4 (a W4A4 down projection's input), exactly what
    # quantize() makes of the same call's fp32 D, also replayed in a CUDA graph
    m, inter, k = 37, 128, 256
    a = activations(m, k) / 8
    w, s = nvfp4_weight(2 * inter, k)
    p = nvfp4_jit.prepack(w, s, swiglu_interleave=0)
    y = nvfp4_jit.gemm(a, p, None, 0.01, b_prepacked=True, n=2 * inter, out_dtype=torch.float32, epilogue="swiglu")
    g = (y.abs().amax(dim=1) / 2688).clamp_min(1e-30) if per_row else float(y.abs().max()) / 2688
    want_q, want_s, _ = nvfp4_jit.quantize(y, g, scale_layout=layout)
    q = torch.full_like(want_q, 0x77)
    sc = torch.zeros_like(want_s.view(torch.uint8)).view(want_s.dtype)  # (quantize writes the padding's zeros)
    got = nvfp4_jit.gemm(a, p, None, 0.01, b_prepacked=True, n=2 * inter, epilogue="swiglu", out_fp4=(q, sc),
                         out_global_scale=g, out_scale_layout=layout)
    assert got[0] is q and got[1] is sc
    assert_same_bits(q, host(want_q), f"out_fp4 values ({layout})")
    assert_same_bits(sc, host(want_s), f"out_fp4 scales ({layout})")
    q.fill_(0x77)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        nvfp4_jit.gemm(a, p, None, 0.01, b_prepacked=True, n=2 * inter, epilogue="swiglu", out_fp4=(q, sc),
                       out_global_scale=g, out_scale_layout=layout)
    graph.replay()
    torch.cuda.synchronize()
    assert_same_bits(q, host(want_q), "out_fp4 values, graph replay")
    with pytest.raises(nvfp4_jit.InvalidArgument, match="out_fp4 .NVFP4 D. is the SwiGLU epilogue's output"):
        nvfp4_jit.gemm(a, w, s, 0.01, out_fp4=(q, sc))
    # a wrong buffer is named as out_fp4's
    for bad_pair, name in (((q[:, 1:], sc), r"out_fp4\[0\]"), ((q, sc[1:]), r"out_fp4\[1\]")):
        with pytest.raises(nvfp4_jit.InvalidArgument, match=name):
            nvfp4_jit.gemm(a, p, None, 0.01, b_prepacked=True, n=2 * inter, epilogue="swiglu", out_fp4=bad_pair,
                           out_global_scale=g, out_scale_layout=layout)


def test_gemm_w4a8_against_the_exact_mode():
    n, k = 256, 1024
    w, s = nvfp4_weight(n, k)
    p = nvfp4_jit.prepack(w, s)
    a = activations(16, k) / 8
    exact = nvfp4_jit.gemm(a, p, None, 0.01, b_prepacked=True, n=n, out_dtype=torch.float32)
    assert_same_bits(nvfp4_jit.gemm(a, p, None, 0.01, b_prepacked=True, n=n, out_dtype=torch.float32, precision="w4a8"),
                     host(exact), "w4a8 at 16 rows (the exact mode)")
    a = activations(512, k) / 8
    exact = host(nvfp4_jit.gemm(a, p, None, 0.01, b_prepacked=True, n=n, out_dtype=torch.float32)).astype(np.float64)
    y = nvfp4_jit.gemm(a, p, None, 0.01, b_prepacked=True, n=n, out_dtype=torch.float32, precision="w4a8")
    err = rel_err(y, exact)
    # E4M3 rounds A and the folded weight once each: about 2.5-3.6% (docs/formats.md, "W4A8";
    # the C++ suite holds every element to the model's bound); zero would mean the exact mode ran
    assert 0.005 < err < 0.06, err
    ws = torch.empty(512 * k + 4 * 512, dtype=torch.uint8, device=DEV)
    out = poisoned_like(y)
    nvfp4_jit.gemm(a, p, None, 0.01, b_prepacked=True, n=n, out=out, workspace=ws, precision="w4a8")
    assert_same_bits(out, host(y), "w4a8 out= with a given workspace")


# ---------------------------------------------------------------------------------------------
# Nvfp4Linear, torch.compile, CUDA graphs


def modelopt_layer(n, k, bias=False):
    w = torch.randn(n, k, device=DEV) / k ** 0.5
    ckpt = nvfp4_jit.quantize_modelopt(w)
    ckpt["input_scale"] = torch.tensor(0.002, device=DEV)  # calibrated amax / (6 * 448)
    ckpt["bias"] = torch.randn(n, device=DEV).to(torch.bfloat16) if bias else None
    return ckpt


@pytest.mark.parametrize("mode,rows", [("w4a16", 3), ("w4a4", 3), ("w4a8", 3), ("w4a8", 150)])
def test_nvfp4_linear_raw_path_equals_the_checked_ops(mode, rows):
    n, k = 256, 512
    ck = modelopt_layer(n, k, bias=True)
    lin = nvfp4_jit.Nvfp4Linear.from_modelopt(ck["weight"], ck["weight_scale"], ck["weight_scale_2"], ck["input_scale"],
                                              ck["bias"], mode=mode)
    x = activations(2 * rows, k).view(2, rows, k)
    y = lin(x)
    assert y.shape == (2, rows, n)
    assert_same_bits(y.view(2 * rows, n), host(lin._forward(x.view(2 * rows, k))), "raw vs checked path")
    if mode != "w4a4":
        ref = host(x.view(2 * rows, k).float()).astype(np.float64) @ decoded64(ck["weight"], ck["weight_scale"], k).T
        ref = ref * float(ck["weight_scale_2"]) + host(ck["bias"].float())
        assert rel_err(y.view(2 * rows, n), ref) < (8e-3 if mode == "w4a16" or rows <= 128 else 0.06)


def mlp_block(x, norm_w, gu, down):
    """RMSNorm + quantize -> W4A4 gate_up -> SwiGLU + quantize -> W4A4 down, plus the residual."""
    q, s, _ = nvfp4_jit.rmsnorm_quantize(x, norm_w, 1e-5, gu["input_scale"])
    h = nvfp4_jit.gemm(q, gu["weight"], gu["weight_scale"], gu["weight_scale_2"], a_scales=s,
                       a_global_scale=gu["input_scale"])
    q2, s2, _ = nvfp4_jit.swiglu_quantize(h, down["input_scale"])
    return x + nvfp4_jit.gemm(q2, down["weight"], down["weight_scale"], down["weight_scale_2"], a_scales=s2,
                              a_global_scale=down["input_scale"])


def test_torch_compile_fullgraph_equals_eager():
    k, inter = 512, 1024
    gu, down = modelopt_layer(2 * inter, k), modelopt_layer(k, inter)
    norm_w = (torch.rand(k, device=DEV) + 0.5).to(torch.bfloat16)
    x = activations(8, k)
    eager = mlp_block(x, norm_w, gu, down)
    torch._dynamo.reset()
    compiled = torch.compile(mlp_block, fullgraph=True)
    assert_same_bits(compiled(x, norm_w, gu, down), host(eager), "compiled block")
    x2 = activations(8, k)
    assert_same_bits(compiled(x2, norm_w, gu, down), host(mlp_block(x2, norm_w, gu, down)), "compiled, new input")
    lin = nvfp4_jit.Nvfp4Linear.from_modelopt(gu["weight"], gu["weight_scale"], gu["weight_scale_2"])
    clin = torch.compile(lin, fullgraph=True)
    assert_same_bits(clin(x), host(lin(x)), "compiled Nvfp4Linear")


@pytest.mark.parametrize("mode", ["w4a16", "w4a4"])
def test_cuda_graph_replays_with_new_inputs_and_scales(mode):
    n, k, m = 512, 1024, 4
    ck = modelopt_layer(n, k, bias=True)
    lin = nvfp4_jit.Nvfp4Linear.from_modelopt(ck["weight"], ck["weight_scale"], ck["weight_scale_2"], ck["input_scale"],
                                              ck["bias"], mode=mode)
    lin.prewarm([m])
    static_x = activations(m, k)
    if mode == "w4a4":  # quantize is not part of prewarm's GEMM; run it once like the warm-up pass
        nvfp4_jit.quantize(static_x, lin.input_scale)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_y = lin(static_x)
    for step in range(3):
        static_x.copy_(activations(m, k))
        if step == 2:  # a new weight global scale, seen by the replay through its device pointer
            lin.weight_scale_2.mul_(2)
        graph.replay()
        torch.cuda.synchronize()
        assert_same_bits(static_y, host(lin(static_x)), f"replay {step}")


def test_capture_of_an_unloaded_kernel_names_the_warm_up():
    x = activations(8, 4096 + 16 * 11)  # a k no other test uses: its kernel is not loaded
    stream = torch.cuda.Stream()
    graph = torch.cuda.CUDAGraph()
    with pytest.raises(nvfp4_jit.NotLoadedInCapture, match="prewarm"):
        with torch.cuda.graph(graph, stream=stream):
            nvfp4_jit.quantize(x, 1.0)


def test_prewarm_then_capture_a_functional_gemm():
    n, k = 320, 768  # a weight shape no other test uses
    nvfp4_jit.prewarm(n, k, [2, 24])
    w, s = nvfp4_weight(n, k)
    g = torch.tensor([0.01], device=DEV)
    x = activations(24, k)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = nvfp4_jit.gemm(x, w, s, g)  # allocated from the graph's pool
    x.copy_(activations(24, k))
    graph.replay()
    torch.cuda.synchronize()
    assert_same_bits(y, host(nvfp4_jit.gemm(x, w, s, g)), "replayed functional gemm")


def test_tune_records_a_winner_for_one_bucket():
    result = nvfp4_jit.tune(256, 512, m=1, runs=3)
    assert len(result) == 1 and result[0]["winner"] and result[0]["winner_us"] > 0, result
    with pytest.raises(nvfp4_jit.InvalidArgument, match=r"\bk\b"):
        nvfp4_jit.tune(256, 500)


def test_tune_a_grouped_weight_per_rows_per_expert():
    result = nvfp4_jit.tune(256, 512, m=8, runs=2, groups=4, grouped_layout="masked")
    assert len(result) == 1 and result[0]["m_bucket"] == 8 and result[0]["winner_us"] > 0, result
    with pytest.raises(nvfp4_jit.InvalidArgument, match="rows per expert"):
        nvfp4_jit.tune(256, 512, m=600, groups=4)
    with pytest.raises(nvfp4_jit.InvalidArgument, match="grouped_layout"):
        nvfp4_jit.tune(256, 512, groups=4, grouped_layout="batched")


def test_tune_is_a_process_first_cuda_call():
    """No tensor made before it: tune itself makes torch's CUDA context current."""
    code = "import nvfp4_jit; r = nvfp4_jit.tune(256, 512, m=1, runs=2); assert r[0]['winner_us'] > 0; print('ok')"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="one GPU here: each device's own kernels need two")
def test_every_device_loads_its_own_kernels_and_gets_the_same_bits():
    n, k = 256, 512
    results = []
    for d in range(torch.cuda.device_count()):
        dev = torch.device("cuda", d)
        torch.manual_seed(3)
        x = torch.randn(5, k, device=dev).to(torch.bfloat16)
        w = torch.randint(0, 256, (n, k // 2), dtype=torch.uint8, device=dev)
        s = torch.randint(0x20, 0x48, (n, k // 16), dtype=torch.uint8, device=dev).view(torch.float8_e4m3fn)
        q, sc, g = nvfp4_jit.quantize(x)  # called with device 0 current: the op makes d current for the launch
        results.append([host(t) for t in (nvfp4_jit.gemm(x, w, s, 0.01), q, sc, g,
                                           nvfp4_jit.gemm(q, w, s, 0.01, a_scales=sc, a_global_scale=g))])
    for d, r in enumerate(results[1:], 1):
        for got, want, what in zip(r, results[0], ["w4a16", "q", "scales", "gscale", "w4a4"]):
            assert_same_bits(got, want, f"device {d} {what}")
