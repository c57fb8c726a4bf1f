// The sm_100a / sm_103a GEMM backend on the GPU. On an sm_100 / sm_103 device it runs natively;
// on an H100 (sm_90a) it runs through the emulation switch (NVFP4_JIT_EMULATE_ARCH=sm_100a, set
// here for the suite's cases only): the whole front, the backend's tiles, its codegen, NVRTC for
// sm_90a with the tcgen05 instructions emulated exactly (tensor memory, tcgen05.cp, the
// block-scaled MMA reading the kernel's descriptors, commit, ld), real TMA and mbarriers, the
// cache and the launch. The correctness matrix is the other backends' (gemm_case.hpp): float64
// reference, poisoned outputs, ragged M / N, K in whole and part k-tiles, both scale layouts on
// each operand, global-scale kinds, bias, alpha, strides, subnormal and NaN block scales, every
// weight tile width, one CTA or a CTA pair (.cta_group::2); plus graph capture and the refusals.
#include <initializer_list>
#include <string>

#include "core/error.hpp"
#include "ops/gemm/dispatch.hpp"
#include "gemm_case.hpp"
#include "on_blackwell_backend.hpp"
#include "ops/gemm/sm100/tiles.hpp"

namespace {

using test::OnSm100Backend;
constexpr DType fp4 = DType::nvfp4, bf16 = DType::bf16, fp16 = DType::fp16, fp32 = DType::fp32;
constexpr ScaleLayout lin = ScaleLayout::linear, sw = ScaleLayout::swizzled128x4;

// ctas 2: a CTA pair's 256-row tile
Case with_tile(Case c, int block_n, int stages, int ctas = 1) {
  c.backend_tile = sm100::Tiles::to_config({block_n, stages, ctas});
  return c;
}

// A GEMM call that must be refused with `status`, its message containing `words`.
void expect_refused(const GemmArgs& g, Status status, std::initializer_list<const char*> words) {
  try {
    gemm(g, nullptr);
    FAIL("the sm_100a backend ran a gemm it must refuse");
  } catch (const Error& e) {
    CHECK(e.status() == status);
    const std::string what = e.what();
    CAPTURE(what);
    for (const char* word : words) CHECK(what.find(word) != std::string::npos);
  }
}

}  // namespace

TEST_SUITE("gpu_gemm_sm100") {
  TEST_CASE("sm_100a gemm on weights freed and allocated again at one address: each call reads its own weight") {
    const OnSm100Backend on;
    if (!on.ready()) return;
    std::mt19937 rng(std::random_device{}());
    run_at_one_address({{16, 1024, 4096, fp4, fp32, lin},
                        {16, 4096, 4096, fp4, fp32, lin},  // more rows at the same address
                        {16, 4096, 2048, fp4, fp32, lin},  // shorter rows: another row stride
                        {16, 1024, 4096, fp4, fp32, lin},  // the first shape, new contents: its descriptor reused
                        {16, 1024, 4096, fp4, fp32, sw}},
                       rng);
  }

  TEST_CASE("sm_100a gemm W4A4 against a float64 reference") {
    const OnSm100Backend on;
    if (!on.ready()) return;
    std::mt19937 rng(std::random_device{}());
    // fields: m, n, k, a, d, b layout (A's is the other), device gw, bias, a_pad, d_pad, alpha,
    // scales, A's global scale (0 host, 1 device, 2 per row), workspace
    const Case cases[] = {
        // one row tile and many, ragged M and N, K of whole and part k-tiles (2880 = 11 x 256 + 64)
        {1, 4096, 4096, fp4, fp32, lin},
        {7, 2880, 2880, fp4, fp32, sw, true, 0, 0, 0, 1.0f, Case::any, 1},
        {16, 1000, 4096, fp4, bf16, lin, false, 1, 0, 0, 0.5f, Case::any, 2},
        {129, 2880, 8192, fp4, fp32, sw, false, 2, 0, 8, 1.0f, Case::any, 2},
        {1000, 2880, 2880, fp4, fp32, lin, true, 0, 0, 0, 1.0f, Case::any, 1},  // CTAs walk several tiles
        {1024, 4096, 4096, fp4, bf16, sw},
        // tiny and part k-tiles: K = 64 (one MMA), 192 (three), 320 (a k-tile and one MMA)
        {64, 200, 64, fp4, fp32, sw},
        {300, 200, 192, fp4, fp32, lin, false, 0, 0, 0, 1.0f, Case::subnormal, 2},
        {300, 200, 320, fp4, fp16, sw, true, 1, 0, 3, -2.0f},
        // FP16 output, padded D rows, subnormal-only and NaN block scales (a NaN row of D)
        {200, 1000, 2880, fp4, fp16, sw, true, 2, 0, 3, 0.5f},
        {16, 2880, 2880, fp4, fp32, lin, false, 0, 0, 0, 1.0f, Case::subnormal},
        {1, 4096, 4096, fp4, bf16, lin, false, 0, 0, 0, 1.0f, Case::nan_row},
        {300, 200, 4096, fp4, fp32, sw, false, 0, 0, 0, 1.0f, Case::nan_row, 2},
        // every weight tile width, the fewest and the most stages (the ring wraps many times)
        with_tile({260, 1000, 2880, fp4, fp32, lin, false, 2, 0, 0, 1.0f, Case::any, 2}, 64, 2),
        with_tile({260, 1000, 2880, fp4, fp32, sw, true, 1}, 64, 8),
        with_tile({130, 520, 4096, fp4, fp32, lin, false, 0, 0, 0, 1.0f, Case::any, 1}, 128, 2),
        with_tile({130, 520, 4096, fp4, bf16, sw}, 128, 6),
        with_tile({300, 600, 2880, fp4, fp32, lin, true, 2, 0, 0, 1.0f, Case::any, 2}, 256, 2),
        with_tile({300, 600, 2880, fp4, fp32, sw}, 256, 4),
        // CTA pairs (.cta_group::2, M 256): ragged M (a tile's odd CTA with 24 rows) and N, both
        // widths, the fewest and the most stages, pairs walking several tiles, NaN block scales
        with_tile({300, 600, 2880, fp4, fp32, lin, true, 2, 0, 0, 1.0f, Case::any, 2}, 256, 2, 2),
        with_tile({300, 200, 4096, fp4, fp32, sw, false, 0, 0, 0, 1.0f, Case::nan_row, 2}, 256, 5, 2),
        with_tile({520, 520, 1024, fp4, bf16, sw, false, 1, 0, 8, 0.5f}, 128, 8, 2),
        with_tile({2100, 1024, 256, fp4, fp32, lin, true, 0, 0, 0, 1.0f, Case::subnormal, 1}, 128, 2, 2),
    };
    for (const Case& c : cases) run_case(c, rng);
  }

  // Small enough for compute-sanitizer (memcheck and racecheck): every weight tile width, a
  // CTA walking several tiles, ragged M, N and a part k-tile.
  TEST_CASE("sm_100a gemm small shapes for the sanitizers") {
    const OnSm100Backend on;
    if (!on.ready()) return;
    std::mt19937 rng(std::random_device{}());
    const Case cases[] = {
        {3, 72, 320, fp4, fp32, lin},
        with_tile({130, 200, 576, fp4, bf16, sw, true, 2, 0, 0, 1.0f, Case::any, 2}, 64, 2),
        with_tile({9, 200, 256, fp4, fp32, lin}, 128, 3),
        with_tile({9, 300, 192, fp4, fp32, sw}, 256, 2),
        with_tile({130, 200, 576, fp4, bf16, sw, true, 2, 0, 0, 1.0f, Case::any, 2}, 128, 2, 2),  // the ring wraps
        with_tile({300, 72, 256, fp4, fp32, lin}, 256, 2, 2),
    };
    for (const Case& c : cases) run_case(c, rng);
  }

  TEST_CASE("sm_100a gemm is captured in a graph and replays with a new device global scale") {
    const OnSm100Backend on;
    if (!on.ready()) return;
    check_w4a4_graph_replays(2);
  }

  TEST_CASE("tune a W4A4 problem on this backend: the winner is recorded and the next gemm runs it, correctly") {
    const OnSm100Backend on;
    if (!on.ready()) return;
    check_w4a4_tune_then_gemm();
  }

  TEST_CASE("sm_100a gemm refuses BF16 activations, K not a multiple of 64 and A rows TMA cannot read, by name") {
    const OnSm100Backend on;
    if (!on.ready()) return;
    alignas(16) static unsigned char dummy[1 << 16];
    GemmArgs g;
    g.m = 4, g.n = 64, g.k = 64, g.a_dtype = bf16;
    g.a = g.b.data = g.b.scales = g.d = dummy;
    expect_refused(g, Status::unsupported, {"sm_100a", "bf16"});
    g.a = nullptr;
    g.a_dtype = fp4;
    g.a_fp4.data = g.a_fp4.scales = dummy;
    g.k = 96;
    expect_refused(g, Status::unsupported, {"k = 96", "64"});
    g.k = 128;
    g.a_fp4.row_stride_bytes = 68;  // a multiple of 4 (the front's rule), not of 16 (TMA's)
    expect_refused(g, Status::invalid_argument, {"a_fp4", "16-byte"});
  }
}
