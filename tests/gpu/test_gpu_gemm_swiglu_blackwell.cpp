// The fused SwiGLU epilogue (GemmEpilogue::swiglu) on the Blackwell backends, sm_100a / sm_103a
// and sm_120a / sm_121a: natively there, exactly emulated on sm_90a (on_blackwell_backend.hpp).
// The gate_up weight as stored, ModelOpt's halves (gate rows [0, I), then up rows) or
// interleaved (b_swiglu_interleave, g = 1 to 256), W4A4, against float64 and the unfused chain
// with swiglu_case.hpp's bounds: dense and grouped (contiguous with empty experts and a
// row_index gather, masked), ragged M, I not a multiple of the tile's outputs, every weight tile
// width, a CTA pair (sm_100a) and split K (sm_120a), poisoned and padded D.
#include "on_blackwell_backend.hpp"
#include "ops/gemm/sm100/tiles.hpp"
#include "ops/gemm/sm120/tiles.hpp"
#include "swiglu_case.hpp"

namespace {

constexpr DType fp4 = DType::nvfp4, bf16 = DType::bf16, fp16 = DType::fp16, fp32 = DType::fp32;
constexpr GroupedLayout contiguous = GroupedLayout::contiguous, masked = GroupedLayout::masked;

// `c` with the fused call on the weight as stored (W4A4), on `tile` when given
SwigluCase stored(SwigluCase c, GemmTile tile = {}) {
  c.a = fp4, c.as_stored = true, c.backend_tile = tile;
  return c;
}
SwigluCase with_alpha(SwigluCase c, float alpha) {
  c.alpha = alpha;
  return c;
}
GemmTile sm100_tile(int block_n, int stages, int ctas = 1) { return sm100::Tiles::to_config({block_n, stages, ctas}); }
GemmTile sm120_tile(int block_m, int block_n, int stages, int split_k = 1) {
  return sm120::Tiles::to_config({block_m, block_n, stages, split_k});
}

}  // namespace

TEST_SUITE("gpu_gemm_swiglu_sm100") {
  TEST_CASE("sm_100a gemm with the SwiGLU epilogue: dense, ragged M and I, every weight tile width, CTA pairs") {
    const test::OnSm100Backend on;
    if (!on.ready()) return;
    std::mt19937 rng(std::random_device{}());
    // fields: m, I, k, interleave, a, d, bias (1 bf16, 2 fp32), groups, layout, gather, d_pad
    const SwigluCase cases[] = {
        stored({1, 2048, 4096}),
        stored({16, 768, 2048, 0, fp4, bf16, 1}),
        stored({104, 1440, 2880, 0, fp4, bf16, 2}),
        with_alpha(stored({300, 200, 1024, 0, fp4, fp16, 2, 0, contiguous, false, 8}), 1.0f / 64),  // FP16 D within range
        stored({37, 256, 512, 0, fp4, fp32}),
        stored({260, 200, 576, 0, fp4, bf16, 1}, sm100_tile(64, 2)),
        stored({130, 520, 1024, 0, fp4, fp32, 0, 0, contiguous, false, 3}, sm100_tile(128, 6)),
        stored({130, 520, 1024}, sm100_tile(256, 2)),
        stored({300, 600, 512, 0, fp4, bf16, 2}, sm100_tile(256, 2, 2)),  // a pair: the even CTA's gate, the odd's up rows
        stored({520, 200, 1024, 0, fp4, bf16, 0, 0, contiguous, false, 8}, sm100_tile(128, 3, 2)),
        // interleaved checkpoints: groups of g gate rows, then g up rows (g = 1 alternates them);
        // g below a box's BN / 2 rows (boxes of whole groups), at it, and past it
        stored({16, 768, 2048, 1, fp4, bf16, 1}),
        stored({100, 256, 1024, 8, fp4, bf16, 2}, sm100_tile(256, 2)),
        stored({130, 512, 512, 64, fp4, fp32}, sm100_tile(128, 2)),
        stored({300, 512, 512, 256, fp4, bf16, 1}, sm100_tile(64, 2)),
        stored({300, 384, 512, 2, fp4, bf16, 2}, sm100_tile(256, 2, 2)),
        stored({9, 48, 256}, sm100_tile(256, 2)),  // I under a box's 128 rows: the rows past I read as zeros
    };
    for (const SwigluCase& c : cases) run_swiglu_case(c, rng);
  }

  TEST_CASE("sm_100a grouped_gemm with the SwiGLU epilogue: contiguous with empty experts, a row_index gather, masked") {
    const test::OnSm100Backend on;
    if (!on.ready()) return;
    std::mt19937 rng(std::random_device{}());
    const SwigluCase cases[] = {
        stored({300, 256, 1024, 0, fp4, bf16, 0, 8}),
        stored({16, 768, 2048, 0, fp4, bf16, 1, 16, contiguous, true}),
        stored({200, 256, 1024, 0, fp4, bf16, 2, 8, contiguous, true}),
        stored({40, 384, 1024, 0, fp4, bf16, 0, 4, masked}),
        stored({600, 136, 512, 0, fp4, bf16, 1, 4, contiguous, true}, sm100_tile(128, 2, 2)),
        stored({300, 200, 256, 0, fp4, fp32, 0, 3, masked}, sm100_tile(256, 4, 2)),
        stored({200, 256, 1024, 1, fp4, bf16, 2, 8, contiguous, true}),
        stored({40, 384, 1024, 16, fp4, bf16, 0, 4, masked}, sm100_tile(128, 2, 2)),
    };
    for (const SwigluCase& c : cases) run_swiglu_case(c, rng);
  }

  // Small enough for compute-sanitizer: every weight tile width, one CTA or a pair, dense and grouped.
  TEST_CASE("sm_100a SwiGLU epilogue small shapes for the sanitizers") {
    const test::OnSm100Backend on;
    if (!on.ready()) return;
    std::mt19937 rng(std::random_device{}());
    const SwigluCase cases[] = {
        stored({3, 40, 320}, sm100_tile(64, 2)),
        stored({9, 72, 256, 0, fp4, bf16, 1}, sm100_tile(128, 3)),
        stored({130, 200, 576, 0, fp4, bf16, 2}, sm100_tile(256, 2, 2)),
        stored({50, 72, 256, 0, fp4, fp32, 0, 4, contiguous, true}, sm100_tile(128, 2)),
        stored({9, 64, 320, 0, fp4, bf16, 0, 3, masked}, sm100_tile(128, 2, 2)),
        stored({9, 64, 256, 1, fp4, bf16}, sm100_tile(128, 2)),  // interleaved: boxes of 64 groups of one row
        stored({130, 96, 256, 32, fp4, bf16, 0, 4, contiguous, true}, sm100_tile(128, 2, 2)),
    };
    for (const SwigluCase& c : cases) run_swiglu_case(c, rng);
  }
}

TEST_SUITE("gpu_gemm_swiglu_sm120") {
  TEST_CASE("sm_120a gemm with the SwiGLU epilogue: dense, ragged M and I, row and weight tiles, split K") {
    const test::OnSm120Backend on;
    if (!on.ready()) return;
    std::mt19937 rng(std::random_device{}());
    const SwigluCase cases[] = {
        stored({1, 2048, 4096}),
        stored({16, 768, 2048, 0, fp4, bf16, 1}),
        stored({104, 1440, 2880, 0, fp4, bf16, 2}),
        with_alpha(stored({300, 200, 1024, 0, fp4, fp16, 2, 0, contiguous, false, 8}), 1.0f / 64),  // FP16 D within range
        stored({37, 256, 512, 0, fp4, fp32}),
        stored({20, 200, 576, 0, fp4, bf16, 1}, sm120_tile(16, 64, 2)),
        stored({130, 520, 1024, 0, fp4, fp32, 0, 0, contiguous, false, 3}, sm120_tile(128, 128, 3)),
        stored({70, 296, 1024}, sm120_tile(32, 256, 2)),
        stored({40, 600, 2048, 0, fp4, bf16, 2}, sm120_tile(64, 128, 2, 2)),  // split K: partial sums added first
        stored({3, 1000, 4096, 0, fp4, bf16}, sm120_tile(16, 64, 4, 4)),
        // interleaved checkpoints: groups of g gate rows, then g up rows (g = 1 alternates them)
        stored({16, 768, 2048, 1, fp4, bf16, 1}),
        stored({70, 296, 1024, 8, fp4, bf16, 2}, sm120_tile(32, 256, 2)),
        stored({40, 512, 2048, 64, fp4, fp32}, sm120_tile(64, 128, 2, 2)),
    };
    for (const SwigluCase& c : cases) run_swiglu_case(c, rng);
  }

  TEST_CASE("sm_120a grouped_gemm with the SwiGLU epilogue: contiguous with empty experts, a row_index gather, masked") {
    const test::OnSm120Backend on;
    if (!on.ready()) return;
    std::mt19937 rng(std::random_device{}());
    const SwigluCase cases[] = {
        stored({300, 256, 1024, 0, fp4, bf16, 0, 8}),
        stored({16, 768, 2048, 0, fp4, bf16, 1, 16, contiguous, true}),
        stored({200, 256, 1024, 0, fp4, bf16, 2, 8, contiguous, true}),
        stored({40, 384, 1024, 0, fp4, bf16, 0, 4, masked}),
        stored({130, 136, 512, 0, fp4, fp32, 1, 4, contiguous, true}, sm120_tile(32, 256, 2)),
        stored({200, 256, 1024, 2, fp4, bf16, 2, 8, contiguous, true}),
        stored({40, 384, 1024, 128, fp4, bf16, 0, 4, masked}),
    };
    for (const SwigluCase& c : cases) run_swiglu_case(c, rng);
  }

  TEST_CASE("sm_120a SwiGLU epilogue small shapes for the sanitizers") {
    const test::OnSm120Backend on;
    if (!on.ready()) return;
    std::mt19937 rng(std::random_device{}());
    const SwigluCase cases[] = {
        stored({3, 40, 320}, sm120_tile(16, 64, 2)),
        stored({9, 72, 256, 0, fp4, bf16, 1}, sm120_tile(32, 128, 2)),
        stored({20, 104, 1024, 0, fp4, bf16, 2}, sm120_tile(16, 64, 2, 2)),
        stored({50, 72, 256, 0, fp4, fp32, 0, 4, contiguous, true}, sm120_tile(64, 128, 2)),
        stored({9, 64, 320, 0, fp4, bf16, 0, 3, masked}, sm120_tile(16, 64, 2)),
        stored({9, 64, 256, 1, fp4, bf16}, sm120_tile(16, 64, 2)),
        stored({50, 96, 256, 32, fp4, bf16, 0, 4, contiguous, true}, sm120_tile(64, 128, 2)),
    };
    for (const SwigluCase& c : cases) run_swiglu_case(c, rng);
  }
}
