// gemm without a GPU: argument checks with their messages, M buckets and the heuristic, the
// generated source, the exact weight-operand encoding the kernel relies on.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "common/mma_operand.cuh"
#include "common/nvfp4_format.cuh"
#include "core/codegen.hpp"
#include "core/error.hpp"
#include "core/prewarm.hpp"
#include "ops/dequantize_op.hpp"
#include "ops/gemm_op.hpp"
#include "ops/prepack_op.hpp"

using namespace nvfp4::jit;
using namespace nvfp4::jit::detail;

namespace {

alignas(64) unsigned char buffer[4096];

GemmArgs valid() {
  GemmArgs g;
  g.m = 7, g.n = 64, g.k = 256;
  g.a = buffer;
  g.b.data = buffer;
  g.b.scales = buffer;
  g.d = buffer;
  return g;
}

// The message gemm throws for `g` (or "" when the arguments pass validation: without a GPU
// the call then fails later, at the device).
std::string error_of(const GemmArgs& g) {
  try {
    gemm(g, nullptr);
  } catch (const Error& e) {
    if (e.status() == Status::cuda_error) return "";
    return e.what();
  }
  return "";
}

void check_error(const GemmArgs& g, const std::string& part) {
  const std::string msg = error_of(g);
  CAPTURE(msg);
  CHECK(msg.find("nvfp4::jit::gemm: ") == 0);
  CHECK(msg.find(part) != std::string::npos);
}

}  // namespace

TEST_SUITE("gemm") {
  TEST_CASE("bad arguments fail with a message naming the argument") {
    CHECK(error_of(valid()) == "");
    GemmArgs g = valid();
    g.k = 48;
    check_error(g, "k = 48 must be a positive multiple of 32");
    g = valid(), g.n = 0;
    check_error(g, "n = 0");
    g = valid(), g.m = -1;
    check_error(g, "m = -1 is negative");
    g = valid(), g.a = buffer + 8;
    check_error(g, "a = ");
    g = valid(), g.b.data = buffer + 4;
    check_error(g, "b.data = ");
    g = valid(), g.b.scales = nullptr;
    check_error(g, "b.scales is null");
    g = valid(), g.d = nullptr;
    check_error(g, "d is null");
    g = valid(), g.a_row_stride = 260;
    check_error(g, "a_row_stride = 260 must be a multiple of 8");
    g = valid(), g.a_row_stride = 128;
    check_error(g, "a_row_stride = 128 is less than k = 256");
    g = valid(), g.b.row_stride_bytes = 136;
    check_error(g, "b.row_stride_bytes = 136 must be a multiple of 16");
    g = valid(), g.d_row_stride = 32;
    check_error(g, "d_row_stride = 32 is less than n = 64");
    g = valid(), g.a_dtype = DType::fp32;
    check_error(g, "a_dtype");
    g = valid(), g.d_dtype = DType::nvfp4;
    check_error(g, "d_dtype");
    g = valid(), g.bias = buffer, g.bias_dtype = DType::fp16;
    check_error(g, "bias_dtype");
    g = valid(), g.b.global_scale.device_ptr = reinterpret_cast<const float*>(buffer), g.b.global_scale.per_row = true;
    check_error(g, "per_row is not supported");
    // W4A4: A in a_fp4
    GemmArgs w4a4 = valid();
    w4a4.a = nullptr, w4a4.a_dtype = DType::nvfp4;
    w4a4.a_fp4.data = buffer, w4a4.a_fp4.scales = buffer;
    g = w4a4, g.a = buffer;
    check_error(g, "a is set but a_dtype = nvfp4: pass the NVFP4 activations in a_fp4");
    g = w4a4, g.a_fp4.data = nullptr;
    check_error(g, "a_fp4.data is null");
    g = w4a4, g.a_fp4.data = buffer + 2;
    check_error(g, "a_fp4.data = ");
    g = w4a4, g.a_fp4.scales = nullptr;
    check_error(g, "a_fp4.scales is null");
    g = w4a4, g.a_fp4.row_stride_bytes = 130;
    check_error(g, "a_fp4.row_stride_bytes = 130 must be at least k/2 = 128 and a multiple of 4");
    g = w4a4, g.a_fp4.global_scale.per_row = true;
    check_error(g, "a_fp4.global_scale.per_row is set but a_fp4.global_scale.device_ptr is null");
    g = w4a4, g.workspace = buffer, g.workspace_bytes = 100;
    check_error(g, "workspace_bytes = 100 is less than the");
    g = w4a4, g.workspace = buffer + 8, g.workspace_bytes = 1 << 20;
    check_error(g, "workspace = ");
    CHECK(error_of(w4a4) == "");
    CHECK(gemm_workspace_bytes(w4a4) == w4a4.m * w4a4.k * 2);
    CHECK(gemm_workspace_bytes(valid()) == 0);
    g = valid(), g.m = 0, g.a = nullptr, g.d = nullptr;  // nothing to do: no pointer is touched
    CHECK(error_of(g) == "");
    // A prepacked weight: only b.data (and its global scale) are read
    GemmArgs pre = valid();
    pre.b_prepacked = true, pre.b.scales = nullptr, pre.b.row_stride_bytes = 8, pre.b.scale_layout = ScaleLayout(9);
    CHECK(error_of(pre) == "");
    g = pre, g.b.data = nullptr;
    check_error(g, "b.data is null");
    g = pre, g.b.data = buffer + 8;
    check_error(g, "b.data = ");
  }

  TEST_CASE("a given tile: three consumer warpgroups need a prepacked weight, NVFP4 activations gemm's own tile") {
    auto message = [](const GemmArgs& g, const GemmTile& t) -> std::string {
      try {
        gemm_with_tile(g, t, nullptr);
      } catch (const Error& e) {
        return e.status() == Status::cuda_error ? "" : e.what();
      }
      return "";
    };
    const GemmTile three{192, 3, 3, 1, 128};
    CHECK(message(valid(), three).find("b_prepacked") != std::string::npos);
    GemmArgs w4a4 = valid();
    w4a4.a = nullptr, w4a4.a_dtype = DType::nvfp4;
    w4a4.a_fp4 = {buffer, 0, buffer, ScaleLayout::linear, {}};
    CHECK(message(w4a4, GemmTile{128, 2, 4, 1, 128}).find("a_dtype") != std::string::npos);
    // three consumers only where the heuristic may take them: a prepacked weight, M = 513-576
    CHECK(gemm_heuristic(Arch::sm_90a, 8192, 8192, 576, 132, true).consumers == 3);
    CHECK(gemm_heuristic(Arch::sm_90a, 8192, 8192, 576, 132, false).consumers == 2);
    CHECK(gemm_heuristic(Arch::sm_90a, 8192, 8192, 576, 132, true).block_m == 192);
  }

  TEST_CASE("M buckets and the heuristic") {
    CHECK(gemm_m_bucket(1) == 8);
    CHECK(gemm_m_bucket(8) == 8);
    CHECK(gemm_m_bucket(9) == 16);
    CHECK(gemm_m_bucket(129) == 192);
    CHECK(gemm_m_bucket(256) == 256);
    CHECK(gemm_m_bucket(257) == 320);
    CHECK(gemm_m_bucket(2048) == 2048);
    CHECK(gemm_m_bucket(2049) == kGemmLargeM);
    CHECK(gemm_m_bucket(100000) == kGemmLargeM);
    for (int bucket : kGemmMBuckets)
      for (int64_t n : {8, 2880, 8192, 28672})
        for (int64_t k : {32, 2880, 8192}) {
          const GemmTile t = gemm_heuristic(Arch::sm_90a, n, k, bucket, 132);
          CAPTURE(bucket);
          CAPTURE(n);
          CAPTURE(k);
          if (bucket <= 128) CHECK(t.block_m == bucket);
          else {  // as tall as its rows, in 16s
            CHECK((t.block_m <= 256 && t.block_m % 16 == 0));
            CHECK(gemm_row_step(gemm_bucket_m(bucket), t.block_m) > t.block_m - 16);
          }
          CHECK(gemm_shared_bytes(t) <= 227u * 1024);
          CHECK(t.stages >= 2);
          CHECK(gemm_tile_problem(t, k) == "");
          CHECK((t.split_k == 1 || t.split_k == 2 || t.split_k == 4));
          CHECK((k + t.block_k - 1) / t.block_k >= t.split_k);  // every split has work
        }
    // one row tile on a small N splits K to cover the SMs; prefill never does
    CHECK(gemm_heuristic(Arch::sm_90a, 4096, 8192, 8, 132).split_k == 2);
    CHECK(gemm_heuristic(Arch::sm_90a, 8192, 8192, 8, 132).split_k == 1);  // 128 one-consumer CTAs: enough
    CHECK(gemm_heuristic(Arch::sm_90a, 8192, 8192, 128, 132).split_k == 2);
    CHECK(gemm_heuristic(Arch::sm_90a, 8192, 8192, kGemmLargeM, 132).split_k == 1);
    // above 128 rows, the row tile that wastes the least (measured best on an H100, docs/perf.md):
    // M <= 192 one 192-row tile split in two; M <= 256 two 128-row tiles; then two tiles of 160,
    // 192, 224 and 256 rows up to M = 320, 384, 448 and 512; up to 640 four of 160 (three from
    // M = 513), up to 768 four of 192; prefill 256
    auto tile_at = [](int64_t n, int bucket) {
      const GemmTile t = gemm_heuristic(Arch::sm_90a, n, 8192, bucket, 132);
      return fmt::format("bm{} ks{}", t.block_m, t.split_k);
    };
    CHECK(tile_at(8192, 192) == "bm192 ks2");
    CHECK(tile_at(8192, 256) == "bm128 ks1");
    CHECK(tile_at(8192, 320) == "bm160 ks1");
    CHECK(tile_at(8192, 384) == "bm192 ks1");
    CHECK(tile_at(8192, 448) == "bm224 ks1");
    CHECK(tile_at(8192, 640) == "bm160 ks1");
    CHECK(tile_at(8192, 512) == "bm256 ks1");
    CHECK(tile_at(8192, 768) == "bm192 ks1");
    CHECK(tile_at(8192, 1024) == "bm256 ks1");
    CHECK(tile_at(8192, kGemmLargeM) == "bm256 ks1");
    CHECK(tile_at(28672, 192) == "bm192 ks1");
    CHECK(tile_at(28672, 768) == "bm192 ks1");
    // one consumer warpgroup where two would leave SMs idle (at M <= 64 up to one wave of
    // one-consumer CTAs; at M = 128 where two cover at most half the SMs split); above 128
    // rows the cost model's choice (one at N = 4096, M <= 192 and N = 2880, M <= 448)
    auto consumers = [](int64_t n, int64_t k, int bucket) { return gemm_heuristic(Arch::sm_90a, n, k, bucket, 132).consumers; };
    CHECK(consumers(8192, 8192, 8) == 1);
    CHECK(consumers(8192, 8192, 64) == 1);
    CHECK(consumers(8192, 8192, 128) == 2);
    CHECK(consumers(28672, 4096, 8) == 2);
    CHECK(consumers(4096, 14336, 8) == 1);
    CHECK(consumers(4096, 14336, 128) == 1);
    CHECK(consumers(4096, 14336, 192) == 1);
    CHECK(consumers(4096, 14336, 256) == 2);
    CHECK(consumers(2880, 2880, 448) == 1);
    CHECK(consumers(4096, 4096, kGemmLargeM) == 2);
    // ... and then, up to M = 64, two k groups to put as many warps on each SM, with half
    // their k-tiles in stages (at least 4, at most what fits)
    CHECK(gemm_heuristic(Arch::sm_90a, 4096, 14336, 8, 132).k_groups == 2);
    CHECK(gemm_heuristic(Arch::sm_90a, 4096, 14336, 64, 132).k_groups == 2);
    CHECK(gemm_heuristic(Arch::sm_90a, 4096, 14336, 128, 132).k_groups == 1);
    CHECK(gemm_heuristic(Arch::sm_90a, 28672, 4096, 8, 132).k_groups == 1);
    CHECK(gemm_heuristic(Arch::sm_90a, 4096, 4096, 8, 132).stages == 4);
    CHECK(gemm_heuristic(Arch::sm_90a, 8192, 8192, 8, 132).stages == 8);
    // 256-deep stages at small M, and for one consumer on 128 rows above M = 128
    CHECK(gemm_heuristic(Arch::sm_90a, 28672, 4096, 16, 132).block_k == 256);
    CHECK(gemm_heuristic(Arch::sm_90a, 4096, 4096, 256, 132).block_k == 256);
    // M = 128: 128-deep stages (five of them) with two consumers, 256-deep with one
    CHECK(gemm_heuristic(Arch::sm_90a, 8192, 8192, 128, 132).block_k == 128);
    CHECK(gemm_heuristic(Arch::sm_90a, 8192, 8192, 128, 132).stages == 5);
    CHECK(gemm_heuristic(Arch::sm_90a, 4096, 14336, 128, 132).block_k == 256);
  }

  TEST_CASE("the tile fits M itself (above 128 rows its height too); the bucket's tiles hold every M's") {
    // M = 769 at N = K = 8192: four 200-row tiles (two waves) on 208-row wgmmas, where the
    // bucket's 256-row tile computes 56 padding rows each
    CHECK(describe(gemm_tile_at(Arch::sm_90a, 8192, 8192, 769, 132, true)) == "bm208 bk128 wg2 s3 ks1");
    // M = 513 at 6144 x 4096: four 136-row tiles on 144-row wgmmas, not 160 (8% faster)
    CHECK(describe(gemm_tile_at(Arch::sm_90a, 6144, 4096, 513, 132, true)) == "bm144 bk128 wg3 s4 ks1");
    CHECK(gemm_tile_at(Arch::sm_90a, 8192, 8192, 1024, 132, true) == gemm_heuristic(Arch::sm_90a, 8192, 8192, 1024, 132, true));
    // up to 128 rows the bucket's tile, as high as the rows (M = 100: 112-row wgmmas), with
    // the stages that frees; past 16384 the largest bucket's
    const GemmTile bucket_128 = gemm_heuristic(Arch::sm_90a, 8192, 8192, 128, 132, true);
    CHECK(gemm_tile_at(Arch::sm_90a, 8192, 8192, 128, 132, true) == bucket_128);
    CHECK(describe(bucket_128) == "bm128 bk128 wg2 s5 ks2");
    CHECK(describe(gemm_tile_at(Arch::sm_90a, 8192, 8192, 100, 132, true)) == "bm112 bk128 wg2 s6 ks2");
    CHECK(describe(gemm_tile_at(Arch::sm_90a, 8192, 8192, 72, 132, true)) == "bm80 bk128 wg2 s7 ks2");
    CHECK(gemm_tile_at(Arch::sm_90a, 8192, 8192, 1, 132, true) == gemm_heuristic(Arch::sm_90a, 8192, 8192, 8, 132, true));
    CHECK(gemm_tile_at(Arch::sm_90a, 8192, 8192, 20000, 132, false) ==
          gemm_heuristic(Arch::sm_90a, 8192, 8192, kGemmLargeM, 132, false));
    for (int64_t n : {200, 2880, 6144, 28672})
      for (int64_t k : {2880, 4096})
        for (bool prepacked : {false, true}) {
          std::vector<std::vector<GemmTile>> sets;
          for (int bucket : kGemmMBuckets) sets.push_back(gemm_bucket_tiles(Arch::sm_90a, n, k, bucket, 132, prepacked));
          for (int64_t m = 1; m <= 17000; m += m < 3000 ? 1 : 7) {
            const size_t b = size_t(std::find(std::begin(kGemmMBuckets), std::end(kGemmMBuckets), gemm_m_bucket(m)) -
                                    std::begin(kGemmMBuckets));
            const GemmTile t = gemm_tile_at(Arch::sm_90a, n, k, m, 132, prepacked);
            if (std::find(sets[b].begin(), sets[b].end(), t) == sets[b].end()) {
              FAIL_CHECK(fmt::format("n = {} k = {} m = {} prepacked = {}: {} is not among its bucket's tiles", n, k, m,
                                     prepacked, describe(t)));
              break;
            }
          }
        }
  }

  TEST_CASE("a tuned tile runs where the tuner beat the heuristic; else each M's own tile") {
    const GemmTile bucket_tile = gemm_heuristic(Arch::sm_90a, 8192, 8192, 1024, 132, true);
    const GemmTile own = gemm_tile_at(Arch::sm_90a, 8192, 8192, 769, 132, true);
    REQUIRE(!(own == bucket_tile));
    CHECK(gemm_tile_choice(nullptr, Arch::sm_90a, 8192, 8192, 769, 132, true) == own);
    CHECK(gemm_tile_choice(&bucket_tile, Arch::sm_90a, 8192, 8192, 769, 132, true) == own);
    // a winner runs trimmed to each M's rows, like the heuristic's tiles, and `tune` compiles
    // every such form (gemm_tuned_tiles)
    GemmTile winner = bucket_tile;
    winner.stages = 2;
    REQUIRE(winner.block_m == 256);
    CHECK(gemm_tile_choice(&winner, Arch::sm_90a, 8192, 8192, 1000, 132, true) == winner);  // four tiles of 256 rows
    GemmTile trimmed = winner;
    trimmed.block_m = 208;  // four tiles of 200 rows
    CHECK(gemm_tile_choice(&winner, Arch::sm_90a, 8192, 8192, 769, 132, true) == trimmed);
    const std::vector<GemmTile> forms = gemm_tuned_tiles(winner, 1024);
    CHECK(forms.front() == winner);
    for (int64_t m = 769; m <= 1024; ++m) {
      const GemmTile t = gemm_tile_choice(&winner, Arch::sm_90a, 8192, 8192, m, 132, true);
      if (std::find(forms.begin(), forms.end(), t) == forms.end()) {
        FAIL_CHECK(fmt::format("m = {}: {} is not among the tuned tile's forms", m, describe(t)));
        break;
      }
    }
    // a table written before tiles were trimmed to their rows: the heuristic's 160-row tile at
    // 6144 x 4096, M = 576 (four tiles of 144 rows) still counts as the heuristic's
    GemmTile untrimmed = gemm_tile_at(Arch::sm_90a, 6144, 4096, 576, 132, true);
    REQUIRE(untrimmed.block_m == 144);
    untrimmed.block_m = 160;
    CHECK(gemm_tile_choice(&untrimmed, Arch::sm_90a, 6144, 4096, 513, 132, true) ==
          gemm_tile_at(Arch::sm_90a, 6144, 4096, 513, 132, true));
  }

  TEST_CASE("split-K grids split a last wave's tiles where split they fit one wave; else all") {
    CHECK(gemm_split_tiles(448, 1, 132) == 0);
    CHECK(gemm_split_tiles(448, 2, 132) == 52);    // 3 whole waves, then 104 CTAs of half the k-tiles
    CHECK(gemm_split_tiles(264, 2, 132) == 0);     // whole waves only: 132 clusters of two whole tiles
    CHECK(gemm_split_tiles(200, 2, 132) == 200);   // 68 left over split would be 136 CTAs: all split
    CHECK(gemm_split_tiles(64, 2, 132) == 64);     // under one wave: all split (decode)
    CHECK(gemm_split_tiles(150, 4, 132) == 18);    // 4 x 18 = 72 CTAs after a wave of 33 clusters
    CHECK(gemm_split_tiles(140, 2, 133) == 8);     // 7 left over, one more split: the rest pairs up
    for (int split_k : {2, 4, 8})
      for (int sm_count : {78, 114, 132, 133})
        for (int64_t tiles = 1; tiles <= 2000; ++tiles) {
          const int64_t split = gemm_split_tiles(tiles, split_k, sm_count);
          CAPTURE(split_k);
          CAPTURE(sm_count);
          CAPTURE(tiles);
          CHECK(split >= 0);
          CHECK(split <= tiles);
          CHECK((tiles - split) % split_k == 0);
        }
  }

  TEST_CASE("D goes through TMA where the tile's rows pair up and it fits in the stages") {
    CHECK(gemm_stores_through_tma({256, 2, 3, 1, 128}, 2));
    CHECK(gemm_stores_through_tma({256, 2, 3, 1, 128}, 4));  // 128 KiB of FP32 in 3 stages of 73
    CHECK(!gemm_stores_through_tma({8, 1, 8, 1, 256, 2}, 2));  // 8 rows: no pairs of 8-row matrices
    CHECK(!gemm_stores_through_tma({128, 3, 2, 1, 128}, 4));  // 96 KiB of FP32 in 2 stages of 46
    CHECK(gemm_stores_through_tma({128, 3, 2, 1, 128}, 2));
  }

  TEST_CASE("row tiles share M evenly, in multiples of 8, as many as block_m needs") {
    CHECK(gemm_row_step(1, 8) == 8);
    CHECK(gemm_row_step(257, 256) == 136);  // 136 + 121, not 256 + 1
    CHECK(gemm_row_step(513, 192) == 176);
    CHECK(gemm_row_step(4096, 256) == 256);
    for (int block_m : {8, 16, 64, 128, 192, 256})
      for (int64_t m = 1; m <= 5000; m += m < 600 ? 1 : 37) {
        const int64_t step = gemm_row_step(m, block_m), tiles = (m + step - 1) / step;
        CAPTURE(block_m);
        CAPTURE(m);
        CHECK(step % 8 == 0);
        CHECK(step <= block_m);
        CHECK(tiles == (m + block_m - 1) / block_m);
      }
  }

  TEST_CASE("generated source: one wgmma for the bucket's N, sm_90a only") {
    const GemmTile t = gemm_heuristic(Arch::sm_90a, 2880, 2880, 16, 132);
    const KernelSpec spec = gemm_spec(Arch::sm_90a, 2880, 2880, DType::bf16, DType::fp32, ScaleLayout::swizzled128x4,
                                      uint8_t(DType::bf16), t);
    const GeneratedKernel g = generate(spec);
    CHECK(g.source.find("wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16") != std::string::npos);
    CHECK(g.source.find("#include \"sm90/gemm_w4a16.cuh\"") != std::string::npos);
    CHECK(g.name.find("nvfp4_gemm_w4a16_n2880_k2880_bf16_fp32_sw128x4_biasbf16_bm16") == 0);
    CHECK(generate(gemm_spec(Arch::sm_90a, 2880, 2880, DType::fp16, DType::fp32, ScaleLayout::linear, kNoDType, t))
              .source.find(".f32.f16.f16") != std::string::npos);
    CHECK_THROWS_AS(generate(gemm_spec(Arch::sm_100a, 2880, 2880, DType::bf16, DType::bf16, ScaleLayout::linear,
                                       kNoDType, t)),
                    Error);
    size_t bucket_tiles = 0;
    for (int bucket : kGemmMBuckets)
      for (bool prepacked : {false, false, true})  // two layouts as stored, one prepacked
        bucket_tiles += gemm_bucket_tiles(Arch::sm_90a, 4096, 4096, bucket, 132, prepacked).size();
    CHECK(gemm_prewarm_specs(Arch::sm_90a, 4096, 4096, 132).size() == bucket_tiles);
    CHECK(generate(gemm_spec(Arch::sm_90a, 2880, 2880, DType::bf16, DType::bf16, gemm_weight_layout({}, true), kNoDType, t))
              .name.find("nvfp4_gemm_w4a16_n2880_k2880_bf16_bf16_prepacked_bm16") == 0);
    CHECK(gemm_prewarm_specs(Arch::sm_120a, 4096, 4096, 132).empty());
    // two k groups: named, and recovered from the spec (its thread count) for either producer
    GemmTile kg = t;
    kg.k_groups = 2;
    for (ScaleLayout layout : {ScaleLayout::linear, gemm_weight_layout({}, true)}) {
      const KernelSpec s = gemm_spec(Arch::sm_90a, 2880, 2880, DType::bf16, DType::bf16, layout, kNoDType, kg);
      CHECK(gemm_tile_of(s) == kg);
      CHECK(gemm_tile_of(gemm_spec(Arch::sm_90a, 2880, 2880, DType::bf16, DType::bf16, layout, kNoDType, t)) == t);
      CHECK(generate(s).name.find(fmt::format("_wg{}_kg2_", t.consumers)) != std::string::npos);
    }
    CHECK(describe(kg).find(" kg2 ") != std::string::npos);
  }

  TEST_CASE("prewarm of a weight shape holds every kernel a W4A16 or W4A4 gemm of it loads") {
    const std::vector<KernelSpec> specs = prewarm_specs({parse_shape("2880,4096")}, {Arch::sm_90a}, 132);
    auto has = [&](const KernelSpec& spec) { return std::find(specs.begin(), specs.end(), spec) != specs.end(); };
    CHECK(has(prepack_spec(Arch::sm_90a, 4096, ScaleLayout::linear)));
    for (ScaleLayout layout : {ScaleLayout::linear, ScaleLayout::swizzled128x4, gemm_weight_layout({}, true)}) {
      if (layout != gemm_weight_layout({}, true))
        CHECK(has(dequantize_spec(Arch::sm_90a, 4096, DType::bf16, layout)));  // W4A4's decode of A
      for (int64_t m = 1; m <= 17000; m += m < 3000 ? 1 : 13)
        CHECK(has(gemm_spec(Arch::sm_90a, 2880, 4096, DType::bf16, DType::bf16, layout, kNoDType,
                            gemm_tile_at(Arch::sm_90a, 2880, 4096, m, 132, layout == gemm_weight_layout({}, true)))));
    }
  }

  TEST_CASE("the weight operand: placed nibble x scale factor = e2m1 x scale x 2^-SHIFT, exactly") {
    // Every byte (two nibbles) against every E4M3 scale in every byte of a scale word: the
    // kernel multiplies 16-bit floats (the scale by the fixups, then nibbles by the scale);
    // here the same steps, each of which must be exact in the 16-bit type, and the product
    // must equal the definition.
    auto check_dtype = [](auto op, bool bf16) {
      using Op = decltype(op);
      auto to_float = [&](unsigned h) { return double(bf16 ? nvfp4k::bf16_bits_to_float(h) : nvfp4k::fp16_bits_to_float(h)); };
      auto exact16 = [&](double v) {  // v survives rounding to the 16-bit type
        const unsigned short h = bf16 ? nvfp4k::float_to_bf16_bits(float(v)) : nvfp4k::float_to_fp16_bits(float(v));
        return to_float(h) == v;
      };
      std::vector<double> factor(0x7F);
      for (unsigned s = 0; s < 0x7F; ++s)
        for (unsigned at = 0; at < 4; ++at) {
          // s in byte `at`, NaN-free noise (with the sign bit set) in the others
          const unsigned word = (0x3A80C5B1u & ~(0xFFu << (8 * at))) | ((s | (at % 2 ? 0x80u : 0u)) << (8 * at));
          double f = to_float((Op::scale_bits(word, at % 2) >> (16 * (at / 2))) & 0xFFFF);
          CHECK(f == std::ldexp(double(nvfp4k::e4m3_to_float(s)), -Op::SCALE_UNIT));
          for (int i = 0; i < Op::FIXUPS; ++i) {
            f = std::ldexp(f, Op::FIXUP_EXP);
            CHECK(exact16(f));
          }
          CHECK(to_float(Op::FIXUP_BITS) == std::ldexp(1.0, Op::FIXUP_EXP));
          CHECK_FALSE(Op::has_nan_scale(word));
          CHECK(Op::has_nan_scale(word | (0x7Fu << (8 * ((at + 1) % 4)))));
          factor[s] = f;
        }
      for (unsigned b = 0; b < 256; ++b) {
        const unsigned placed = Op::place(b);
        for (unsigned lane = 0; lane < 2; ++lane) {
          const unsigned nib = lane ? b >> 4 : b & 15;
          const double v = to_float((placed >> (16 * lane)) & 0xFFFF);
          CHECK(v == std::ldexp(double(nvfp4k::e2m1_to_float(nib)), -Op::BIAS));
          for (unsigned s = 0; s < 0x7F; ++s) {
            CHECK(exact16(v * factor[s]));
            CHECK(v * factor[s] == std::ldexp(double(nvfp4k::e2m1_to_float(nib)) * nvfp4k::e4m3_to_float(s), -Op::SHIFT));
          }
        }
      }
    };
    check_dtype(nvfp4k::Fp4Operand<nvfp4k::DTYPE_BF16>{}, true);
    check_dtype(nvfp4k::Fp4Operand<nvfp4k::DTYPE_FP16>{}, false);
  }
}
