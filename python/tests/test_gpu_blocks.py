"""mlp_block and moe_block on the GPU against float64 of the same math, their out= and residual
forms, a CUDA graph replayed with new routing, and the arguments they refuse. Fresh random data
each run; padding ids and another rank's experts in the routing.

The bound: the blocks round twice to BF16 (the SwiGLU epilogue's h, then the output), each at
most 2^-9 relative an element, so the relative Frobenius error against float64 of unrounded h
stays below 2 * 2^-9 plus the fp32 sums' (far smaller): 5e-3."""
import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed here: the torch layer runs on the GPU machine")
import nvfp4_jit  # noqa: E402
from test_gpu import DEV, activations, assert_same_bits, decoded64, host, nvfp4_weight, rel_err  # noqa: E402
from test_gpu_moe_mhc import router_ids  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.torch_layer]
BOUND = 5e-3


def experts(count, n, k, swiglu):
    """count fresh weights [n, k] (float64 decoded values) and their prepacked buffers, concatenated."""
    decoded, packed = [], []
    for _ in range(count):
        w, s = nvfp4_weight(n, k)
        decoded.append(decoded64(w, s, k))
        packed.append(nvfp4_jit.prepack(w, s, swiglu_interleave=0 if swiglu else None))
    return decoded, torch.cat(packed)


def swiglu64(x64, gate_up64, g, inter):
    h = x64 @ gate_up64.T * g
    gate, up = h[:, :inter], h[:, inter:]
    return gate / (1 + np.exp(-gate)) * up


def test_mlp_block_against_float64():
    tokens, hidden, inter = 13, 512, 192
    g_gu, g_d = np.float32(0.01), np.float32(0.004)
    (gu64,), gu = experts(1, 2 * inter, hidden, True)
    (d64,), down = experts(1, hidden, inter, False)
    x = activations(tokens, hidden) / 8
    x64 = host(x.float()).astype(np.float64)
    ref = swiglu64(x64, gu64, np.float64(g_gu), inter) @ d64.T * np.float64(g_d)
    y = nvfp4_jit.mlp_block(x, gu, down, intermediate=inter, gate_up_global_scale=float(g_gu),
                            down_global_scale=float(g_d))
    assert y.shape == (tokens, hidden) and y.dtype == x.dtype
    assert rel_err(y, ref) < BOUND
    # the residual added in place: out is the residual
    res = activations(tokens, hidden)
    res64 = host(res.float()).astype(np.float64)
    nvfp4_jit.mlp_block(x, gu, down, intermediate=inter, gate_up_global_scale=float(g_gu), down_global_scale=float(g_d),
                        residual=res, out=res)
    assert rel_err(res, ref + res64) < BOUND


@pytest.mark.parametrize("first_expert", [0, 3])
def test_moe_block_against_float64(first_expert):
    tokens, topk, count, hidden, inter = 29, 4, 6, 256, 128
    gu64, gu = experts(count, 2 * inter, hidden, True)
    d64, down = experts(count, hidden, inter, False)
    g_gu = torch.rand(count, device=DEV) * 0.01 + 0.002  # per expert
    g_d = 0.004
    x = activations(tokens, hidden) / 8
    ids = router_ids(tokens, topk, count + first_expert, torch.int32)  # padding and other ranks' ids too
    ids[0] = -1  # a token none of whose entries this rank holds
    wts = torch.rand(tokens, topk, device=DEV)
    y = nvfp4_jit.moe_block(x, ids, wts, gu, down, intermediate=inter, gate_up_global_scale=g_gu, down_global_scale=g_d,
                            first_expert=first_expert)
    x64, ids_h, w64, g_h = host(x.float()).astype(np.float64), host(ids), host(wts).astype(np.float64), host(g_gu)
    ref = np.zeros((tokens, hidden))
    for t in range(tokens):
        for j in range(topk):
            e = int(ids_h[t, j]) - first_expert
            if 0 <= e < count:
                h = swiglu64(x64[t:t + 1], gu64[e], np.float64(g_h[e]), inter)
                ref[t] += w64[t, j] * (h @ d64[e].T * np.float64(np.float32(g_d)))[0]
    assert y.shape == (tokens, hidden) and y.dtype == x.dtype
    assert rel_err(y, ref) < BOUND
    assert (y[0] == 0).all(), "a token with no entry held is not zero"


def test_moe_block_replays_in_a_cuda_graph_with_new_routing():
    tokens, topk, count, hidden, inter = 16, 2, 8, 256, 128
    _, gu = experts(count, 2 * inter, hidden, True)
    _, down = experts(count, hidden, inter, False)
    x = activations(tokens, hidden) / 8
    ids = router_ids(tokens, topk, count, torch.int32)
    wts = torch.rand(tokens, topk, device=DEV)
    out = torch.empty(tokens, hidden, dtype=torch.bfloat16, device=DEV)

    def block():
        return nvfp4_jit.moe_block(x, ids, wts, gu, down, intermediate=inter, gate_up_global_scale=0.01,
                                   down_global_scale=0.004, out=out)

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # loads every kernel before the capture
        block()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        block()
    for _ in range(2):
        ids.copy_(router_ids(tokens, topk, count, torch.int32))
        wts.copy_(torch.rand(tokens, topk, device=DEV))
        graph.replay()
        torch.cuda.synchronize()
        replayed = host(out).copy()
        want = nvfp4_jit.moe_block(x, ids, wts, gu, down, intermediate=inter, gate_up_global_scale=0.01,
                                   down_global_scale=0.004)
        assert_same_bits(want, replayed, "moe_block replayed with new routing")


def test_blocks_refuse_bad_arguments():
    hidden, inter = 256, 128
    _, gu = experts(2, 2 * inter, hidden, True)
    _, down = experts(2, hidden, inter, False)
    x = activations(4, hidden)
    ids = torch.zeros(4, 2, dtype=torch.int32, device=DEV)
    wts = torch.rand(4, 2, device=DEV)
    with pytest.raises(nvfp4_jit.InvalidArgument, match="down holds 1 experts"):
        nvfp4_jit.moe_block(x, ids, wts, gu, down[:down.numel() // 2], intermediate=inter)
    with pytest.raises(nvfp4_jit.InvalidArgument, match="not a whole number"):
        nvfp4_jit.moe_block(x, ids, wts, gu, down, intermediate=inter + 64)
    with pytest.raises(nvfp4_jit.InvalidArgument, match="intermediate must be positive"):
        nvfp4_jit.moe_block(x, ids, wts, gu, down, intermediate=0)
    with pytest.raises(nvfp4_jit.InvalidArgument, match="one prepacked weight"):
        nvfp4_jit.mlp_block(x, gu, down, intermediate=inter)
    with pytest.raises(nvfp4_jit.InvalidArgument, match="x must be a 2-D tensor"):
        nvfp4_jit.mlp_block(x[0], gu, down, intermediate=inter)
