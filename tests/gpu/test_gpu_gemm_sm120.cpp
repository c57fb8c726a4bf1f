// The sm_120a / sm_121a GEMM backend on the GPU. On an sm_120 / sm_121 device it runs natively;
// on an H100 (sm_90a) it runs through the emulation switch (NVFP4_JIT_EMULATE_ARCH=sm_120a,
// set here for the suite's cases only): the whole front, the backend's tiles, its codegen,
// NVRTC for sm_90a with the MMA emulated exactly, the cache and the launch. The correctness
// matrix is the sm_90a GEMM's W4A4 one (gemm_case.hpp): float64 reference, poisoned outputs,
// ragged M / N / K, both scale layouts on each operand, global-scale kinds, bias, alpha,
// strides, subnormal and NaN block scales; plus graph capture and the W4A16 refusal.
#include <string>

#include "gemm_case.hpp"
#include "on_blackwell_backend.hpp"
#include "core/error.hpp"
#include "ops/gemm/dispatch.hpp"
#include "ops/gemm/sm120/tiles.hpp"

namespace {

using test::OnSm120Backend;
constexpr DType fp4 = DType::nvfp4, bf16 = DType::bf16, fp16 = DType::fp16, fp32 = DType::fp32;
constexpr ScaleLayout lin = ScaleLayout::linear, sw = ScaleLayout::swizzled128x4;

}  // namespace

TEST_SUITE("gpu_gemm_sm120") {
  TEST_CASE("sm_120a gemm W4A4 against a float64 reference") {
    const OnSm120Backend on;
    if (!on.ready()) return;
    std::mt19937 rng(std::random_device{}());
    auto unaligned = [](Case c) {
      c.a_fp4_pad = 4;
      return c;
    };
    // fields: m, n, k, a, d, b layout (A's is the other), device gw, bias, a_pad, d_pad, alpha,
    // scales, A's global scale (0 host, 1 device, 2 per row), workspace
    const Case cases[] = {
        // every row tile (16, 32, 64, 128), ragged M, both layouts, K of whole and part k-tiles
        {1, 4096, 4096, fp4, fp32, lin},
        {7, 2880, 2880, fp4, fp32, sw, true, 0, 0, 0, 1.0f, Case::any, 1},
        {16, 1000, 4096, fp4, bf16, lin, false, 1, 0, 0, 0.5f, Case::any, 2},
        {33, 2880, 2880, fp4, fp32, sw},
        {64, 4096, 2880, fp4, bf16, lin, false, 1, 0, 0, 0.5f, Case::any, 2},
        {100, 2880, 2880, fp4, fp32, sw, false, 2, 0, 8, 1.0f, Case::any, 2},
        {129, 2880, 8192, fp4, fp32, sw, false, 2, 0, 8, 1.0f, Case::any, 2},
        {1000, 2880, 2880, fp4, fp32, lin, true, 0, 0, 0, 1.0f, Case::any, 1},
        {4096, 2880, 2880, fp4, bf16, sw},
        // ragged N, tiny K, K = 32, 96 (half a k64 step), 160, 224 mod 128: the masked half step
        {300, 8, 96, fp4, fp32, lin, false, 0, 0, 0, 1.0f, Case::subnormal, 2},
        {1, 8, 32, fp4, fp32, sw},
        {64, 200, 32, fp4, fp32, lin},
        {300, 200, 160, fp4, fp16, sw, true, 1, 0, 3, -2.0f},
        {129, 1000, 224, fp4, fp32, lin, false, 2, 0, 5, 1.0f, Case::any, 1},
        // FP16 output, padded D rows, subnormal-only and NaN block scales (a NaN row of D)
        {200, 1000, 2880, fp4, fp16, sw, true, 2, 0, 3, 0.5f},
        {16, 2880, 2880, fp4, fp32, lin, false, 0, 0, 0, 1.0f, Case::subnormal},
        {1, 4096, 4096, fp4, bf16, lin, false, 0, 0, 0, 1.0f, Case::nan_row},
        {300, 200, 4096, fp4, fp32, sw, false, 0, 0, 0, 1.0f, Case::nan_row, 2},
        // split-K (the heuristic splits grids of half the SMs or fewer; several cases above run
        // split in 2 or 4 on 132 SMs too): K = 32 mod 64 in the last split, a 4-way split of bm64
        {5, 200, 4128, fp4, fp32, lin, false, 2, 0, 3, 1.0f, Case::any, 2},
        {40, 1000, 6144, fp4, bf16, sw, true, 1, 0, 0, 0.5f, Case::any, 1},
        // A's rows not 16-byte aligned (4-byte copies), linear A scales not whole words (K = 96)
        unaligned({77, 1000, 2880, fp4, fp32, sw, false, 1, 0, 0, 1.0f, Case::any, 2}),
        unaligned({5, 200, 96, fp4, bf16, sw}),
    };
    // (the split cases do run split on this device)
    CHECK(sm120::Tiles::heuristic_tile(200, 4128, 5, current_device().sm_count).split_k > 1);
    CHECK(sm120::Tiles::heuristic_tile(1000, 6144, 40, current_device().sm_count).split_k > 1);
    for (const Case& c : cases) run_case(c, rng);
  }

  // Small enough for compute-sanitizer (memcheck and racecheck): every staging path (A rows by
  // 16 and by 4 bytes, A scales as words and by byte), ragged M, N and K, and split-K's exchange
  // through distributed shared memory (3 x 64 x 2048: one tile split in 4).
  TEST_CASE("sm_120a gemm small shapes for the sanitizers") {
    const OnSm120Backend on;
    if (!on.ready()) return;
    std::mt19937 rng(std::random_device{}());
    Case unaligned{9, 72, 96, fp4, fp32, sw, false, 1};
    unaligned.a_fp4_pad = 4;
    const Case cases[] = {
        {3, 64, 2048, fp4, fp32, lin},
        {9, 72, 160, fp4, fp32, sw, false, 0, 0, 0, 1.0f, Case::any, 2},
        {130, 72, 224, fp4, bf16, lin, true, 2, 0, 0, 1.0f, Case::any, 1},
        unaligned,
    };
    for (const Case& c : cases) run_case(c, rng);
  }

  TEST_CASE("sm_120a gemm is captured in a graph and replays with a new device global scale") {
    const OnSm120Backend on;
    if (!on.ready()) return;
    check_w4a4_graph_replays(1);
  }

  TEST_CASE("tune a W4A4 problem on this backend: the winner is recorded and the next gemm runs it, correctly") {
    const OnSm120Backend on;
    if (!on.ready()) return;
    check_w4a4_tune_then_gemm();
  }

  TEST_CASE("sm_120a gemm refuses BF16 activations, naming the arch and the dtype") {
    const OnSm120Backend on;
    if (!on.ready()) return;
    alignas(16) static unsigned char dummy[64];
    GemmArgs g;
    g.m = 4, g.n = 64, g.k = 64, g.a_dtype = bf16;
    g.a = g.b.data = g.b.scales = g.d = dummy;
    try {
      gemm(g, nullptr);
      FAIL("a W4A16 gemm ran on the sm_120a backend");
    } catch (const Error& e) {
      CHECK(e.status() == Status::unsupported);
      const std::string what = e.what();
      CHECK(what.find("sm_120a") != std::string::npos);
      CHECK(what.find("bf16") != std::string::npos);
    }
  }
}
