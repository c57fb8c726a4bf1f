"""A decoder's MLP and MoE blocks as the public ops compose them, in the fewest launches that
measured fastest (docs/perf.md, "Whole blocks": bench block's "fused" column). Thin on purpose:
each block is a few calls of gemm / grouped_gemm / moe_route / moe_combine on prepacked NVFP4
weights (W4A16), so torch.compile and CUDA graphs see those ops, and every argument the ops take
is theirs to check. Routing stays on the device: a captured block replays with new top-k ids.
The W4A16 GEMMs on prepacked weights and their SwiGLU epilogue run on sm_90a; on the other
archs the ops refuse them with the reason (Unsupported).
"""
from torch import Tensor

from ._core import bad, prepacked_bytes
from .ops import gemm, grouped_gemm, moe_combine, moe_route


def _experts(op, name, w, n, k):
    """How many experts of n x k a prepacked buffer holds (uint8 [E * prepacked_bytes(n, k)])."""
    if not isinstance(w, Tensor) or w.dim() != 1:
        bad(op, f"{name} must be a 1-D uint8 tensor of prepacked experts (prepack(...) of each, concatenated)")
    per_expert = prepacked_bytes(n, k)
    if w.numel() == 0 or w.numel() % per_expert:
        bad(op, f"{name} holds {w.numel()} bytes, not a whole number of {n} x {k} experts ({per_expert} bytes each)")
    return w.numel() // per_expert


def _dims(op, x, intermediate):
    """x's hidden size and the intermediate size I, checked."""
    if not isinstance(x, Tensor) or x.dim() != 2:
        bad(op, "x must be a 2-D tensor [tokens, hidden]")
    if int(intermediate) <= 0:
        bad(op, f"intermediate must be positive, got {intermediate}")
    return x.shape[1], int(intermediate)


def mlp_block(x, gate_up, down, *, intermediate, gate_up_global_scale=1.0, down_global_scale=1.0, residual=None,
              out=None, weights_static=True):
    """A gated MLP (Llama's, Qwen's): out = down(silu(gate) * up) (+ residual), in two launches.

    x [tokens, hidden] (bf16 / fp16, already normalized); gate_up: the gate_up weight [2I, hidden]
    prepacked with swiglu_interleave (its rows as the checkpoint stores them); down [hidden, I]
    prepacked; intermediate: I. gate_up runs the SwiGLU epilogue (silu(gate) * up from the fp32
    sums, rounded once to x's dtype), down adds `residual` [tokens, hidden] before its one
    rounding (it may be `out` itself). The global scales: float or fp32 tensor of one value.
    weights_static: the weights are no earlier kernel's output, so each GEMM may stream them
    before the previous launch ends (GemmArgs::weights_static)."""
    op = "mlp_block"
    hidden, inter = _dims(op, x, intermediate)
    if _experts(op, "gate_up", gate_up, 2 * inter, hidden) != 1 or _experts(op, "down", down, hidden, inter) != 1:
        bad(op, "gate_up and down must each hold one prepacked weight (grouped experts: moe_block)")
    h = gemm(x, gate_up, None, gate_up_global_scale, b_prepacked=True, n=2 * inter, epilogue="swiglu",
             weights_static=weights_static)
    return gemm(h, down, None, down_global_scale, b_prepacked=True, n=hidden, residual=residual, out=out,
                weights_static=weights_static)


def moe_block(x, topk_ids, topk_weights, gate_up, down, *, intermediate, gate_up_global_scale=1.0,
              down_global_scale=1.0, first_expert=0, out=None, weights_static=True):
    """A mixture-of-experts block's routed experts, in five launches: moe_route; gate_up reading
    each token's rows through row_index (grouped_gemm copies them into expert order first: two
    launches) with the SwiGLU epilogue; down; the router-weighted moe_combine (deterministic: the
    same bits whatever the routing order).

    x [tokens, hidden] (bf16 / fp16); topk_ids [tokens, topk] int32 / int64: an id outside
    [first_expert, first_expert + E) (-1 padding, another expert-parallel rank's) contributes
    nothing; topk_weights [tokens, topk] fp32 / bf16; gate_up: E experts [2I, hidden], each
    prepacked with swiglu_interleave, concatenated; down: E experts [hidden, I] prepacked,
    concatenated; intermediate: I. The global scales: float, or fp32 tensor of 1 or E values
    (per expert). Returns out [tokens, hidden] in x's dtype (given: written in place); a token
    none of whose ids this rank holds gets zeros. A shared expert is one more expert every token
    chooses at weight 1 (bench block's DeepSeek-V3), or a separate mlp_block."""
    op = "moe_block"
    hidden, inter = _dims(op, x, intermediate)
    experts, down_experts = _experts(op, "gate_up", gate_up, 2 * inter, hidden), _experts(op, "down", down, hidden, inter)
    if down_experts != experts:
        bad(op, f"down holds {down_experts} experts of {hidden} x {inter}, gate_up {experts} of {2 * inter} x {hidden}")
    ends, row_index, positions, _ = moe_route(topk_ids, experts, first_expert=first_expert)
    h = grouped_gemm(x, gate_up, None, gate_up_global_scale, group_ends=ends, row_index=row_index, b_prepacked=True,
                     n=2 * inter, epilogue="swiglu", weights_static=weights_static)
    y = grouped_gemm(h, down, None, down_global_scale, group_ends=ends, b_prepacked=True, n=hidden,
                     weights_static=weights_static)
    return moe_combine(y, positions, topk_weights, out_dtype=x.dtype, out=out)
