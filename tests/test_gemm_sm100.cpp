// The sm_100a / sm_103a GEMM backend on the CPU: its tiles within the arch's limits, the
// front's routing (W4A4 kept, what is refused named, the emulation switch), prewarm, and the
// SASS of the prewarm kernels (the block-scaled UMMA, a CTA pair's .2CTA forms, no local memory).
#include <doctest/doctest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/kernel_store.hpp"
#include "gemm_test_util.hpp"
#include "ops/gemm/backend.hpp"
#include "ops/gemm/call.hpp"
#include "ops/gemm/m_buckets.hpp"
#include "ops/gemm/sm100/tiles.hpp"
#include "ops/gemm/spec_codes.hpp"
#include "ops/gemm/tile_choice.hpp"
#include "sass_util.hpp"
#include "common/tile_scheduler.cuh"
#include "sm100/gemm_tile.cuh"

using namespace nvfp4::jit;
using namespace nvfp4::jit::detail;

namespace {

GemmSpec fp4_problem(Arch arch, int64_t n, int64_t k) {
  return gemm_fp4_problem(gemm_problem(arch, n, k, DType::bf16, DType::bf16, ScaleLayout::linear, false, kNoDType),
                          ScaleLayout::swizzled128x4);
}

}  // namespace

TEST_SUITE("gemm_sm100") {
  TEST_CASE("tiles: the heuristic per bucket and SM count, candidates within shared and tensor memory") {
    for (int sms : {148, 132, 160})
      for (int64_t n : {8, 1000, 4096, 14336})
        for (int bucket : kGemmMBuckets) {
          CAPTURE(sms);
          CAPTURE(n);
          CAPTURE(bucket);
          const sm100::Tile h = sm100::Tiles::heuristic_tile(n, gemm_bucket_m(bucket), sms);
          CHECK(sm100::Tiles::tile_problem(h) == "");
          const std::vector<sm100::Tile> tiles = sm100::Tiles::candidate_tiles(n, bucket, sms);
          REQUIRE(!tiles.empty());
          CHECK(tiles.front() == h);
          for (const sm100::Tile& t : tiles) {
            CHECK(sm100::Tiles::tile_problem(t) == "");
            CHECK(sm100::Tiles::shared_bytes(t) <= nvfp4k::sm100::GEMM_MAX_SHARED);
            CHECK(nvfp4k::sm100::gemm_tmem_columns_used(t.block_n, t.stages) <= 512);
          }
        }
    // the most stages that fit: a pair's 256 x 256 tile 5 of 38 KB a CTA (and 5 x 48 scale
    // columns beside its 256-column accumulator); one CTA's 4 of 54 KB at 256 weight rows, 6 of
    // 36 KB at 128, 8 of 28 KB at 64
    CHECK(sm100::Tiles::heuristic_tile(14336, 4096, 148) == sm100::Tile{256, 5, 2});
    CHECK(sm100::Tiles::heuristic_tile(4096, 1, 148) == sm100::Tile{64, 8, 1});  // 64 CTAs at most: the most of them
    CHECK(sm100::Tiles::heuristic_tile(4096, 4096, 148) == sm100::Tile{256, 5, 2});  // 16 x 16 pairs fill 148 SMs
    CHECK(sm100::Tiles::heuristic_tile(4096, 2048, 148) == sm100::Tile{256, 5, 2});  // 8 x 16 pairs: 256 CTAs
    CHECK(sm100::Tiles::heuristic_tile(4096, 1024, 148) == sm100::Tile{128, 6, 1});  // 4 x 16 pairs, 8 x 16 CTAs do not, 8 x 32 do
    // a grouped call's grid is all its groups' tiles: 128 experts of 2880 rows fill 148 SMs with
    // the widest tile from one row an expert, and pairs once an expert has 256 rows
    CHECK(sm100::Tiles::heuristic_tile(2880, 8, 148, 128) == sm100::Tile{256, 4, 1});
    CHECK(sm100::Tiles::heuristic_tile(2880, 512, 148, 128) == sm100::Tile{256, 5, 2});
    CHECK(sm100::Tiles::heuristic_tile(2880, 512, 148, 1) == sm100::Tile{64, 8, 1});  // 4 x 45 CTAs of 64 rows: 180
    CHECK(sm100::Tiles::tile_problem({256, 4, 1}) == "");
    CHECK(sm100::Tiles::tile_problem({256, 6, 2}) != "");  // 256 + 6 x 48 tensor memory columns
    CHECK(sm100::Tiles::tile_problem({64, 4, 2}) != "");   // 32 weight rows a CTA
    CHECK(sm100::Tiles::tile_problem({128, 2, 3}) != "");
    // a pair's plan: clusters of 2 along x, at most a CTA per SM
    {
      const GemmBackend& b = gemm_backend(Arch::sm_100a, "test");
      const GemmSpec spec = gemm_spec(fp4_problem(Arch::sm_100a, 4096, 4096), sm100::Tiles::to_config({256, 5, 2}));
      CHECK(b.tile_problem(spec) == "");
      CHECK(b.kernel_name(spec).find("_bm256_bn256_s5") != std::string::npos);
      for (int64_t m : {1, 300, 4096, 65536}) {
        CAPTURE(m);
        const GemmPlan plan = b.plan(spec, m, 148);
        CHECK(plan.shape.cluster[0] == 2);
        CHECK(plan.shape.grid[0] % 2 == 0);
        CHECK(plan.shape.grid[0] <= 148);
        CHECK(plan.shape.grid[0] == std::min<unsigned>(148, 2 * unsigned((m + 255) / 256 * 16)));
      }
      CHECK(b.plan(gemm_spec(fp4_problem(Arch::sm_100a, 4096, 4096), sm100::Tiles::to_config({256, 4, 1})), 4096, 148).shape.cluster[0] ==
            0);
    }
    // a tuned tile runs as it won, whatever M (one row height: nothing to trim)
    const GemmBackend& backend = gemm_backend(Arch::sm_100a, "test");
    const GemmTile won = sm100::Tiles::to_config({128, 3});
    for (int64_t m : {1, 5, 40, 129, 700}) CHECK(backend.for_rows(won, m) == won);
    CHECK(gemm_tuned_tiles(backend, won, 64) == std::vector<GemmTile>{won});
    CHECK(sm100::Tiles::tile_problem({256, 5}) != "");  // 5 x 54 KB
    CHECK(sm100::Tiles::tile_problem({96, 4}) != "");
    CHECK(sm100::Tiles::tile_problem({128, 1}) != "");
    for (int sms : {148, 132}) {
      std::string line;
      for (int bucket : kGemmMBuckets)
        line += fmt::format(" {}:{}", gemm_bucket_m(bucket), sm100::Tiles::describe(sm100::Tiles::heuristic_tile(4096, gemm_bucket_m(bucket), sms)));
      MESSAGE(sms << " SMs, N = 4096, M: tile" << line);
    }
  }

  TEST_CASE("the front: W4A4 problems keep NVFP4 activations; W4A16, batched, prepacked and K % 64 refused by name") {
    for (Arch arch : {Arch::sm_100a, Arch::sm_103a}) {
      const GemmBackend& backend = gemm_backend(arch, "test");
      CHECK(backend.name() == "sm100");
      CHECK(backend.native_fp4_activations());
      const GemmSpec problem = fp4_problem(arch, 1000, 4096);
      CHECK(backend.unsupported(problem) == "");
      const std::string w4a16 =
          backend.unsupported(gemm_problem(arch, 1000, 4096, DType::bf16, DType::bf16, ScaleLayout::linear, false, kNoDType));
      CHECK(w4a16.find("sm_100a") != std::string::npos);
      CHECK(w4a16.find("W4A16") != std::string::npos);
      CHECK(backend.unsupported(fp4_problem(arch, 1000, 4064)).find("64") != std::string::npos);
      GemmSpec grouped = problem;
      grouped.groups = 8;
      grouped.flags |= kFlagGroupedContiguous;
      CHECK(backend.unsupported(grouped) == "");
      CHECK(backend.kernel_name(gemm_spec(grouped, backend.heuristic(grouped, 4, 148))).find("grouped8_") != std::string::npos);
      grouped.flags = uint8_t((grouped.flags & ~kFlagGroupedContiguous) | kFlagGroupedBatched);
      CHECK(backend.unsupported(grouped).find("batched") != std::string::npos);
      CHECK(backend.unsupported(gemm_problem(arch, 1000, 4096, DType::bf16, DType::bf16, ScaleLayout::linear, true, kNoDType)) !=
            "");
    }
  }

  TEST_CASE("the emulation switch routes sm_90a through this backend, with kernels of their own") {
    CHECK(find_gemm_backend(Arch::sm_90a)->name() == "sm90");
    ::setenv("NVFP4_JIT_EMULATE_ARCH", "sm_100a", 1);
    const GemmBackend* emulated = find_gemm_backend(Arch::sm_90a);
    ::unsetenv("NVFP4_JIT_EMULATE_ARCH");
    REQUIRE(emulated);
    CHECK(emulated->name() == "sm100");
    const GemmSpec p100 = fp4_problem(Arch::sm_100a, 4096, 4096);
    GemmSpec p90 = p100;
    p90.arch = Arch::sm_90a;
    const GemmTile tile = emulated->heuristic(p100, 64, 148);
    const GeneratedKernel real = emulated->generate(gemm_spec(p100, tile)), emu = emulated->generate(gemm_spec(p90, tile));
    CHECK(real.name != emu.name);
    CHECK(emu.name.find("sm100emu") != std::string::npos);
    CHECK(real.source.find(", false>>(p)") != std::string::npos);
    CHECK(emu.source.find(", true>>(p)") != std::string::npos);
    // and NVRTC builds the emulation for sm_90a, every weight tile width, one CTA or a pair
    ::setenv("NVFP4_JIT_EMULATE_ARCH", "sm_100a", 1);
    for (const sm100::Tile& t : {sm100::Tile{64, 2, 1}, {128, 2, 1}, {256, 2, 1}, {128, 2, 2}, {256, 2, 2}}) {
      const GemmSpec spec = gemm_spec(p90, sm100::Tiles::to_config(t));
      CAPTURE(sm100::Tiles::describe(t));
      CHECK(!KernelStore::instance().get(gemm_key(spec))->cubin.empty());
    }
    ::unsetenv("NVFP4_JIT_EMULATE_ARCH");
  }

  TEST_CASE("prewarm for sm_100a and sm_103a: the W4A4 GEMM kernels, a few per weight shape") {
    for (Arch arch : {Arch::sm_100a, Arch::sm_103a}) {
      const std::vector<GemmSpec> gemm = test::gemm_prewarm(arch, 4096, 14336);
      CHECK(!gemm.empty());
      CHECK(gemm.size() <= 8);
      for (const GemmSpec& s : gemm) {
        CHECK(s.a_dtype == uint8_t(DType::nvfp4));
        CHECK(gemm_backend(arch, "test").tile_problem(s) == "");
      }
      MESSAGE(to_string(arch) << ": " << gemm.size() << " GEMM kernels for a 4096 x 14336 weight");
      const std::vector<GemmSpec> grouped = test::gemm_prewarm(arch, 2880, 2880, 128);
      CHECK(!grouped.empty());
      for (const GemmSpec& s : grouped) {
        CHECK(s.groups == 128);
        CHECK(gemm_problem_grouped(s) == nvfp4k::GROUPED_CONTIGUOUS);
        CHECK(gemm_backend(arch, "test").tile_problem(s) == "");
      }
      MESSAGE(to_string(arch) << ": " << grouped.size() << " grouped GEMM kernels for 128 experts of 2880 x 2880");
    }
  }

  TEST_CASE("SASS of the prewarm GEMM kernels for sm_100a and sm_103a: the block-scaled UMMA, no local memory, within limits") {
    std::vector<GemmSpec> specs;
    for (Arch arch : {Arch::sm_100a, Arch::sm_103a}) {
      for (const GemmSpec& s : test::gemm_prewarm(arch, 4096, 4096)) specs.push_back(s);
      for (const GemmSpec& s : test::gemm_prewarm(arch, 2880, 2880, 128)) specs.push_back(s);  // grouped, 128 experts
    }
    // a CTA pair's: the .cta_group::2 forms (the copies, the MMAs, the odd CTA's TMA loads onto
    // the even CTA's barrier)
    std::vector<GemmSpec> singles, pairs;
    for (const GemmSpec& s : specs) (s.tile.block_m == 2 * nvfp4k::sm100::GEMM_BM ? pairs : singles).push_back(s);
    CHECK(pairs.size() >= 4);  // the 4096 x 4096 weight's and the 128 experts' largest buckets, on each arch
    test::check_gemm_sass(singles, {"UTCCP", "UTCOMMA"}, nvfp4k::sm100::GEMM_MAX_SHARED);
    test::check_gemm_sass(pairs, {"UTCCP.T.S.2CTA", "UTCOMMA.2CTA", "UTMALDG.2D.2CTA"}, nvfp4k::sm100::GEMM_MAX_SHARED);
  }

  TEST_CASE("the fused SwiGLU epilogue: prewarm's kernels, their SASS, and the emulation's build") {
    // `--epilogue swiglu` on a gate_up weight as stored: kernels of their own, dense (Llama-3.1-8B's
    // 2 x 14336 x 4096) and grouped (Qwen3-30B-A3B's 128 experts of 2 x 768 x 2048)
    std::vector<GemmSpec> singles, pairs;
    for (Arch arch : {Arch::sm_100a, Arch::sm_103a}) {
      const std::vector<GemmSpec> dense = test::gemm_prewarm_swiglu(arch, 2 * 14336, 4096);
      const std::vector<GemmSpec> grouped = test::gemm_prewarm_swiglu(arch, 2 * 768, 2048, 128);
      CHECK_FALSE(dense.empty());
      CHECK_FALSE(grouped.empty());
      for (const std::vector<GemmSpec>* specs : {&dense, &grouped})
        for (const GemmSpec& s : *specs) {
          const std::string name = gemm_backend(arch, "test").kernel_name(s);
          CAPTURE(name);
          CHECK(gemm_epilogue_code(s) == nvfp4k::EPILOGUE_SWIGLU);
          CHECK(name.substr(name.size() - 7) == "_swiglu");
          CHECK_FALSE(gemm_problem_prepacked(s));
          (s.tile.block_m == 2 * nvfp4k::sm100::GEMM_BM ? pairs : singles).push_back(s);
        }
    }
    CHECK_FALSE(pairs.empty());
    test::check_gemm_sass(singles, {"UTCCP", "UTCOMMA"}, nvfp4k::sm100::GEMM_MAX_SHARED);
    test::check_gemm_sass(pairs, {"UTCCP.T.S.2CTA", "UTCOMMA.2CTA", "UTMALDG.2D.2CTA"}, nvfp4k::sm100::GEMM_MAX_SHARED);
    // NVRTC builds the emulation for sm_90a, every weight tile width, one CTA or a pair, dense and grouped
    ::setenv("NVFP4_JIT_EMULATE_ARCH", "sm_100a", 1);
    GemmSpec p90 = with_epilogue(fp4_problem(Arch::sm_90a, 2 * 768, 2048), GemmEpilogue::swiglu);
    for (int groups : {0, 8}) {
      if (groups) p90.groups = groups, p90.flags |= kFlagGroupedMasked;
      for (const sm100::Tile& t : {sm100::Tile{64, 2, 1}, {128, 2, 1}, {256, 2, 1}, {128, 2, 2}, {256, 2, 2}}) {
        const GemmSpec spec = gemm_spec(p90, sm100::Tiles::to_config(t));
        CAPTURE(sm100::Tiles::describe(t));
        CAPTURE(groups);
        CHECK(!KernelStore::instance().get(gemm_key(spec))->cubin.empty());
      }
    }
    ::unsetenv("NVFP4_JIT_EMULATE_ARCH");
  }

  TEST_CASE("the SwiGLU epilogue's NVFP4 D: prewarm's kernels, their SASS, and the emulation's build") {
    // `--epilogue swiglu --d-dtype nvfp4`: dense (Llama-3.1-8B's gate_up) and grouped (Qwen3-30B-A3B's)
    std::vector<GemmSpec> singles, pairs;
    for (const GemmSpec& s : test::gemm_prewarm_swiglu(Arch::sm_100a, 2 * 14336, 4096, 1, DType::nvfp4))
      (s.tile.block_m == 2 * nvfp4k::sm100::GEMM_BM ? pairs : singles).push_back(s);
    for (const GemmSpec& s : test::gemm_prewarm_swiglu(Arch::sm_100a, 2 * 768, 2048, 128, DType::nvfp4))
      (s.tile.block_m == 2 * nvfp4k::sm100::GEMM_BM ? pairs : singles).push_back(s);
    REQUIRE_FALSE(singles.empty());
    for (const std::vector<GemmSpec>* specs : {&singles, &pairs})
      for (const GemmSpec& s : *specs) {
        CHECK(s.out_dtype == uint8_t(DType::nvfp4));
        CHECK(gemm_backend(Arch::sm_100a, "test").kernel_name(s).find("_nvfp4_") != std::string::npos);
      }
    test::check_gemm_sass(singles, {"UTCOMMA"}, nvfp4k::sm100::GEMM_MAX_SHARED);
    test::check_gemm_sass(pairs, {"UTCOMMA.2CTA"}, nvfp4k::sm100::GEMM_MAX_SHARED);
    ::setenv("NVFP4_JIT_EMULATE_ARCH", "sm_100a", 1);
    GemmSpec p90 = with_epilogue(fp4_problem(Arch::sm_90a, 2 * 768, 2048), GemmEpilogue::swiglu);
    p90.out_dtype = uint8_t(DType::nvfp4);
    for (const sm100::Tile& t : {sm100::Tile{64, 2, 1}, {256, 2, 2}}) {
      const GemmSpec spec = gemm_spec(p90, sm100::Tiles::to_config(t));
      CAPTURE(sm100::Tiles::describe(t));
      CHECK(!KernelStore::instance().get(gemm_key(spec))->cubin.empty());
    }
    ::unsetenv("NVFP4_JIT_EMULATE_ARCH");
  }

  TEST_CASE("the MoE combine epilogue: prewarm's kernels, their SASS, and the emulation's build") {
    // `--epilogue moe-combine` on DeepSeek-V3's down experts (257 with the shared one)
    std::vector<GemmSpec> singles, pairs;
    for (const GemmSpec& s : test::gemm_prewarm_epilogue(Arch::sm_100a, 7168, 2048, 257, GemmEpilogue::moe_combine))
      (s.tile.block_m == 2 * nvfp4k::sm100::GEMM_BM ? pairs : singles).push_back(s);
    REQUIRE_FALSE(singles.empty());
    for (const std::vector<GemmSpec>* specs : {&singles, &pairs})
      for (const GemmSpec& s : *specs) CHECK(gemm_epilogue_code(s) == nvfp4k::EPILOGUE_MOE_COMBINE);
    test::check_gemm_sass(singles, {"UTCOMMA", "ATOMG"}, nvfp4k::sm100::GEMM_MAX_SHARED);
    test::check_gemm_sass(pairs, {"UTCOMMA.2CTA", "ATOMG"}, nvfp4k::sm100::GEMM_MAX_SHARED);
    ::setenv("NVFP4_JIT_EMULATE_ARCH", "sm_100a", 1);
    GemmSpec p90 = with_epilogue(fp4_problem(Arch::sm_90a, 7168, 2048), GemmEpilogue::moe_combine);
    p90.groups = 8, p90.flags |= kFlagGroupedContiguous;
    for (const sm100::Tile& t : {sm100::Tile{128, 2, 1}, {256, 2, 2}}) {
      const GemmSpec spec = gemm_spec(p90, sm100::Tiles::to_config(t));
      CAPTURE(sm100::Tiles::describe(t));
      CHECK(!KernelStore::instance().get(gemm_key(spec))->cubin.empty());
    }
    ::unsetenv("NVFP4_JIT_EMULATE_ARCH");
  }
}
