// The sm_90a GEMM backend without a GPU: its heuristic and cost model, the tiles it can build,
// its generated source and kernel names.
#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/codegen.hpp"
#include "core/error.hpp"
#include "core/tuning_table.hpp"
#include "gemm_test_util.hpp"
#include "sass_util.hpp"
#include "ops/gemm/m_buckets.hpp"
#include "ops/gemm/sm90/backend.hpp"
#include "ops/gemm/tile_choice.hpp"
#include "sm90/gemm_params.cuh"
#include "test_util.hpp"

using namespace nvfp4::jit;
using namespace nvfp4::jit::detail;
using namespace nvfp4::jit::detail::test;

TEST_SUITE("gemm_sm90") {
  TEST_CASE("the heuristic: one row tile per bucket up to 128 rows, the cost model's above") {
    for (int bucket : kGemmMBuckets)
      for (int64_t n : {8, 2880, 8192, 28672})
        for (int64_t k : {32, 2880, 8192}) {
          const sm90::Tile t = sm90::bucket_tile(n, k, bucket, 132);
          CAPTURE(bucket);
          CAPTURE(n);
          CAPTURE(k);
          if (bucket <= 128) CHECK(t.block_m == bucket);
          else {  // as tall as its rows, in 16s
            CHECK((t.block_m <= 256 && t.block_m % 16 == 0));
            CHECK(gemm_row_step(gemm_bucket_m(bucket), t.block_m) > t.block_m - 16);
          }
          CHECK(sm90::shared_bytes(t) <= 227u * 1024);
          CHECK(t.stages >= 2);
          CHECK(sm90::tile_problem(t, k) == "");
          CHECK((t.split_k == 1 || t.split_k == 2 || t.split_k == 4));
          CHECK((k + t.block_k - 1) / t.block_k >= t.split_k);  // every split has work
        }
    // one row tile on a small N splits K to cover the SMs; prefill never does
    CHECK(sm90::bucket_tile(4096, 8192, 8, 132).split_k == 2);
    CHECK(sm90::bucket_tile(8192, 8192, 8, 132).split_k == 1);  // 128 one-consumer CTAs: enough
    CHECK(sm90::bucket_tile(8192, 8192, 128, 132).split_k == 2);
    CHECK(sm90::bucket_tile(8192, 8192, kGemmLargeM, 132).split_k == 1);
    // above 128 rows, the row tile that wastes the least (measured best on an H100, docs/perf.md):
    // M <= 192 one 192-row tile split in two; M <= 256 two 128-row tiles; then two tiles of 160,
    // 192, 224 and 256 rows up to M = 320, 384, 448 and 512; up to 640 four of 160 (three from
    // M = 513), up to 768 four of 192; prefill 256
    auto tile_at = [](int64_t n, int bucket) {
      const sm90::Tile t = sm90::bucket_tile(n, 8192, bucket, 132);
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
    auto consumers = [](int64_t n, int64_t k, int bucket) { return sm90::bucket_tile(n, k, bucket, 132).consumers; };
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
    CHECK(sm90::bucket_tile(4096, 14336, 8, 132).k_slices == 2);
    CHECK(sm90::bucket_tile(4096, 14336, 64, 132).k_slices == 2);
    CHECK(sm90::bucket_tile(4096, 14336, 128, 132).k_slices == 1);
    CHECK(sm90::bucket_tile(28672, 4096, 8, 132).k_slices == 1);
    CHECK(sm90::bucket_tile(4096, 4096, 8, 132).stages == 4);
    CHECK(sm90::bucket_tile(8192, 8192, 8, 132).stages == 8);
    // 256-deep stages at small M, and for one consumer on 128 rows above M = 128
    CHECK(sm90::bucket_tile(28672, 4096, 16, 132).block_k == 256);
    CHECK(sm90::bucket_tile(4096, 4096, 256, 132).block_k == 256);
    // M = 128: 128-deep stages (five of them) with two consumers, 256-deep with one
    CHECK(sm90::bucket_tile(8192, 8192, 128, 132).block_k == 128);
    CHECK(sm90::bucket_tile(8192, 8192, 128, 132).stages == 5);
    CHECK(sm90::bucket_tile(4096, 14336, 128, 132).block_k == 256);
  }

  TEST_CASE("the tile fits M itself (above 128 rows its height too); the bucket's tiles hold every M's") {
    // M = 769 at N = K = 8192: four 200-row tiles (two waves) on 208-row wgmmas, where the
    // bucket's 256-row tile computes 56 padding rows each
    CHECK(sm90::describe(sm90::heuristic_tile(8192, 8192, 769, 132, true)) == "bm208 bk128 wg2 s3 ks1");
    // M = 513 at 6144 x 4096: four 136-row tiles on 144-row wgmmas, not 160 (8% faster)
    CHECK(sm90::describe(sm90::heuristic_tile(6144, 4096, 513, 132, true)) == "bm144 bk128 wg3 s4 ks1");
    CHECK(sm90::heuristic_tile(8192, 8192, 1024, 132, true) == sm90::bucket_tile(8192, 8192, 1024, 132, true));
    // up to 128 rows the bucket's tile, as high as the rows (M = 100: 112-row wgmmas), with
    // the stages that frees; past 16384 the largest bucket's
    const sm90::Tile bucket_128 = sm90::bucket_tile(8192, 8192, 128, 132, true);
    CHECK(sm90::heuristic_tile(8192, 8192, 128, 132, true) == bucket_128);
    CHECK(sm90::describe(bucket_128) == "bm128 bk128 wg2 s5 ks2");
    CHECK(sm90::describe(sm90::heuristic_tile(8192, 8192, 100, 132, true)) == "bm112 bk128 wg2 s6 ks2");
    CHECK(sm90::describe(sm90::heuristic_tile(8192, 8192, 72, 132, true)) == "bm80 bk128 wg2 s7 ks2");
    CHECK(sm90::heuristic_tile(8192, 8192, 1, 132, true) == sm90::bucket_tile(8192, 8192, 8, 132, true));
    CHECK(sm90::heuristic_tile(8192, 8192, 20000, 132, false) ==
          sm90::bucket_tile(8192, 8192, kGemmLargeM, 132, false));
    for (int64_t n : {200, 2880, 6144, 28672})
      for (int64_t k : {2880, 4096})
        for (bool prepacked : {false, true}) {
          std::vector<std::vector<sm90::Tile>> sets;
          for (int bucket : kGemmMBuckets) sets.push_back(sm90_bucket_tiles(n, k, bucket, prepacked));
          for (int64_t m = 1; m <= 17000; m += m < 3000 ? 1 : 7) {
            const size_t b = size_t(std::find(std::begin(kGemmMBuckets), std::end(kGemmMBuckets), gemm_m_bucket(m)) -
                                    std::begin(kGemmMBuckets));
            const sm90::Tile t = sm90::heuristic_tile(n, k, m, 132, prepacked);
            if (std::find(sets[b].begin(), sets[b].end(), t) == sets[b].end()) {
              FAIL_CHECK(fmt::format("n = {} k = {} m = {} prepacked = {}: {} is not among its bucket's tiles", n, k, m,
                                     prepacked, sm90::describe(t)));
              break;
            }
          }
        }
  }


  TEST_CASE("a tuned tile runs where the tuner beat the heuristic; else each M's own tile") {
    const sm90::Tile bucket_tile = sm90::bucket_tile(8192, 8192, 1024, 132, true);
    const sm90::Tile own = sm90::heuristic_tile(8192, 8192, 769, 132, true);
    REQUIRE(!(own == bucket_tile));
    CHECK(sm90_choice(nullptr, 8192, 8192, 769, true) == own);
    CHECK(sm90_choice(&bucket_tile, 8192, 8192, 769, true) == own);
    // a winner runs trimmed to each M's rows, like the heuristic's tiles, and `tune` compiles
    // every such form (gemm_tuned_tiles)
    sm90::Tile winner = bucket_tile;
    winner.stages = 2;
    REQUIRE(winner.block_m == 256);
    CHECK(sm90_choice(&winner, 8192, 8192, 1000, true) == winner);  // four tiles of 256 rows
    sm90::Tile trimmed = winner;
    trimmed.block_m = 208;  // four tiles of 200 rows
    CHECK(sm90_choice(&winner, 8192, 8192, 769, true) == trimmed);
    const std::vector<sm90::Tile> forms = to_tiles(gemm_tuned_tiles(sm90_backend(), sm90::to_config(winner), 1024));
    CHECK(forms.front() == winner);
    for (int64_t m = 769; m <= 1024; ++m) {
      const sm90::Tile t = sm90_choice(&winner, 8192, 8192, m, true);
      if (std::find(forms.begin(), forms.end(), t) == forms.end()) {
        FAIL_CHECK(fmt::format("m = {}: {} is not among the tuned tile's forms", m, sm90::describe(t)));
        break;
      }
    }
    // a table written before tiles were trimmed to their rows: the heuristic's 160-row tile at
    // 6144 x 4096, M = 576 (four tiles of 144 rows) still counts as the heuristic's
    sm90::Tile untrimmed = sm90::heuristic_tile(6144, 4096, 576, 132, true);
    REQUIRE(untrimmed.block_m == 144);
    untrimmed.block_m = 160;
    CHECK(sm90_choice(&untrimmed, 6144, 4096, 513, true) ==
          sm90::heuristic_tile(6144, 4096, 513, 132, true));
  }


  TEST_CASE("D goes through TMA where the tile's rows pair up and it fits in the stages") {
    CHECK(sm90::stores_through_smem({256, 2, 3, 1, 128}, 2));
    CHECK(sm90::stores_through_smem({256, 2, 3, 1, 128}, 4));  // 128 KiB of FP32 in 3 stages of 73
    CHECK(!sm90::stores_through_smem({8, 1, 8, 1, 256, 2}, 2));  // 8 rows: no pairs of 8-row matrices
    CHECK(!sm90::stores_through_smem({128, 3, 2, 1, 128}, 4));  // 96 KiB of FP32 in 2 stages of 46
    CHECK(sm90::stores_through_smem({128, 3, 2, 1, 128}, 2));
  }


  TEST_CASE("a grouped tile's narrower MMA widths: quarters, and from 128 rows eighths above the half") {
    for (int bm = 16; bm <= 256; bm += 16) {
      CAPTURE(bm);
      const int count = nvfp4k::narrow_mma_width_count(bm);
      CHECK(count == (bm < 64 ? 1 : bm < 128 ? 4 : 6));
      CHECK(nvfp4k::narrow_mma_width(bm, count - 1) == bm);
      for (int i = 0; i < count; ++i) {
        const int w = nvfp4k::narrow_mma_width(bm, i);
        CHECK(w % 8 == 0);
        if (i > 0) CHECK(w > nvfp4k::narrow_mma_width(bm, i - 1));
      }
      // the widest MMA a tile of r rows issues past half its height: r plus at most an eighth of
      // BM (a quarter below 128 rows) and wgmma's granule of 8
      for (int r = bm / 2 + 1; count > 1 && r <= bm; ++r) {
        int i = 0;
        while (nvfp4k::narrow_mma_width(bm, i) < r) ++i;
        CHECK(nvfp4k::narrow_mma_width(bm, i) - r < (bm < 128 ? bm / 4 : bm / 8) + 8);
      }
    }
  }

  TEST_CASE("SASS of DeepSeek-V3's tall grouped tiles: a k loop for every MMA width, no local memory") {
    // the tile of 4096 tokens (128 rows an expert: one 160-row tile), prepacked (three consumer
    // warpgroups) and on ModelOpt's layout (two); and the prepacked one batched, whose tiles are
    // always full (its MMA never narrows)
    std::vector<GemmSpec> specs;
    for (bool prepacked : {true, false}) {
      GemmSpec problem = sm90_problem(7168, 2048, prepacked);
      problem.groups = 256;
      problem.flags |= kFlagGroupedContiguous;
      specs.push_back(gemm_spec(problem, sm90_backend().heuristic(problem, 157, 132)));
      REQUIRE(specs.back().tile.block_m == 160);
    }
    GemmSpec batched = specs.front();
    batched.flags = (batched.flags & ~kFlagGroupedContiguous) | kFlagGroupedBatched;
    REQUIRE(sm90_backend().tile_problem(batched).empty());
    specs.push_back(batched);
    for_each_disassembled(specs, [](const GemmSpec& spec, const std::string& name, const std::string& text) {
      CAPTURE(gemm_key(spec).describe());
      const int bm = spec.tile.block_m, steps = spec.tile.block_k / 16;  // k16 steps a stage
      const int widths = spec.flags & kFlagGroupedBatched ? 1 : nvfp4k::narrow_mma_width_count(bm);
      for (int i = 0; i < widths; ++i) {
        const std::string hgmma = fmt::format("HGMMA.64x{}x16", widths == 1 ? bm : nvfp4k::narrow_mma_width(bm, i));
        CAPTURE(hgmma);
        CHECK(parse_sass(text, name, hgmma + ".").matches == steps);
      }
      const Sass s = parse_sass(text, name, "HGMMA");
      CHECK(s.matches == steps * widths);  // no other width
      CHECK(s.local_accesses == 0);
    });
  }

  TEST_CASE("SASS of the persistent decode tiles: their CTAs' registers, no local memory") {
    // the 8- and 16-row tiles of the expert shapes of `bench grouped` (prepacked: three CTAs an
    // SM up to K = 4096, else two; the ModelOpt layout: two, one), contiguous and masked, BF16
    // and FP16 activations; and every tuning candidate of the 8-row bucket that runs three CTAs
    const GemmBackend& backend = sm90_backend();
    std::vector<GemmSpec> specs;
    for (auto [n, k, groups] : {std::tuple{7168, 2048, 256}, {1536, 2048, 128}, {5760, 2880, 128}, {4096, 7168, 256}})
      for (uint8_t layout : {uint8_t(kFlagGroupedContiguous), uint8_t(kFlagGroupedMasked)})
        for (DType a : {DType::bf16, DType::fp16})
          for (int rows : {1, 16})
            for (bool prepacked : {true, false}) {
              GemmSpec problem = sm90_problem(n, k, prepacked);
              problem.groups = groups;
              problem.flags |= layout;
              problem.a_dtype = uint8_t(a);
              specs.push_back(gemm_spec(problem, backend.for_rows(backend.heuristic(problem, rows, 132), rows)));
              REQUIRE(specs.back().tile.block_m == (rows == 1 ? 8 : 16));
            }
    GemmSpec problem = sm90_problem(5760, 2880, true);
    problem.groups = 128;
    problem.flags |= kFlagGroupedContiguous;
    const size_t heuristic_kernels = specs.size();
    for (const GemmTile& t : backend.candidates(problem, 8, 132))
      if (generate(gemm_spec(problem, t)).source.find(fmt::format("__launch_bounds__({}, 3)", t.threads)) != std::string::npos)
        specs.push_back(gemm_spec(problem, t));
    CHECK(specs.size() > heuristic_kernels + 1);  // the tuner's two-consumer and k-sliced tiles too
    for_each_disassembled(specs, [](const GemmSpec& spec, const std::string& name, const std::string& text) {
      CAPTURE(gemm_key(spec).describe());
      const std::string source = generate(spec).source;
      int ctas = 1;
      for (int c : {2, 3})
        if (source.find(fmt::format("__launch_bounds__({}, {})", spec.tile.threads, c)) != std::string::npos) ctas = c;
      REQUIRE(source.find(fmt::format("__launch_bounds__({}", spec.tile.threads)) != std::string::npos);
      const Sass s = parse_sass(text, name, sm90_mma_mnemonic(spec));
      CHECK(s.matches > 0);
      // the activations' dtype picks the MMA's inputs (sm90/wgmma.cuh): FP16's has no suffix
      CHECK(parse_sass(text, name, ".F32.BF16 ").matches == (spec.a_dtype == uint8_t(DType::bf16) ? s.matches : 0));
      CHECK(s.registers <= 65536 / (ctas * spec.tile.threads));
      CHECK(s.loop_local_accesses == 0);
      // the ModelOpt layout's masked 8-row tile spills one word across its k loop, once a tile;
      // three consumers at two CTAs (64 registers) a few around the k loop (the tile's cursor,
      // epilogue and producer), none in it; at three CTAs (56 registers) the producers' tile loop
      // keeps two words of a tile's in local memory
      const bool masked_modelopt = !gemm_problem_prepacked(spec) && (spec.flags & kFlagGroupedMasked);
      const bool three_at_two = ctas == 2 && spec.tile.threads == 512;
      CHECK(s.local_accesses <= (masked_modelopt ? 2 : three_at_two ? 24 : ctas == 3 ? 4 : 0));
    });
  }

  TEST_CASE("SASS of the SwiGLU epilogue's kernels: Llama's gate_up and DeepSeek-V3's experts, no local memory in the k loop") {
    // the dense heuristic tiles of 1 to 4096 rows (split-K and k slices among them) and the
    // grouped ones of 1, 16 and 157 rows an expert (persistent decode tiles, a tall tile), with
    // BF16 D and with NVFP4 D
    const GemmBackend& backend = sm90_backend();
    std::vector<GemmSpec> specs;
    auto add = [&](GemmSpec problem, std::initializer_list<int64_t> rows_list) {
      for (DType d : {DType::bf16, DType::nvfp4}) {
        problem.out_dtype = uint8_t(d);
        for (int64_t rows : rows_list) specs.push_back(gemm_spec(problem, backend.for_rows(backend.heuristic(problem, rows, 132), rows)));
      }
    };
    add(with_epilogue(sm90_problem(2 * 14336, 4096, true), GemmEpilogue::swiglu), {1, 16, 100, 4096});
    GemmSpec grouped = with_epilogue(sm90_problem(2 * 2048, 7168, true), GemmEpilogue::swiglu);
    grouped.groups = 256;
    grouped.flags |= kFlagGroupedContiguous;
    add(grouped, {1, 16, 157});
    // Qwen3-30B-A3B's experts at K = 2048: the 8-row decode tile runs three CTAs an SM
    GemmSpec qwen = with_epilogue(sm90_problem(2 * 768, 2048, true), GemmEpilogue::swiglu);
    qwen.groups = 128;
    qwen.flags |= kFlagGroupedContiguous;
    add(qwen, {1, 16});
    for_each_disassembled(specs, [](const GemmSpec& spec, const std::string& name, const std::string& text) {
      CAPTURE(gemm_key(spec).describe());
      CHECK(name.find("_swiglu_") != std::string::npos);
      const Sass s = parse_sass(text, name, sm90_mma_mnemonic(spec));
      CHECK(s.matches > 0);
      CHECK(s.loop_local_accesses == 0);
      // the tall tile of three consumers (80 accumulators a thread) keeps one word in local
      // memory outside its k loop (spilled once, refilled around the tile loop); the others none.
      // NVFP4 D's quantizing epilogue (the IEEE division's slow-path calls of its rare copy) has
      // the persistent decode tiles of two CTAs an SM (80 registers a thread) and the tall tile
      // keep a few of the tile loop's invariants there: stored once, refilled once a tile.
      const bool fp4 = spec.out_dtype == uint8_t(DType::nvfp4), tall = spec.tile.threads == 512 && spec.tile.block_m == 160;
      CHECK(s.local_accesses <= (fp4 ? 24 : tall ? 8 : 0));
      const std::string source = generate(spec).source;
      const int ctas = source.find(fmt::format("__launch_bounds__({}, 3)", spec.tile.threads)) != std::string::npos   ? 3
                       : source.find(fmt::format("__launch_bounds__({}, 2)", spec.tile.threads)) != std::string::npos ? 2
                                                                                                                      : 1;
      CHECK(s.registers <= 65536 / (ctas * spec.tile.threads));
    });
  }

  TEST_CASE("grouped tiles of up to 64 rows run a persistent grid: the CTAs the SMs hold, the deepest ring, D by element") {
    const GemmBackend& backend = sm90_backend();
    GemmSpec problem = sm90_problem(7168, 2048, true);
    problem.groups = 256;
    problem.flags |= kFlagGroupedContiguous;
    const GemmTile decode = sm90::heuristic(problem, 1, 132, 8);  // 1-row experts, a token's 8
    const GemmSpec spec = gemm_spec(problem, decode);
    CAPTURE(backend.describe(decode));
    REQUIRE(decode.block_m == 8);
    // three CTAs an SM (an 8-row tile of a prepacked weight, K up to 4096): one consumer, five
    // 14 KiB stages in 75 KiB
    CHECK(decode.stages == 5);
    CHECK(backend.tile_problem(spec).empty());
    CHECK(backend.shared_bytes(spec) <= 228u * 1024 / 3 - 1024);
    CHECK(backend.kernel_name(spec).find("_persistent") != std::string::npos);
    CHECK(generate(spec).source.find("KSLICES = 1;") != std::string::npos);
    CHECK(generate(spec).source.find("GROUPED = 1, GROUPS = 256, PERSISTENT = 1,") != std::string::npos);
    CHECK(generate(spec).source.find("__launch_bounds__(256, 3)") != std::string::npos);
    // 8 rows in 8 experts: 9 row tiles x 112 n tiles, run by three CTAs an SM; up to two tiles a
    // CTA, a CTA a tile
    CHECK(backend.plan(spec, 8, 132).shape.grid[0] == 396u);
    GemmSpec narrow = spec;
    narrow.n = 5632;  // 88 n tiles: 792 tiles
    CHECK(backend.plan(narrow, 8, 132).shape.grid[0] == 9u * 88u);
    narrow.n = 5696;  // 89: 801
    CHECK(backend.plan(narrow, 8, 132).shape.grid[0] == 396u);
    // a table tuned when this tile ran two CTAs an SM (one consumer in two k slices, seven
    // stages): its entry is refused when the table loads, with a note (the call finds no tuned
    // tile and runs the heuristic's)
    GemmTile stale = decode;
    stale.threads = 384, stale.k_slices = 2, stale.stages = 7;
    CHECK(backend.tile_problem(gemm_spec(problem, stale)).find("for each of 3 CTAs an SM") != std::string::npos);
    {
      testutil::TempDir dir;
      const std::string path = dir.str() + "/table.json";
      TuningEntry old_entry, fine;
      old_entry.m_bucket = 8, old_entry.tuned = gemm_key(gemm_spec(problem, stale));
      fine.m_bucket = 16, fine.tuned = gemm_key(gemm_spec(problem, backend.heuristic(problem, 16, 132)));
      std::ofstream(path) << TuningTable::to_text({old_entry, fine}, Arch::sm_90a, "GPU", 132, TuningVersions::current());
      const TuningTable table(path, Arch::sm_90a, "GPU", 132);
      CHECK_FALSE(table.find(gemm_key(problem), 8));
      CHECK(table.find(gemm_key(problem), 16));
      REQUIRE(table.notes().size() == 1);
      CHECK(table.notes()[0].find("1 entries this build cannot run were skipped (the first: gemm arch=sm_90a n=7168 k=2048 ") !=
            std::string::npos);
      CHECK(table.notes()[0].find(", bucket 8: ") != std::string::npos);
    }
    // a longer K: two CTAs an SM of two consumers, five stages in 113 KiB
    GemmSpec long_k = problem;
    long_k.n = 4096, long_k.k = 7168;
    const GemmSpec two = gemm_spec(long_k, backend.heuristic(long_k, 1, 132));
    CAPTURE(backend.kernel_name(two));
    CHECK(two.tile.block_m == 8);
    CHECK(two.tile.block_n == 128);
    CHECK(two.tile.stages == 5);
    CHECK(backend.shared_bytes(two) <= 228u * 1024 / 2 - 1024);
    CHECK(generate(two).source.find("__launch_bounds__(384, 2)") != std::string::npos);
    CHECK(backend.plan(two, 8, 132).shape.grid[0] == 288u);  // 9 x 32 tiles: a CTA a tile
    // a 16-row tile: two CTAs an SM of two consumers, four 26 KiB stages
    const GemmSpec sixteen_rows = gemm_spec(problem, backend.for_rows(backend.heuristic(problem, 16, 132), 16));
    CAPTURE(backend.kernel_name(sixteen_rows));
    CHECK(sixteen_rows.tile.block_m == 16);
    CHECK(sixteen_rows.tile.block_n == 128);
    CHECK(sixteen_rows.tile.stages == 4);
    CHECK(generate(sixteen_rows).source.find("__launch_bounds__(384, 2)") != std::string::npos);
    // the masked layout too; not a dense, batched or taller grouped tile
    GemmSpec masked = spec;
    masked.flags = uint8_t((masked.flags & ~kFlagGroupedContiguous) | kFlagGroupedMasked);
    CHECK(backend.kernel_name(masked).find("_persistent") != std::string::npos);
    // 64 rows: three consumers, one CTA an SM, as many 256-deep stages as fit (three)
    const GemmTile taller = backend.heuristic(problem, 64, 132);
    CAPTURE(backend.describe(taller));
    CHECK(taller.block_m == 64);
    CHECK(taller.stages == 3);
    CHECK(backend.plan(gemm_spec(problem, taller), 4096, 132).shape.grid[0] == 132u);
    CHECK(generate(gemm_spec(problem, taller)).source.find("__launch_bounds__(512)") != std::string::npos);
    // a 16-row tile of the ModelOpt layout: one CTA an SM (two would spill its registers)
    GemmSpec modelopt = sm90_problem(7168, 2048);
    modelopt.groups = 256;
    modelopt.flags |= kFlagGroupedContiguous;
    // 64 rows of it: two consumers of two k slices, persistent, their sums in a region of their
    // own (64 x 128 fp32, 32 KiB) beside as many stages as fit
    const GemmSpec sliced = gemm_spec(modelopt, backend.heuristic(modelopt, 64, 132));
    CAPTURE(backend.kernel_name(sliced));
    CHECK(sliced.tile.block_m == 64);
    CHECK(sliced.tile.block_n == 128);
    CHECK(backend.kernel_name(sliced).find("wg2x2") != std::string::npos);
    CHECK(backend.kernel_name(sliced).find("_persistent") != std::string::npos);
    CHECK(backend.tile_problem(sliced).empty());
    const unsigned bk = sliced.tile.block_k;  // a stage: activation boxes, packed weights, scales
    CHECK(backend.shared_bytes(sliced) >= 32u * 1024 + unsigned(sliced.tile.stages) * (bk / 64 * 64 * 128 + 128 * bk / 2 + 8 * bk));
    CHECK(sliced.tile.stages >= 4);
    CHECK(backend.shared_bytes(sliced) <= 227u * 1024);
    CHECK(generate(sliced).source.find("__launch_bounds__(640)") != std::string::npos);
    const GemmSpec sixteen = gemm_spec(modelopt, backend.for_rows(backend.heuristic(modelopt, 16, 132), 16));
    CAPTURE(backend.kernel_name(sixteen));
    CHECK(sixteen.tile.block_m == 16);
    CHECK(backend.plan(sixteen, 4096, 132).shape.grid[0] == 132u);
    CHECK(generate(sixteen).source.find("__launch_bounds__(640)") != std::string::npos);  // one CTA an SM: two consumers x two k slices
    GemmSpec batched = spec;
    batched.flags = uint8_t((batched.flags & ~kFlagGroupedContiguous) | kFlagGroupedBatched);
    const GemmTile tall = backend.heuristic(problem, 256, 132);
    CHECK(tall.block_m > 64);
    for (const GemmSpec& s : {gemm_spec(sm90_problem(7168, 2048, true), decode), batched, gemm_spec(problem, tall)}) {
      CAPTURE(backend.kernel_name(s));
      CHECK(backend.kernel_name(s).find("_persistent") == std::string::npos);
    }
  }

  TEST_CASE("generated source: the config's choices by name, no instruction; named after the tile; sm_90a only; N an argument") {
    const sm90::Tile t = sm90::bucket_tile(2880, 2880, 16, 132);
    const GemmSpec spec =
        sm90_spec(sm90_problem(2880, 2880, false, DType::bf16, DType::fp32, ScaleLayout::swizzled128x4, uint8_t(DType::bf16)), t);
    const GeneratedKernel g = generate(spec);
    // A bf16, D fp32, bias bf16, K, swizzled scales, the tile from its consumers on (the bucket's 16 rows)
    CHECK(g.source.find("ADT = 0, ODT = 2, BIAS = 1, LAYOUT = 1;") != std::string::npos);
    CHECK(g.source.find("K = 2880;") != std::string::npos);
    CHECK(g.source.find(fmt::format("WG = {}, BM = 16, BK = {}, STAGES = {}, KSPLIT = {}, KSLICES = {};", t.consumers, t.block_k,
                                    t.stages, t.split_k, t.k_slices)) != std::string::npos);
    CHECK(g.source.find("GROUPED = 0, GROUPS = 0, PERSISTENT = 0, EPILOGUE = 0;") != std::string::npos);
    CHECK(g.source.find("nvfp4k::sm90::gemm_w4a16<nvfp4k::sm90::GemmConfig<Choices>>(p)") != std::string::npos);
    CHECK(g.source.find("asm") == std::string::npos);  // the wgmma is sm90/wgmma.cuh's
    CHECK(g.source.find("#include \"sm90/gemm_w4a16.cuh\"") != std::string::npos);
    CHECK(g.name.find("nvfp4_gemm_w4a16_k2880_bf16_fp32_sw128x4_biasbf16_bm16") == 0);
    CHECK(g.name == sm90_backend().kernel_name(spec));
    // N is a run-time argument: every N of the K, tile and variant shares one kernel
    const GemmSpec kernel = sm90_backend().kernel_spec(spec);
    CHECK(kernel.n == 0);
    CHECK(kernel.k == 2880);
    GemmSpec other_n = spec, other_k = spec;
    other_n.n = 4096;
    other_k.k = 4096;
    CHECK(sm90_backend().kernel_spec(other_n) == kernel);
    CHECK(!(sm90_backend().kernel_spec(other_k) == kernel));
    CHECK(generate(kernel).source.find("K = 2880;") != std::string::npos);  // K compiled in
    GemmSpec other_tile = spec;
    other_tile.tile.stages = uint8_t(spec.tile.stages + 1);
    CHECK(!(sm90_backend().kernel_spec(other_tile) == kernel));
    CHECK(generate(sm90_spec(sm90_problem(2880, 2880, false, DType::fp16, DType::fp32), t)).source.find("ADT = 1, ODT = 2, ") !=
          std::string::npos);
    GemmSpec other_arch = spec;
    other_arch.arch = Arch::sm_100a;  // a W4A16 problem and a tile sm_100a's backend does not build
    CHECK_THROWS_AS(generate(other_arch), Error);
    CHECK(generate(sm90_spec(sm90_problem(2880, 2880, true), t)).name.find("nvfp4_gemm_w4a16_k2880_bf16_bf16_prepacked_bm16") == 0);
    // two k slices: named, and recovered from the spec (its thread count) for either producer
    sm90::Tile sliced = t;
    sliced.k_slices = 2;
    for (bool prepacked : {false, true}) {
      const GemmSpec s = sm90_spec(sm90_problem(2880, 2880, prepacked), sliced);
      CHECK(sm90::from_config(s.tile) == sliced);
      CHECK(sm90::from_config(sm90_spec(sm90_problem(2880, 2880, prepacked), t).tile) == t);
      CHECK(generate(s).name.find(fmt::format("_wg{}x2_", t.consumers)) != std::string::npos);
    }
    CHECK(sm90::describe(sliced).find(" wg1x2 ") != std::string::npos);
  }

  TEST_CASE("W4A4 in one launch: NVFP4 A in the spec, the kernel's name and its choices, with its scale layout") {
    const sm90::Tile t = sm90::bucket_tile(2880, 2880, 16, 132);
    const GemmSpec bf16 = sm90_spec(sm90_problem(2880, 2880), t);
    const GemmSpec linear = sm90_spec(gemm_fp4_problem(sm90_problem(2880, 2880), ScaleLayout::linear), t);
    const GemmSpec swizzled = sm90_spec(gemm_fp4_problem(sm90_problem(2880, 2880), ScaleLayout::swizzled128x4), t);
    const GemmBackend& backend = sm90_backend();
    CHECK(backend.decodes_fp4_activations());
    CHECK_FALSE(backend.native_fp4_activations());
    // three kernels: each activation type and scale layout its own
    CHECK(!(backend.kernel_spec(linear) == backend.kernel_spec(bf16)));
    CHECK(!(backend.kernel_spec(linear) == backend.kernel_spec(swizzled)));
    CHECK(gemm_decoded_a_problem(gemm_fp4_problem(sm90_problem(2880, 2880), ScaleLayout::swizzled128x4)) ==
          sm90_problem(2880, 2880));
    const GeneratedKernel g = generate(swizzled);
    CHECK(g.name.find("nvfp4_gemm_w4a4_k2880_nvfp4sw_bf16_linear_bm16") == 0);
    CHECK(generate(linear).name.find("nvfp4_gemm_w4a4_k2880_nvfp4_bf16_linear_bm16") == 0);
    // ADT DTYPE_NVFP4 and the A scales' layout
    CHECK(g.source.find("ADT = 3, ODT = 0, BIAS = 0, LAYOUT = 0;") != std::string::npos);
    CHECK(g.source.find("A_SCALES = 1, RMSNORM = 0, RESIDUAL = 0;") != std::string::npos);
    CHECK(generate(linear).source.find("A_SCALES = 0, RMSNORM = 0, RESIDUAL = 0;") != std::string::npos);
    // a grouped call decodes A first: its problem on NVFP4 A is none this backend runs
    for (uint16_t layout : {uint16_t(kFlagGroupedContiguous), uint16_t(kFlagGroupedMasked), uint16_t(kFlagGroupedBatched)}) {
      GemmSpec grouped = gemm_fp4_problem(sm90_problem(2880, 2880), ScaleLayout::linear);
      grouped.groups = 4;
      grouped.flags |= layout;
      CHECK(backend.unsupported(grouped).find("a grouped call decodes A first") != std::string::npos);
      grouped.a_dtype = uint8_t(DType::bf16);
      CHECK(backend.unsupported(grouped).empty());
    }
  }

  TEST_CASE("SASS of W4A4's one-launch kernels: the decode tiles, no local memory") {
    // the heuristic's tiles of M = 1 and 4 (k slices and split-K among them) on two shapes, both
    // weight layouts and both A scale layouts
    const GemmBackend& backend = sm90_backend();
    std::vector<GemmSpec> specs;
    for (bool prepacked : {false, true})
      for (ScaleLayout a : {ScaleLayout::linear, ScaleLayout::swizzled128x4}) {
        for (const auto& [n, k] : {std::pair<int64_t, int64_t>{7168, 2048}, {4096, 7168}}) {
          const GemmSpec dense = gemm_fp4_problem(sm90_problem(n, k, prepacked), a);
          for (int64_t rows : {1, 4})
            specs.push_back(gemm_spec(dense, backend.for_rows(backend.heuristic(dense, rows, 132), rows)));
        }
      }
    for_each_disassembled(specs, [](const GemmSpec& spec, const std::string& name, const std::string& text) {
      CAPTURE(gemm_key(spec).describe());
      CHECK(name.find("nvfp4_gemm_w4a4_") == 0);
      const Sass s = parse_sass(text, name, sm90_mma_mnemonic(spec));
      CHECK(s.matches > 0);
      CHECK(parse_sass(text, name, ".F32.BF16 ").matches == s.matches);  // BF16 MMAs on the decoded A
      CHECK(s.local_accesses == 0);
      const std::string source = generate(spec).source;
      const int ctas = source.find(fmt::format("__launch_bounds__({}, 3)", spec.tile.threads)) != std::string::npos   ? 3
                       : source.find(fmt::format("__launch_bounds__({}, 2)", spec.tile.threads)) != std::string::npos ? 2
                                                                                                                      : 1;
      CHECK(s.registers <= 65536 / (ctas * spec.tile.threads));
    });
  }

  TEST_CASE("the backend checks a given tile: three consumer warpgroups need a prepacked weight") {
    const sm90::Tile three{192, 3, 3, 1, 128};
    CHECK(sm90_backend().tile_problem(sm90_spec(sm90_problem(8192, 8192, false), three)).find("prepacked") != std::string::npos);
    CHECK(sm90_backend().tile_problem(sm90_spec(sm90_problem(8192, 8192, true), three)) == "");
    // three consumers only where the heuristic may take them: a prepacked weight, M = 513-576
    CHECK(sm90::bucket_tile(8192, 8192, 576, 132, true).consumers == 3);
    CHECK(sm90::bucket_tile(8192, 8192, 576, 132, false).consumers == 2);
    CHECK(sm90::bucket_tile(8192, 8192, 576, 132, true).block_m == 192);
  }
  TEST_CASE("grouped decode tile by the groups the rows reach: three consumers where their tiles fill the grid six times") {
    const GemmBackend& backend = sm90_backend();
    GemmSpec problem = sm90_problem(7168, 2048, true);  // DeepSeek-V3's down experts: 38 192-row tiles each
    problem.groups = 256;
    problem.flags |= kFlagGroupedContiguous;
    const int fill = 6 * 2 * 132;  // six tiles for each of two CTAs an SM
    auto consumers = [&](const GemmTile& t) { return sm90::from_config(t).consumers; };
    CHECK(41 * 38 < fill);
    CHECK(consumers(sm90::heuristic(problem, 1, 132, 41)) == 1);  // at three CTAs an SM
    CHECK(42 * 38 >= fill);
    const GemmTile wide = sm90::heuristic(problem, 1, 132, 42);
    CAPTURE(backend.describe(wide));
    CHECK(consumers(wide) == 3);
    CHECK(wide.block_m == 8);
    CHECK(generate(gemm_spec(problem, wide)).source.find("__launch_bounds__(512, 2)") != std::string::npos);
    CHECK(backend.tile_problem(gemm_spec(problem, wide)).empty());
    CHECK(backend.heuristic(problem, 1, 132) == wide);  // 0: all groups, the bucket's tile
    CHECK(sm90::heuristic(problem, 1, 132, 1000) == wide);
    CHECK(sm90::heuristic(problem, 8, 132, 256) == wide);
    // the call's rows bound the groups they reach: one token's 8 rows, 16 tokens' 128
    GroupedGemmArgs g;
    alignas(16) static unsigned char dummy[64];
    g.gemm.m = 8, g.gemm.n = problem.n, g.gemm.k = problem.k;
    g.gemm.a = g.gemm.b.data = g.gemm.d = dummy;
    g.gemm.b_prepacked = true;
    g.groups = 256, g.group_ends = reinterpret_cast<const int32_t*>(dummy);
    const GemmCall eight_rows = grouped_gemm_call(g, "test");
    CHECK(gemm_groups_reached(eight_rows) == 8);
    g.gemm.m = 128;
    const GemmCall many_rows = grouped_gemm_call(g, "test");
    CHECK(gemm_groups_reached(many_rows) == 128);
    g.gemm.m = 4096;
    CHECK(gemm_groups_reached(grouped_gemm_call(g, "test")) == 256);
    CHECK(gemm_groups_reached(gemm_call(g.gemm, "test")) == 0);  // dense
    // an untuned call and a tuned bucket whose winner is the heuristic's: the tile for its reach
    CHECK(consumers(gemm_tile_choice(backend, problem, nullptr, 1, 132, &eight_rows)) == 1);
    CHECK(gemm_tile_choice(backend, problem, nullptr, 1, 132, &many_rows) == wide);
    CHECK(consumers(gemm_tile_choice(backend, problem, &wide, 1, 132, &eight_rows)) == 1);
    CHECK(gemm_tile_choice(backend, problem, nullptr, 1, 132) == wide);  // no call: the bucket's
    CHECK(backend.call_heuristic(problem, eight_rows, 1, 132) == sm90::heuristic(problem, 1, 132, 8));
    CHECK(backend.heuristic_tiles(problem, 1, 132) == std::vector<GemmTile>{wide, sm90::heuristic(problem, 1, 132, 1)});
    // prewarm compiles both, and the tuner starts from the bucket's (all groups reached)
    const std::vector<GemmTile> bucket = gemm_bucket_tiles(backend, problem, 8, 132);
    CHECK(std::count(bucket.begin(), bucket.end(), wide) == 1);
    CHECK(std::count(bucket.begin(), bucket.end(), sm90::heuristic(problem, 1, 132, 8)) == 1);
    CHECK(backend.candidates(problem, 8, 132).front() == wide);
    // masked groups, a small weight (Qwen3-30B-A3B's 8 tiles an expert) and K past three CTAs'
    // 4096 keep their tiles
    GemmSpec masked = problem;
    masked.flags = (masked.flags & ~kFlagGroupedContiguous) | kFlagGroupedMasked;
    CHECK(consumers(sm90::heuristic(masked, 1, 132, 256)) == 1);
    GemmSpec small = sm90_problem(1536, 2048, true);
    small.groups = 128, small.flags |= kFlagGroupedContiguous;
    CHECK(consumers(sm90::heuristic(small, 1, 132, 128)) == 1);
    GemmSpec long_k = sm90_problem(4096, 7168, true);
    long_k.groups = 257, long_k.flags |= kFlagGroupedContiguous;
    CHECK(sm90::heuristic(long_k, 1, 132, 256) == sm90::heuristic(long_k, 1, 132, 8));
    CHECK(consumers(sm90::heuristic(long_k, 1, 132, 8)) == 2);
    // ... but past it, one token's 9 experts (DeepSeek-V3's 8 and the shared one): 9 x 32 tiles of
    // 128 rows take a second round of the 264 CTAs, 9 x 22 of 192 rows one: three consumers; 18
    // experts take three rounds of two consumers' tiles, and stay with two
    const GemmTile nine = sm90::heuristic(long_k, 1, 132, 9);
    CHECK(consumers(nine) == 3);
    CHECK(generate(gemm_spec(long_k, nine)).source.find("__launch_bounds__(512, 2)") != std::string::npos);
    CHECK(consumers(sm90::heuristic(long_k, 1, 132, 18)) == 2);
    // prewarm compiles the tile of every reach, not only the two ends'
    const std::vector<GemmTile> reach_tiles = backend.heuristic_tiles(long_k, 1, 132);
    CHECK(reach_tiles.size() == 2);
    CHECK(std::count(reach_tiles.begin(), reach_tiles.end(), nine) == 1);
    const std::vector<GemmTile> long_k_bucket = gemm_bucket_tiles(backend, long_k, 8, 132);
    CHECK(std::count(long_k_bucket.begin(), long_k_bucket.end(), nine) == 1);
  }

  TEST_CASE("grouped heuristic: one token's tile unsliced; past 16 rows per group the widest tiles, at most 192 high") {
    const GemmBackend& backend = sm90_backend();
    // a grouped grid runs unsplit (no grouped split-K): else the dense tile
    auto unsplit = [](sm90::Tile t) {
      t.split_k = 1;
      return t;
    };
    // the expert shapes of `bench grouped`: 256 or 128 experts
    for (auto [n, k, groups] : {std::tuple{4096, 7168, 256}, {7168, 2048, 256}, {1536, 2048, 128}, {5760, 2880, 128}})
      for (bool prepacked : {true, false}) {
        std::string line = fmt::format("N {} K {} G {} {}:", n, k, groups, prepacked ? "prepacked" : "linear");
        GemmSpec problem = sm90_problem(n, k, prepacked);
        problem.groups = groups;
        problem.flags |= kFlagGroupedContiguous;
        for (int bucket : {8, 16, 32, 64, 128, 192, 256, 320, 512}) {
          const sm90::Tile t = sm90::bucket_tile(n, k, bucket, 132, prepacked, groups);
          CAPTURE(line);
          CAPTURE(bucket);
          line += fmt::format(" {}:{}", bucket, sm90::describe(t));
          // the kernel that runs (persistent up to 64 rows, with its ring and partial sums) builds;
          // rows reaching one group (the tile for many is the next test case's)
          const GemmSpec runs = gemm_spec(problem, sm90::heuristic(problem, gemm_bucket_m(bucket), 132, 1));
          CAPTURE(backend.kernel_name(runs));
          CHECK(backend.tile_problem(runs) == "");
          CHECK(backend.shared_bytes(runs) <= 227u * 1024);
          if (bucket <= 16) {  // decode: four consumer warpgroups an SM (three at three CTAs), 256-deep stages
            const int ctas = bucket == 8 ? (prepacked && k <= 4096 ? 3 : 2) : prepacked ? 2 : 1;
            CHECK(t.block_k == 256);
            CHECK(t.consumers == (ctas == 3 ? 1 : 2));
            CHECK(t.k_slices == (ctas == 1 ? 2 : 1));
            const std::string bounds = ctas == 1 ? fmt::format("__launch_bounds__({})", runs.tile.threads)
                                                 : fmt::format("__launch_bounds__({}, {})", runs.tile.threads, ctas);
            CHECK(generate(runs).source.find(bounds) != std::string::npos);
          }
          if (bucket > 16) {
            CHECK(t.split_k == 1);
            CHECK(t.consumers == (prepacked ? 3 : 2));
            // as many row tiles as the bucket's rows need, each as high as they hold
            const int tiles = (bucket + 191) / 192;
            CHECK(t.block_m == ((bucket + tiles - 1) / tiles + 15) / 16 * 16);
          }
          if (bucket > 16 && bucket <= 64) CHECK(t.k_slices == (prepacked ? 1 : 2));
        }
        MESSAGE(line);
      }
    // one weight's decode with two k slices: stages for half the unsplit tile's k-tiles (gpt-oss's
    // expert, 12 k-tiles: 6, not the 4 of a split)
    CHECK(sm90::bucket_tile(5760, 2880, 8, 132, true).k_slices == 2);
    CHECK(sm90::bucket_tile(5760, 2880, 8, 132, true).stages == 6);
    // expected_m 160 (DeepSeek-V3 at 4096 tokens): one tile of 160 rows, not two of 128
    CHECK(sm90::heuristic_tile(7168, 2048, 160, 132, true, 256).block_m == 160);
    CHECK(sm90::heuristic_tile(7168, 2048, 320, 132, true, 256).block_m == 160);
    // few groups leave SMs idle (the batched wo_a: 8 groups of 1536 rows): up to 128 rows the
    // dense choice; past it the cost model's, which counts all eight groups' tiles and never splits
    for (int bucket : {8, 16, 32})
      CHECK(sm90::bucket_tile(1536, 8192, bucket, 132, true, 8) == unsplit(sm90::bucket_tile(1536, 8192, bucket, 132, true)));
    CHECK(sm90::bucket_tile(1536, 8192, 512, 132, true).split_k == 2);  // one group of 1536 rows: split
    CHECK(sm90::bucket_tile(1536, 8192, 512, 132, true, 8).split_k == 1);
  }

  TEST_CASE("candidates: the heuristic's tile first, every candidate buildable, no duplicates") {
    for (int bucket : kGemmMBuckets)
      for (int64_t n : {8, 2880, 8192, 28672})
        for (int64_t k : {32, 2880, 8192, 14336}) {
          CAPTURE(bucket);
          CAPTURE(n);
          CAPTURE(k);
          const std::vector<sm90::Tile> c = to_tiles(sm90_backend().candidates(sm90_problem(n, k), bucket, 132));
          REQUIRE(!c.empty());
          CHECK(c[0] == sm90::bucket_tile(n, k, bucket, 132));
          for (size_t i = 0; i < c.size(); ++i) {
            CHECK(sm90::tile_problem(c[i], k) == "");
            for (size_t j = 0; j < i; ++j) CHECK_FALSE(c[i] == c[j]);
          }
        }
    // a decode bucket on a long K has the whole space: 2 depths x 2 stage counts x 3 splits
    CHECK(sm90::candidate_tiles(8192, 8192, 8, 132, false).size() >= 10);
  }

  TEST_CASE("tiles the kernel cannot run are rejected with the reason") {
    sm90::Tile t{256, 2, 8, 1, 128};
    CHECK(sm90::tile_problem(t, 8192).find("shared memory") != std::string::npos);
    t = {8, 1, 4, 4, 256};
    CHECK(sm90::tile_problem(t, 1024).find("split") != std::string::npos);  // 4 k-tiles over 4 splits
    t = {8, 1, 4, 3, 256};
    CHECK(sm90::tile_problem(t, 8192).find("split_k 3") != std::string::npos);
    t = {12, 1, 4, 1, 256};
    CHECK(sm90::tile_problem(t, 8192).find("block_m") != std::string::npos);
    t = {8, 1, 4, 1, 64};
    CHECK(sm90::tile_problem(t, 8192).find("block_k") != std::string::npos);
    t = {128, 1, 4, 1, 128};
    t.k_slices = 2;  // 640 threads cannot hold 64 accumulators each and the decode
    CHECK(sm90::tile_problem(t, 8192).find("2 k slices at block_m 128") != std::string::npos);
    t.block_m = 64;
    CHECK(sm90::tile_problem(t, 8192) == "");
  }

}
