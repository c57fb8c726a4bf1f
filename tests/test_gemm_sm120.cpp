// The sm_120a / sm_121a GEMM backend without its hardware: the MMA emulation against an
// independent statement of the instruction's register layouts, the tiles within the arch's
// limits and the heuristic per SM count, the front's routing (W4A16 refused, the emulation
// switch), and the SASS of the prewarm kernels (the block-scaled MMA, no local memory).
#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "common/nvfp4_format.cuh"
#include "core/codegen.hpp"
#include "core/kernel_store.hpp"
#include "core/prewarm.hpp"
#include "gemm_test_util.hpp"
#include "sass_util.hpp"
#include "ops/gemm/backend.hpp"
#include "ops/gemm/call.hpp"
#include "ops/gemm/m_buckets.hpp"
#include "ops/gemm/sm120/tiles.hpp"
#include "ops/gemm/spec_codes.hpp"
#include "common/tile_scheduler.cuh"
#include "sm120/gemm_tile.cuh"
#include "sm120/mma_mxf4nvf4.cuh"

using namespace nvfp4::jit;
using namespace nvfp4::jit::detail;

namespace {

// The register layouts of mma.sync.m16n8k64 .kind::mxf4nvf4 .scale_vec::4X, stated from the
// holder's side (lane, register, element) as the sources give them, independently of the
// emulation (which states them from the element's side):
// - A and B, C/D: PTX ISA 9.2, 9.7.14.5 "Matrix Fragments for mma.m16n8k64", .e2m1: A's element
//   a_i (i = 8 reg + nibble) is at row groupID (i < 8 or 16 <= i < 24) else groupID + 8, column
//   threadID_in_group * 8 + (i & 7) (+ 32 for i >= 16); B's b_i at row threadID_in_group * 8 +
//   (i & 7) (+ 32 for i >= 8), column groupID; C's c_i at row groupID (+ 8 for i >= 2), column
//   2 threadID_in_group + (i & 1).
// - The scales: CUTLASS include/cute/atom/mma_traits_sm120.hpp, SM120_16x8x64_TN_VS:
//   SFALayout ((2,2,8),64):((8,0,1),16) over (M16, K64): lane = a + 2b + 4c holds row 8a + c,
//   b (the stride-0 mode) the pair of lanes thread-id-a selects; SFBLayout ((4,8),64):((0,1),8)
//   over (N8, K64): lane = a + 4c holds column c, a selected by thread-id-b. The value mode (all
//   64 k of the row, 16 a scale) puts block j in byte j (PTX ISA 9.7.14.3, "Block Scaling for
//   mma.sync": scale_vec::4X, byte-id 0).
struct Element {
  int row, col;
};
Element isa_a(int lane, int i) {
  const int group = lane >> 2, t = lane % 4;
  return {(i < 8 || (16 <= i && i < 24)) ? group : group + 8, t * 8 + (i & 7) + (i >= 16 ? 32 : 0)};
}
Element isa_b(int lane, int i) {  // {k, n}
  const int group = lane >> 2, t = lane % 4;
  return {t * 8 + (i & 7) + (i >= 8 ? 32 : 0), group};
}
Element isa_c(int lane, int i) { return {(lane >> 2) + (i >= 2 ? 8 : 0), 2 * (lane % 4) + (i & 1)}; }
// The row of SF_A lane `lane` supplies under thread-id-a, or -1; the column of SF_B likewise.
int cutlass_sfa_row(int lane, int thread_id_a) {
  const int a = lane % 2, b = (lane / 2) % 2, c = lane / 4;
  return b == thread_id_a ? 8 * a + c : -1;
}
int cutlass_sfb_col(int lane, int thread_id_b) { return lane % 4 == thread_id_b ? lane / 4 : -1; }

struct Lanes {
  unsigned a[32][4], b[32][2], sfa[32], sfb[32];
  float c[32][4];
};

}  // namespace

TEST_SUITE("gemm_sm120") {
  TEST_CASE("the MMA emulation moves operands as the PTX ISA and CUTLASS lay them out, thread-id selectors included") {
    std::mt19937 rng(std::random_device{}());
    for (int thread_id_a = 0; thread_id_a < 2; ++thread_id_a)
      for (int thread_id_b = 0; thread_id_b < 4; ++thread_id_b)
        for (int trial = 0; trial < 4; ++trial) {
          CAPTURE(thread_id_a);
          CAPTURE(thread_id_b);
          // the logical operands: E2M1 codes, E4M3 block scales (finite, subnormals included), C
          int A[16][64], B[64][8];
          unsigned SA[16][4], SB[8][4];
          float C[16][8];
          for (auto& row : A)
            for (int& v : row) v = int(rng() % 16);
          for (auto& row : B)
            for (int& v : row) v = int(rng() % 16);
          for (auto& row : SA)
            for (unsigned& v : row) v = unsigned(rng() % 0x7F);
          for (auto& row : SB)
            for (unsigned& v : row) v = unsigned(rng() % 0x7F);
          for (auto& row : C)
            for (float& v : row) v = trial == 0 ? 0.0f : float(int(rng() % 2001) - 1000) / 64.0f;
          // each lane's registers from the statement above; scale registers of lanes the selector
          // does not pick hold NaN scales, so reading one of them shows
          Lanes L{};
          for (int lane = 0; lane < 32; ++lane) {
            for (int i = 0; i < 32; ++i) {
              const Element e = isa_a(lane, i);
              L.a[lane][i / 8] |= unsigned(A[e.row][e.col]) << (4 * (i % 8));
            }
            for (int i = 0; i < 16; ++i) {
              const Element e = isa_b(lane, i);
              L.b[lane][i / 8] |= unsigned(B[e.row][e.col]) << (4 * (i % 8));
            }
            for (int i = 0; i < 4; ++i) {
              const Element e = isa_c(lane, i);
              L.c[lane][i] = C[e.row][e.col];
            }
            const int ra = cutlass_sfa_row(lane, thread_id_a), cb = cutlass_sfb_col(lane, thread_id_b);
            L.sfa[lane] = L.sfb[lane] = 0x7F7F7F7Fu;
            if (ra >= 0) L.sfa[lane] = SA[ra][0] | SA[ra][1] << 8 | SA[ra][2] << 16 | SA[ra][3] << 24;
            if (cb >= 0) L.sfb[lane] = SB[cb][0] | SB[cb][1] << 8 | SB[cb][2] << 16 | SB[cb][3] << 24;
          }
          auto fetch = [&](int operand, int reg, int src) -> unsigned {
            REQUIRE((src >= 0 && src < 32));
            switch (operand) {
              case nvfp4k::sm120::OPERAND_A: return L.a[src][reg];
              case nvfp4k::sm120::OPERAND_B: return L.b[src][reg];
              case nvfp4k::sm120::OPERAND_SFA: return L.sfa[src];
              default: return L.sfb[src];
            }
          };
          for (int lane = 0; lane < 32; ++lane) {
            float d[4];
            nvfp4k::sm120::mxf4nvf4_m16n8k64_emulated(d, L.c[lane], lane, thread_id_a, thread_id_b, fetch);
            for (int i = 0; i < 4; ++i) {
              const Element e = isa_c(lane, i);
              double ref = C[e.row][e.col], magnitude = std::fabs(ref);
              for (int k = 0; k < 64; ++k) {
                const double p = double(nvfp4k::e2m1_to_float(unsigned(A[e.row][k]))) * nvfp4k::e4m3_to_float(SA[e.row][k / 16]) *
                                 nvfp4k::e2m1_to_float(unsigned(B[k][e.col])) * nvfp4k::e4m3_to_float(SB[e.col][k / 16]);
                ref += p;
                magnitude += std::fabs(p);
              }
              // 64 fp32 additions: each rounds by at most 2^-24 of the running sum
              if (!(std::fabs(d[i] - ref) <= 64 * 0x1p-24 * magnitude))
                FAIL_CHECK("lane " << lane << " d[" << i << "] = D[" << e.row << "][" << e.col << "]: " << d[i] << ", expected "
                                   << ref);
            }
          }
        }
  }

  TEST_CASE("a lane reads only the scale registers its selector names") {
    // every (row, selector) of SF_A and (column, selector) of SF_B maps to the one lane the
    // CUTLASS layouts give it, and every lane is the holder of exactly one row / column per selector
    for (int tid = 0; tid < 2; ++tid) {
      std::set<int> lanes;
      for (int row = 0; row < 16; ++row) {
        const int lane = nvfp4k::sm120::sfa_lane(row, tid);
        CHECK(cutlass_sfa_row(lane, tid) == row);
        lanes.insert(lane);
      }
      CHECK(lanes.size() == 16);
    }
    for (int tid = 0; tid < 4; ++tid)
      for (int col = 0; col < 8; ++col) CHECK(cutlass_sfb_col(nvfp4k::sm120::sfb_lane(col, tid), tid) == col);
  }

  TEST_CASE("tiles: every candidate within sm_120's limits; the heuristic per SM count") {
    using nvfp4k::sm120::GEMM_MAX_SHARED;
    // RTX 5090, RTX PRO 6000, GB10 (DGX Spark)
    for (int sms : {170, 188, 48})
      for (int64_t n : {8, 1024, 4096, 6144, 14336, 28672})
        for (int64_t k : {32, 4096, 14336})
          for (int bucket : kGemmMBuckets) {
            CAPTURE(sms);
            CAPTURE(n);
            CAPTURE(bucket);
            const sm120::Tile h = sm120::Tiles::heuristic_tile(n, k, gemm_bucket_m(bucket), sms);
            CHECK(sm120::Tiles::tile_problem(h) == "");
            const std::vector<sm120::Tile> tiles = sm120::Tiles::candidate_tiles(n, k, bucket, sms);
            REQUIRE(!tiles.empty());
            CHECK(tiles.front() == h);
            for (const sm120::Tile& t : tiles) {
              CHECK(sm120::Tiles::tile_problem(t, k) == "");
              CHECK(sm120::Tiles::shared_bytes(t) <= GEMM_MAX_SHARED);
              CHECK(sm120::Tiles::threads(t) <= 256);
              CHECK(t.block_m <= std::max(16, h.block_m));
            }
            // every M of the bucket runs the bucket's tile (one kernel per bucket for prewarm)
            const auto [first, last] = gemm_bucket_rows(bucket);
            CHECK(sm120::Tiles::heuristic_tile(n, k, first, sms) == h);
            CHECK(sm120::Tiles::heuristic_tile(n, k, std::min<int64_t>(last, 20000), sms) == h);
          }
    // the filter: too much shared memory or too many accumulators a thread
    CHECK(sm120::Tiles::tile_problem({128, 256, 3}) != "");  // 128 accumulators a thread
    CHECK(sm120::Tiles::tile_problem({64, 256, 4}) != "");   // 4 x 28160 bytes > 99 KB
    CHECK(sm120::Tiles::tile_problem({64, 256, 3}) == "");
    CHECK(sm120::Tiles::tile_problem({128, 128, 4}) == "");  // 90112 bytes
    CHECK(sm120::Tiles::tile_problem({8, 64, 2}) != "");
    // the SM count decides 64 or 128 weight rows a CTA: N = 14336 at decode is 112 CTAs of 128
    // rows, which fill GB10's 48 SMs but not an RTX 5090's 170
    CHECK(sm120::Tiles::heuristic_tile(14336, 4096, 1, 48).block_n == 128);
    CHECK(sm120::Tiles::heuristic_tile(14336, 4096, 1, 170).block_n == 64);
    CHECK(sm120::Tiles::heuristic_tile(14336, 4096, 1, 188).block_n == 64);
    CHECK(sm120::Tiles::heuristic_tile(4096, 4096, 4096, 188).block_n == 128);
    // split-K where the grid leaves half the SMs idle or more, each split 4 k-tiles or more: at
    // decode N = 4096 is 64 CTAs (2 splits fill 128 of 170 SMs, not 48), N = 1000 16 (4 splits)
    CHECK(sm120::Tiles::heuristic_tile(4096, 4096, 1, 170).split_k == 2);
    CHECK(sm120::Tiles::heuristic_tile(4096, 4096, 1, 48).split_k == 1);
    CHECK(sm120::Tiles::heuristic_tile(1000, 8192, 1, 188).split_k == 4);
    CHECK(sm120::Tiles::heuristic_tile(1000, 512, 1, 188).split_k == 1);  // 4 k-tiles: no split keeps 4
    CHECK(sm120::Tiles::heuristic_tile(1000, 1024, 1, 188).split_k == 2);
    CHECK(sm120::Tiles::heuristic_tile(4096, 4096, 4096, 188).split_k == 1);
    CHECK(sm120::Tiles::heuristic_tile(4096, 4096, 1, 170, 8).split_k == 1);  // grouped: unsplit
    CHECK(sm120::Tiles::heuristic_tile(4096, 4096, 1, 170, 1).split_k == 1);  // one expert too
    CHECK(sm120::Tiles::tile_problem({16, 64, 4, 2}, 256) != "");   // 2 k-tiles in 2 splits
    CHECK(sm120::Tiles::tile_problem({16, 64, 4, 2}, 512) == "");
    CHECK(sm120::Tiles::tile_problem({64, 256, 2, 2}) != "");       // a 64 KB partial tile in 55 KB of stages
    CHECK(sm120::Tiles::tile_problem({16, 64, 4, 8}) != "");
    // the table for the report: one line per SM count and bucket at N = K = 4096 and N = 14336
    for (int sms : {170, 188, 48}) {
      std::string line;
      for (int bucket : kGemmMBuckets)
        line += fmt::format(" {}:{}/{}", gemm_bucket_m(bucket), sm120::Tiles::describe(sm120::Tiles::heuristic_tile(4096, 4096, gemm_bucket_m(bucket), sms)),
                            sm120::Tiles::heuristic_tile(14336, 4096, gemm_bucket_m(bucket), sms).block_n);
      MESSAGE(sms << " SMs, M: tile at N = 4096 / block_n at N = 14336:" << line);
    }
  }

  TEST_CASE("grouped tiles: the heuristic counts every group's CTAs, per SM count; candidates within limits") {
    for (int sms : {170, 188, 48})
      for (int groups : {1, 8, 128})
        for (int64_t n : {8, 2880, 7168})
          for (int bucket : kGemmMBuckets) {
            CAPTURE(sms);
            CAPTURE(groups);
            CAPTURE(n);
            CAPTURE(bucket);
            const int64_t rows = gemm_bucket_m(bucket);
            const sm120::Tile h = sm120::Tiles::heuristic_tile(n, 4096, rows, sms, groups);
            CHECK(sm120::Tiles::tile_problem(h) == "");
            // the row tile follows the rows per group; 128 weight rows where the groups' CTAs fill the SMs
            CHECK(h.block_m == sm120::Tiles::heuristic_tile(n, 4096, rows, sms).block_m);
            const int64_t ctas_128 = groups * ((rows + h.block_m - 1) / h.block_m) * ((n + 127) / 128);
            CHECK(h.block_n == (ctas_128 >= sms ? 128 : 64));
            const std::vector<sm120::Tile> tiles = sm120::Tiles::candidate_tiles(n, 4096, bucket, sms, groups);
            REQUIRE(!tiles.empty());
            CHECK(tiles.front() == h);
            for (const sm120::Tile& t : tiles) {
              CHECK(sm120::Tiles::tile_problem(t) == "");
              CHECK(t.split_k == 1);  // the groups' tiles fill the grid
            }
          }
    // the backend reads the groups from the problem: at decode, 128 experts of N = 2880 fill an RTX
    // 5090 with 128-row weight tiles where one expert would not
    const GemmBackend& backend = gemm_backend(Arch::sm_120a, "test");
    GemmSpec problem = gemm_fp4_problem(gemm_problem(Arch::sm_120a, 2880, 4096, DType::bf16, DType::bf16,
                                                       ScaleLayout::linear, false, kNoDType),
                                          ScaleLayout::swizzled128x4);
    CHECK(sm120::Tiles::from_config(backend.heuristic(problem, 4, 170)).block_n == 64);
    CHECK(sm120::Tiles::from_config(backend.heuristic(problem, 4, 170)).split_k == 2);  // dense: 45 CTAs split in 2
    problem.groups = 128;
    problem.flags |= kFlagGroupedContiguous;
    CHECK(backend.unsupported(problem) == "");
    CHECK(sm120::Tiles::from_config(backend.heuristic(problem, 4, 170)).block_n == 128);
    const std::string name = backend.kernel_name(gemm_spec(problem, backend.heuristic(problem, 4, 170)));
    CHECK(name.find("grouped128_") != std::string::npos);
    GemmTile split = backend.heuristic(problem, 4, 170);
    split.split_k = 2;
    CHECK(backend.tile_problem(gemm_spec(problem, split)) == "a grouped GEMM runs unsplit");
    // one expert, masked, is grouped too: unsplit where the dense grid would split
    GemmSpec one = problem;
    one.groups = 1;
    one.flags = (one.flags & ~kFlagGroupedContiguous) | kFlagGroupedMasked;
    CHECK(sm120::Tiles::from_config(backend.heuristic(one, 700, 132)).split_k == 1);
    for (const GemmTile& c : backend.candidates(one, gemm_m_bucket(700), 132)) CHECK(backend.tile_problem(gemm_spec(one, c)) == "");
    for (int sms : {170, 188, 48}) {
      std::string line;
      for (int bucket : kGemmMBuckets)
        line += fmt::format(" {}:{}", gemm_bucket_m(bucket), sm120::Tiles::describe(sm120::Tiles::heuristic_tile(2880, 4096, gemm_bucket_m(bucket), sms, 128)));
      MESSAGE(sms << " SMs, 128 groups of N = 2880, rows per group: tile" << line);
    }
  }

  TEST_CASE("the front: W4A4 problems keep NVFP4 activations, W4A16 is refused naming the arch and dtype") {
    for (Arch arch : {Arch::sm_120a, Arch::sm_121a}) {
      const GemmBackend& backend = gemm_backend(arch, "test");
      CHECK(backend.name() == "sm120");
      CHECK(backend.native_fp4_activations());
      GemmArgs g;
      g.m = 0, g.n = 100, g.k = 96, g.a_dtype = DType::nvfp4;  // no rows: no pointers to check
      g.a_fp4.scale_layout = ScaleLayout::swizzled128x4;
      const GemmSpec problem = gemm_problem(arch, gemm_call(g, "test"));
      CHECK(problem.a_dtype == uint8_t(DType::nvfp4));
      CHECK((problem.flags & kFlagAScalesSwizzled) != 0);
      CHECK(backend.unsupported(problem) == "");
      g.a_dtype = DType::bf16;
      const std::string why = backend.unsupported(gemm_problem(arch, gemm_call(g, "test")));
      CHECK(why.find("sm_120a") != std::string::npos);
      CHECK(why.find("bf16") != std::string::npos);
      CHECK(why.find("W4A16") != std::string::npos);
      CHECK(backend.unsupported(gemm_problem(arch, 100, 96, DType::bf16, DType::bf16, ScaleLayout::linear, true, kNoDType)) !=
            "");
      GemmSpec batched = problem;
      batched.groups = 8;
      batched.flags |= kFlagGroupedBatched;
      CHECK(backend.unsupported(batched).find("batched") != std::string::npos);
      batched.flags = uint8_t((batched.flags & ~kFlagGroupedBatched) | kFlagGroupedContiguous);
      CHECK(backend.unsupported(batched) == "");
    }
    // sm_90a's problems are unchanged: W4A4 there runs the BF16 kernel on decoded A
    CHECK(!gemm_backend(Arch::sm_90a, "test").native_fp4_activations());
  }

  TEST_CASE("the emulation switch routes sm_90a through this backend, with kernels of their own") {
    const GemmBackend* hopper = find_gemm_backend(Arch::sm_90a);
    REQUIRE(hopper);
    CHECK(hopper->name() == "sm90");
    ::setenv("NVFP4_JIT_EMULATE_ARCH", "sm_120a", 1);
    const GemmBackend* emulated = find_gemm_backend(Arch::sm_90a);
    ::unsetenv("NVFP4_JIT_EMULATE_ARCH");
    REQUIRE(emulated);
    CHECK(emulated->name() == "sm120");
    CHECK(find_gemm_backend(Arch::sm_90a)->name() == "sm90");
    // the same problem and tile as an sm_90a (emulated) and an sm_120a kernel: other names,
    // sources and arch, so other cache keys
    const GemmSpec p120 = gemm_fp4_problem(gemm_problem(Arch::sm_120a, 4096, 4096, DType::bf16, DType::bf16,
                                                          ScaleLayout::linear, false, kNoDType),
                                             ScaleLayout::swizzled128x4);
    GemmSpec p90 = p120;
    p90.arch = Arch::sm_90a;
    const GemmTile tile = emulated->heuristic(p120, 64, 170);
    const GeneratedKernel real = emulated->generate(gemm_spec(p120, tile)), emu = emulated->generate(gemm_spec(p90, tile));
    CHECK(real.name != emu.name);
    CHECK(emu.name.find("sm120emu") != std::string::npos);
    const int split = sm120::Tiles::from_config(tile).split_k;
    CHECK(real.source.find(fmt::format(", false, {}>>(p)", split)) != std::string::npos);
    CHECK(emu.source.find(fmt::format(", true, {}>>(p)", split)) != std::string::npos);
  }

  TEST_CASE("prewarm for sm_120a and sm_121a: the W4A4 GEMM kernels, a few per weight shape") {
    for (Arch arch : {Arch::sm_120a, Arch::sm_121a}) {
      const std::vector<GemmSpec> gemm = test::gemm_prewarm(arch, 4096, 14336);
      CHECK(!gemm.empty());
      CHECK(gemm.size() <= 16);
      for (const GemmSpec& s : gemm) {
        CHECK(s.a_dtype == uint8_t(DType::nvfp4));
        CHECK((s.flags & kFlagAScalesSwizzled) == 0);  // A's scales linear, as the quantizers write them by default
        CHECK(gemm_backend(arch, "test").tile_problem(s) == "");
      }
      MESSAGE(to_string(arch) << ": " << gemm.size() << " GEMM kernels for a 4096 x 14336 weight");
      // a manifest shape with experts: the grouped (contiguous) kernels of every bucket
      const std::vector<GemmSpec> grouped = test::gemm_prewarm(arch, 2880, 2880, 128);
      CHECK(!grouped.empty());
      for (const GemmSpec& s : grouped) {
        CHECK(s.a_dtype == uint8_t(DType::nvfp4));
        CHECK(s.groups == 128);
        CHECK(gemm_problem_grouped(s) == nvfp4k::GROUPED_CONTIGUOUS);
        CHECK(gemm_backend(arch, "test").tile_problem(s) == "");
      }
      MESSAGE(to_string(arch) << ": " << grouped.size() << " grouped GEMM kernels for 128 experts of 2880 x 2880");
    }
  }
}

TEST_SUITE("gemm_sm120") {
  TEST_CASE("SASS of the prewarm GEMM kernels for sm_120a and sm_121a: the block-scaled MMA, no local memory, within limits") {
    std::vector<GemmSpec> specs;
    for (Arch arch : {Arch::sm_120a, Arch::sm_121a}) {
      for (const GemmSpec& s : test::gemm_prewarm(arch, 4096, 4096)) specs.push_back(s);
      for (const GemmSpec& s : test::gemm_prewarm(arch, 2880, 2880, 128)) specs.push_back(s);  // grouped, 128 experts
    }
    test::check_gemm_sass(specs, {"OMMA.SF"}, nvfp4k::sm120::GEMM_MAX_SHARED);
  }

  TEST_CASE("the fused SwiGLU epilogue: prewarm's kernels, their SASS, and the emulation's build") {
    // `--epilogue swiglu` on a gate_up weight as stored: kernels of their own, dense (Llama-3.1-8B's
    // 2 x 14336 x 4096) and grouped (Qwen3-30B-A3B's 128 experts of 2 x 768 x 2048)
    std::vector<GemmSpec> specs;
    for (Arch arch : {Arch::sm_120a, Arch::sm_121a}) {
      for (const GemmSpec& s : test::gemm_prewarm_swiglu(arch, 2 * 14336, 4096)) specs.push_back(s);
      for (const GemmSpec& s : test::gemm_prewarm_swiglu(arch, 2 * 768, 2048, 128)) specs.push_back(s);
    }
    REQUIRE_FALSE(specs.empty());
    for (const GemmSpec& s : specs) {
      const std::string name = gemm_backend(s.arch, "test").kernel_name(s);
      CAPTURE(name);
      CHECK(gemm_epilogue_code(s) == nvfp4k::EPILOGUE_SWIGLU);
      CHECK(name.substr(name.size() - 7) == "_swiglu");
      CHECK_FALSE(gemm_problem_prepacked(s));
    }
    test::check_gemm_sass(specs, {"OMMA.SF"}, nvfp4k::sm120::GEMM_MAX_SHARED);
    // NVRTC builds the emulation for sm_90a: every weight tile width and row tile, split K, grouped
    ::setenv("NVFP4_JIT_EMULATE_ARCH", "sm_120a", 1);
    const GemmSpec p90 = with_epilogue(gemm_fp4_problem(gemm_problem(Arch::sm_90a, 2 * 768, 2048, DType::bf16, DType::bf16,
                                                                     ScaleLayout::linear, false, kNoDType),
                                                        ScaleLayout::linear),
                                       GemmEpilogue::swiglu);
    GemmSpec grouped = p90;
    grouped.groups = 8, grouped.flags |= kFlagGroupedContiguous;
    for (const auto& [problem, t] : std::vector<std::pair<GemmSpec, sm120::Tile>>{{p90, {16, 64, 2, 1}},
                                                                                  {p90, {128, 128, 2, 1}},
                                                                                  {p90, {32, 256, 2, 2}},
                                                                                  {grouped, {64, 128, 2, 1}}}) {
      const GemmSpec spec = gemm_spec(problem, sm120::Tiles::to_config(t));
      CAPTURE(sm120::Tiles::describe(t));
      CHECK(!KernelStore::instance().get(gemm_key(spec))->cubin.empty());
    }
    ::unsetenv("NVFP4_JIT_EMULATE_ARCH");
  }

  TEST_CASE("the SwiGLU epilogue's NVFP4 D: whole blocks a warp, prewarm's kernels, their SASS, the emulation's build") {
    // a warp's outputs are whole 16-column blocks: the 16-row tile of 64 weight rows (8 a warp)
    // is refused, and the heuristic takes 128 weight rows in its place
    GemmSpec fp4 = with_epilogue(gemm_fp4_problem(gemm_problem(Arch::sm_120a, 2 * 768, 2048, DType::bf16, DType::bf16,
                                                               ScaleLayout::linear, false, kNoDType),
                                                  ScaleLayout::linear),
                                 GemmEpilogue::swiglu);
    const GemmBackend& backend = gemm_backend(Arch::sm_120a, "test");
    CHECK(sm120::Tiles::from_config(backend.heuristic(fp4, 1, 188)).block_n == 64);  // BF16 D's
    fp4.out_dtype = uint8_t(DType::nvfp4);
    const sm120::Tile decode = sm120::Tiles::from_config(backend.heuristic(fp4, 1, 188));
    CHECK(decode.block_m == 16);
    CHECK(decode.block_n == 128);
    CHECK(backend.arch_tile_problem(gemm_spec(fp4, sm120::Tiles::to_config({16, 64, 2, 1}))).find("NVFP4 D: a warp's 8 outputs") == 0);
    for (const GemmTile& t : backend.candidates(fp4, gemm_m_bucket(1), 188)) CHECK(backend.arch_tile_problem(gemm_spec(fp4, t)) == "");
    // `--epilogue swiglu --d-dtype nvfp4`: dense (Llama-3.1-8B's gate_up) and grouped (Qwen3-30B-A3B's)
    std::vector<GemmSpec> specs = test::gemm_prewarm_swiglu(Arch::sm_120a, 2 * 14336, 4096, 1, DType::nvfp4);
    for (const GemmSpec& s : test::gemm_prewarm_swiglu(Arch::sm_120a, 2 * 768, 2048, 128, DType::nvfp4)) specs.push_back(s);
    REQUIRE_FALSE(specs.empty());
    for (const GemmSpec& s : specs) CHECK(s.out_dtype == uint8_t(DType::nvfp4));
    test::check_gemm_sass(specs, {"OMMA.SF"}, nvfp4k::sm120::GEMM_MAX_SHARED);
    ::setenv("NVFP4_JIT_EMULATE_ARCH", "sm_120a", 1);
    GemmSpec p90 = fp4;
    p90.arch = Arch::sm_90a;
    for (const sm120::Tile& t : {sm120::Tile{16, 128, 2, 1}, {32, 256, 2, 2}}) {
      const GemmSpec spec = gemm_spec(p90, sm120::Tiles::to_config(t));
      CAPTURE(sm120::Tiles::describe(t));
      CHECK(!KernelStore::instance().get(gemm_key(spec))->cubin.empty());
    }
    ::unsetenv("NVFP4_JIT_EMULATE_ARCH");
  }

  TEST_CASE("the MoE combine epilogue: prewarm's kernels, their SASS, and the emulation's build") {
    // `--epilogue moe-combine` on DeepSeek-V3's down experts (257 with the shared one)
    const std::vector<GemmSpec> specs =
        test::gemm_prewarm_epilogue(Arch::sm_120a, 7168, 2048, 257, GemmEpilogue::moe_combine);
    REQUIRE_FALSE(specs.empty());
    for (const GemmSpec& s : specs) CHECK(gemm_epilogue_code(s) == nvfp4k::EPILOGUE_MOE_COMBINE);
    test::check_gemm_sass(specs, {"OMMA.SF", "ATOMG"}, nvfp4k::sm120::GEMM_MAX_SHARED);
    ::setenv("NVFP4_JIT_EMULATE_ARCH", "sm_120a", 1);
    GemmSpec p90 = with_epilogue(gemm_fp4_problem(gemm_problem(Arch::sm_90a, 7168, 2048, DType::bf16, DType::bf16,
                                                               ScaleLayout::linear, false, kNoDType),
                                                  ScaleLayout::linear),
                                 GemmEpilogue::moe_combine);
    p90.groups = 8, p90.flags |= kFlagGroupedContiguous;
    const GemmSpec spec = gemm_spec(p90, sm120::Tiles::to_config({64, 128, 2, 1}));
    CHECK(!KernelStore::instance().get(gemm_key(spec))->cubin.empty());
    ::unsetenv("NVFP4_JIT_EMULATE_ARCH");
  }
}
