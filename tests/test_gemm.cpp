// gemm without a GPU: argument checks with their messages, M buckets and the heuristic, the
// generated source, the exact weight-operand encoding the kernel relies on.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/mma_operand.cuh"
#include "common/nvfp4_format.cuh"
#include "core/codegen.hpp"
#include "core/error.hpp"
#include "core/kernel_store.hpp"
#include "core/op_registry.hpp"
#include "core/prewarm.hpp"
#include "core/tensor_map.hpp"
#include "ops/dequantize_op.hpp"
#include "gemm_test_util.hpp"
#include "ops/gemm/gemm.hpp"
#include "ops/gemm/m_buckets.hpp"
#include "ops/gemm/schedule.hpp"
#include "ops/prepack_op.hpp"
#include "sm90/gemm_params.cuh"

using namespace nvfp4::jit;
using namespace nvfp4::jit::detail;
using namespace nvfp4::jit::detail::test;

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
    if (e.status() == Status::cuda_error || e.status() == Status::no_device) return "";
    return e.what();
  }
  return "";
}

// The same for grouped_gemm.
std::string error_of_grouped(const GroupedGemmArgs& g) {
  try {
    grouped_gemm(g, nullptr);
  } catch (const Error& e) {
    return e.status() == Status::cuda_error || e.status() == Status::no_device ? "" : e.what();
  }
  return "";
}

void check_error(const GemmArgs& g, const std::string& part) {
  const std::string msg = error_of(g);
  CAPTURE(msg);
  CHECK(msg.find("nvfp4::jit::gemm: ") == 0);
  CHECK(msg.find(part) != std::string::npos);
}

// The tensor maps `arch`'s backend lists for `call` (on its heuristic's tile, 132 SMs), each
// checked to land inside the parameter block.
std::vector<TensorMapKey> bound_maps(Arch arch, const GemmCall& call) {
  const GemmBackend& backend = gemm_backend(arch, "test");
  const GemmSpec problem = gemm_problem_on(arch, call);
  const GemmPlan plan =
      backend.plan(gemm_spec(problem, backend.heuristic(problem, gemm_tile_rows(call), 132)), call.args.m, 132);
  alignas(64) unsigned char params[GemmPlan::kMaxParamBytes];
  std::memcpy(params, plan.params, sizeof params);
  TensorMapList maps;
  backend.bind(plan, call, params, maps);
  std::vector<TensorMapKey> keys;
  for (const TensorMapList::Entry& e : maps) {
    const auto* at = static_cast<unsigned char*>(e.to);
    CHECK((at >= params && at + sizeof(CUtensorMap) <= params + sizeof params));
    keys.push_back(e.key);
  }
  return keys;
}

// The key of the map at `base` among `keys` (one is expected).
TensorMapKey map_at(const std::vector<TensorMapKey>& keys, const void* base) {
  const auto it = std::find_if(keys.begin(), keys.end(), [&](const TensorMapKey& k) { return k.base == base; });
  REQUIRE_MESSAGE(it != keys.end(), "no tensor map at " << base);
  return *it;
}

void* at(uintptr_t address) { return reinterpret_cast<void*>(address); }

}  // namespace

TEST_SUITE("gemm") {
  TEST_CASE("a warm call's tensor maps are keyed by what they encode: the same weights share one, another shape does not") {
    struct Backend {
      Arch arch;
      DType a;
    };
    for (const Backend& backend : {Backend{Arch::sm_90a, DType::bf16}, Backend{Arch::sm_100a, DType::nvfp4}}) {
      CAPTURE(to_string(backend.arch));
      const bool fp4 = backend.a == DType::nvfp4;
      auto args = [&](const void* a, int64_t n, int64_t k, int64_t b_stride = 0) {
        GemmArgs g;
        g.m = 16, g.n = n, g.k = k;
        g.a_dtype = backend.a;
        if (fp4)
          g.a_fp4.data = a, g.a_fp4.scales = at(0x5000000);
        else
          g.a = a;
        g.b.data = at(0x1000000), g.b.scales = at(0x2000000), g.b.row_stride_bytes = b_stride;
        g.d = at(0x3000000);
        return g;
      };
      const GemmCall first = gemm_call(args(at(0x4000000), 4096, 4096), "test");
      const std::vector<TensorMapKey> keys = bound_maps(backend.arch, first);
      const TensorMapKey w = map_at(keys, at(0x1000000));
      CHECK(w.type == CU_TENSOR_MAP_DATA_TYPE_UINT8);
      CHECK(w.dims[0] == 2048);  // packed bytes of a row
      CHECK(w.dims[1] == 4096);  // n rows
      CHECK(w.strides[0] == 2048);
      CHECK(map_at(keys, at(0x4000000)).dims[1] == 16);  // A: m rows

      // the next layer's activations, the same weights: the weight's key, A's another
      const std::vector<TensorMapKey> next = bound_maps(backend.arch, gemm_call(args(at(0x6000000), 4096, 4096), "test"));
      CHECK(map_at(next, at(0x1000000)) == w);
      CHECK(map_at(next, at(0x6000000)).base == at(0x6000000));

      // weights at the same address with other rows, row length or row stride: other keys
      const TensorMapKey more_rows = map_at(bound_maps(backend.arch, gemm_call(args(at(0x4000000), 8192, 4096), "test")), at(0x1000000));
      CHECK(more_rows.dims[1] == 8192);
      CHECK(!(more_rows == w));
      const TensorMapKey shorter = map_at(bound_maps(backend.arch, gemm_call(args(at(0x4000000), 4096, 2048), "test")), at(0x1000000));
      CHECK(shorter.dims[0] == 1024);
      CHECK(!(shorter == w));
      const TensorMapKey strided =
          map_at(bound_maps(backend.arch, gemm_call(args(at(0x4000000), 4096, 4096, 4096), "test")), at(0x1000000));
      CHECK(strided.strides[0] == 4096);
      CHECK(!(strided == w));
    }
  }

  TEST_CASE("a grouped call's weight map spans every expert's rows, and another expert count is another key") {
    auto grouped = [](int32_t groups) {
      GroupedGemmArgs g;
      g.groups = groups;
      g.gemm.m = 64, g.gemm.n = 512, g.gemm.k = 1024;
      g.gemm.a = at(0x4000000);
      g.gemm.b.data = at(0x1000000), g.gemm.b.scales = at(0x2000000);
      g.gemm.d = at(0x3000000);
      g.group_ends = static_cast<const int32_t*>(at(0x7000000));
      return grouped_gemm_call(g, "test");
    };
    const TensorMapKey eight = map_at(bound_maps(Arch::sm_90a, grouped(8)), at(0x1000000));
    CHECK(eight.dims[1] == 8 * 512);
    const TensorMapKey sixteen = map_at(bound_maps(Arch::sm_90a, grouped(16)), at(0x1000000));
    CHECK(sixteen.dims[1] == 16 * 512);
    CHECK(!(eight == sixteen));
  }

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
    w4a4.m = kW4A4OneLaunchRows;  // W4A4 in one launch on sm_90a
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
    // (past kW4A4OneLaunchRows rows: A decoded into the workspace; up to there one launch reads none)
    g = w4a4, g.m = 40, g.workspace = buffer, g.workspace_bytes = 100;
    check_error(g, "workspace_bytes = 100 is less than the");
    g = w4a4, g.m = 40, g.workspace = buffer + 8, g.workspace_bytes = 1 << 20;
    check_error(g, "workspace = ");
    g = w4a4, g.workspace = buffer + 8, g.workspace_bytes = 100;
    CHECK(error_of(g) == "");
    CHECK(error_of(w4a4) == "");
    CHECK(gemm_workspace_bytes(w4a4) == 0);
    g = w4a4, g.m = 40;
    CHECK(gemm_workspace_bytes(g) == 40 * w4a4.k * 2);
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

  TEST_CASE("sizes whose byte offsets pass 64 bits are refused, naming the argument; the size helpers check what the call does") {
    GemmArgs g = valid();
    g.m = INT64_MAX;
    check_error(g, "a: m = 9223372036854775807 rows of a_row_stride = 256");
    g = valid(), g.m = 1, g.d_row_stride = INT64_MAX;
    check_error(g, "d: m = 1 rows of d_row_stride = 9223372036854775807");
    g = valid(), g.m = 1, g.d_dtype = DType::fp32, g.d_row_stride = int64_t(1) << 61;  // 2^61 fp32 elements: 2^63 bytes
    check_error(g, "d_row_stride = 2305843009213693952");
    g = valid(), g.b.row_stride_bytes = int64_t(1) << 58;
    check_error(g, "b.data: n = 64 rows of b.row_stride_bytes = 288230376151711744");
    GemmArgs w4a4 = valid();
    w4a4.a = nullptr, w4a4.a_dtype = DType::nvfp4;
    w4a4.a_fp4.data = buffer, w4a4.a_fp4.scales = buffer;
    g = w4a4, g.a_fp4.row_stride_bytes = int64_t(1) << 62;
    check_error(g, "a_fp4.data: m = 7 rows of a_fp4.row_stride_bytes = 4611686018427387904");
    // the size helper: every argument but the buffers, as the call checks them
    g = valid(), g.a_dtype = DType(77);
    CHECK_THROWS_WITH_AS(gemm_workspace_bytes(g), doctest::Contains("gemm_workspace_bytes: a_dtype = 77"), Error);
    g = valid(), g.n = -5;
    CHECK_THROWS_WITH_AS(gemm_workspace_bytes(g), doctest::Contains("n = -5 must be positive"), Error);
    g = valid(), g.m = INT64_MAX;
    CHECK_THROWS_WITH_AS(gemm_workspace_bytes(g), doctest::Contains("m = 9223372036854775807"), Error);
    g = w4a4, g.m = 40, g.a_fp4.data = nullptr, g.a_fp4.scales = nullptr;  // asked before the buffers exist
    CHECK(gemm_workspace_bytes(g) == 40 * 256 * 2);
    g = w4a4, g.m = 40, g.workspace = buffer, g.workspace_bytes = 0;  // the size it asks for is not yet given
    CHECK(gemm_workspace_bytes(g) == 40 * 256 * 2);
    g = w4a4, g.m = 40, g.a_fp4.global_scale.per_row = true;  // its per-row scale's buffer not made yet either
    CHECK(gemm_workspace_bytes(g) == 40 * 256 * 2);

    // grouped: all groups' weights and rows; batched group strides (their default row strides too)
    GroupedGemmArgs b;
    b.gemm = valid();
    b.gemm.a_row_stride = b.gemm.d_row_stride = 0;
    b.groups = 4;
    b.layout = GroupedLayout::batched;
    CHECK(error_of_grouped(b) == "");
    GroupedGemmArgs h = b;
    h.d_group_stride = int64_t(1) << 62;  // groups * d_group_stride, the default row stride, overflows
    CHECK(error_of_grouped(h).find("groups * d_group_stride does not fit in 64 bits") != std::string::npos);
    h = b, h.gemm.d_row_stride = 4 * 64, h.d_group_stride = int64_t(1) << 61;  // [m, groups, n] rows cannot hold it
    CHECK(error_of_grouped(h).find("d_group_stride = 2305843009213693952") != std::string::npos);
    h = b, h.gemm.a_row_stride = 256, h.a_group_stride = int64_t(1) << 61;  // [groups, m, k]: 2^63 bytes of BF16
    CHECK(error_of_grouped(h).find("a: groups = 4 rows of a_group_stride = 2305843009213693952") != std::string::npos);
    h = b, h.layout = GroupedLayout::contiguous, h.groups = 1 << 20, h.gemm.b.row_stride_bytes = int64_t(1) << 40;
    static int32_t ends[1 << 4] = {};
    h.group_ends = ends;
    CHECK(error_of_grouped(h).find("b.data: groups * n = 67108864 rows of b.row_stride_bytes = 1099511627776") !=
          std::string::npos);
    h = b, h.layout = GroupedLayout(0);
    CHECK_THROWS_WITH_AS(grouped_gemm_workspace_bytes(h), doctest::Contains("layout = 0 is not a GroupedLayout"), Error);
  }

  TEST_CASE("M buckets") {
    CHECK(gemm_m_bucket(1) == 8);
    CHECK(gemm_m_bucket(8) == 8);
    CHECK(gemm_m_bucket(9) == 16);
    CHECK(gemm_m_bucket(129) == 192);
    CHECK(gemm_m_bucket(256) == 256);
    CHECK(gemm_m_bucket(257) == 320);
    CHECK(gemm_m_bucket(2048) == 2048);
    CHECK(gemm_m_bucket(2049) == kGemmLargeM);
    CHECK(gemm_m_bucket(100000) == kGemmLargeM);
    for (int bucket : kGemmMBuckets) {
      const auto [first, last] = gemm_bucket_rows(bucket);
      CAPTURE(bucket);
      CHECK(gemm_m_bucket(first) == bucket);
      CHECK(gemm_m_bucket(last) == bucket);
      CHECK((first == 1 || gemm_m_bucket(first - 1) != bucket));
      CHECK(gemm_bucket_m(bucket) <= last);
    }
  }

  TEST_CASE("grouped default expected_m: 1.25 x the mean rows per group, from 6 to 128 a power of two (at least 16); then mean + 2.5 sqrt(mean)") {
    CHECK(grouped_default_expected_m(8, 256) == 1);          // decode: fewer rows than groups
    CHECK(grouped_default_expected_m(128, 256) == 1);
    CHECK(grouped_default_expected_m(1024, 256) == 5);       // under 6: as it is
    CHECK(grouped_default_expected_m(1280, 256) == 16);      // mean 5: 6 -> 16
    CHECK(grouped_default_expected_m(1536, 256) == 16);      // mean 6 (DeepSeek-V3, 192 tokens): 7 -> 16
    CHECK(grouped_default_expected_m(1024, 128) == 16);      // mean 8: 10 -> 16
    CHECK(grouped_default_expected_m(4096, 256) == 32);      // mean 16: 20 -> 32
    CHECK(grouped_default_expected_m(4096, 128) == 64);      // mean 32: 40 -> 64
    CHECK(grouped_default_expected_m(10240, 128) == 128);    // mean 80: 100 -> 128
    CHECK(grouped_default_expected_m(32768, 256) == 157);    // mean 128 (DeepSeek-V3, 4096 tokens): one 160-row tile
    CHECK(grouped_default_expected_m(32768, 128) == 296);    // mean 256: two tiles of 160
    CHECK(grouped_default_expected_m(131072, 256) == 569);   // mean 512: three tiles of 192, not four of 160
    CHECK(grouped_default_expected_m(131072, 128) == 1104);  // mean 1024: six of 192, not seven
    for (int64_t m = 1; m < 30000; m += 7) {
      const int64_t e = grouped_default_expected_m(m, 64), rows = std::max<int64_t>(1, (m + m / 4) / 64);
      const double mean = double(m) / 64;
      CAPTURE(m);
      CHECK(e >= 1);
      if (rows < 6) CHECK(e == rows);
      else if (rows <= 128) CHECK((e >= 16 && e <= 128 && (e & (e - 1)) == 0 && e >= rows));
      else CHECK((e >= mean + 2.5 * std::sqrt(mean) && e < mean + 2.5 * std::sqrt(mean) + 1 && e >= 128));
    }
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

  TEST_CASE("prewarm of a weight shape holds every kernel a W4A16 or W4A4 gemm of it loads") {
    const std::vector<KernelSpec> specs = prewarm_specs({every_layout(2880, 4096)}, {Arch::sm_90a}, 132);
    auto has = [&](const auto& spec) { return std::find(specs.begin(), specs.end(), key_of(spec)) != specs.end(); };
    CHECK(has(prepack_spec(Arch::sm_90a, 4096, ScaleLayout::linear)));
    for (bool prepacked : {false, true})
      for (ScaleLayout layout : {ScaleLayout::linear, ScaleLayout::swizzled128x4}) {
        if (!prepacked) CHECK(has(dequantize_spec(Arch::sm_90a, 4096, DType::bf16, layout)));  // W4A4's decode of A
        const GemmSpec problem = sm90_problem(2880, 4096, prepacked, DType::bf16, DType::bf16, layout);
        for (int64_t m = 1; m <= 17000; m += m < 3000 ? 1 : 13)
          if (!has(gemm_kernel_spec(sm90_backend(), problem, gemm_tile_choice(sm90_backend(), problem, nullptr, m, 132)))) {
            FAIL_CHECK(fmt::format("m = {} prepacked = {}: its kernel is not prewarmed", m, prepacked));
            break;
          }
      }
    // nothing but the buckets' tiles, for two layouts as stored and one prepacked; W4A4's own
    // kernels (NVFP4 A) in the buckets that run it in one launch, the BF16 ones past them
    std::vector<GemmSpec> bucket_specs;
    for (int bucket : kGemmMBuckets)
      for (DType a : {DType::bf16, DType::nvfp4})
        for (bool prepacked : {false, true})
          for (ScaleLayout layout : {ScaleLayout::linear, ScaleLayout::swizzled128x4}) {
            if (prepacked && layout != ScaleLayout::linear) continue;
            if (a == DType::nvfp4 && !w4a4_runs_one_launch(false, gemm_bucket_rows(bucket).first, 4096)) continue;
            GemmSpec problem = sm90_problem(4096, 4096, prepacked, DType::bf16, DType::bf16, layout);
            if (a == DType::nvfp4) problem = gemm_fp4_problem(problem, ScaleLayout::linear);
            for (const GemmTile& t : gemm_bucket_tiles(sm90_backend(), problem, bucket, 132))
              if (const GemmSpec s = gemm_kernel_spec(sm90_backend(), problem, t);
                  std::find(bucket_specs.begin(), bucket_specs.end(), s) == bucket_specs.end())
                bucket_specs.push_back(s);
          }
    CHECK(gemm_prewarm(Arch::sm_90a, 4096, 4096) == bucket_specs);
    for (const GemmSpec& s : gemm_prewarm(Arch::sm_100a, 4096, 4096))
      CHECK(s.a_dtype == uint8_t(DType::nvfp4));  // its backend takes W4A4 only
    // by default, ModelOpt's layout as stored and prepacked (Nvfp4Linear's): those two problems'
    // tiles (and W4A4's on NVFP4 A in its one-launch buckets), each once, and nothing else (no
    // swizzled weight scales)
    const std::vector<GemmSpec> default_specs = gemm_specs_of(prewarm_specs({parse_shape("4096,4096")}, {Arch::sm_90a}, 132));
    std::vector<GemmSpec> want;
    for (const bool prepacked : {false, true}) {
      const GemmSpec problem = sm90_problem(4096, 4096, prepacked);
      for (int bucket : kGemmMBuckets)
        for (const GemmTile& t : gemm_bucket_tiles(sm90_backend(), problem, bucket, 132))
          if (const GemmSpec s = gemm_kernel_spec(sm90_backend(), problem, t); std::find(want.begin(), want.end(), s) == want.end())
            want.push_back(s);
      const GemmSpec fp4 = gemm_fp4_problem(problem, ScaleLayout::linear);  // W4A4 in one launch
      for (int bucket : kGemmMBuckets)
        if (w4a4_runs_one_launch(false, gemm_bucket_rows(bucket).first, problem.k))
          for (const GemmTile& t : gemm_bucket_tiles(sm90_backend(), fp4, bucket, 132))
            if (const GemmSpec s = gemm_kernel_spec(sm90_backend(), fp4, t); std::find(want.begin(), want.end(), s) == want.end())
              want.push_back(s);
    }
    CHECK(default_specs.size() == want.size());
    for (const GemmSpec& s : want) {
      INFO("default prewarm of 4096 x 4096 on sm_90a lacks ", gemm_key(s).describe());
      CHECK(std::find(default_specs.begin(), default_specs.end(), s) != default_specs.end());
    }
  }

  TEST_CASE("sm_90a shapes share their kernels: a prewarm of two holds every kernel either loads, each once") {
    const std::vector<std::pair<int64_t, int64_t>> shapes{{4096, 4096}, {4096, 14336}, {28672, 4096}};
    std::vector<WeightShape> weights;
    for (auto [n, k] : shapes) weights.push_back(WeightShape{"", n, k, 1, {}});
    const std::vector<GemmSpec> gemm = gemm_specs_of(prewarm_specs(weights, {Arch::sm_90a}, 132));
    std::vector<GemmSpec> separately;
    for (auto [n, k] : shapes)
      for (const GemmSpec& s : gemm_specs_of(prewarm_specs({WeightShape{"", n, k, 1, {}}}, {Arch::sm_90a}, 132)))
        separately.push_back(s);
    CHECK(gemm.size() < separately.size());  // tiles the shapes share are compiled once
    for (const GemmSpec& s : separately) CHECK(std::find(gemm.begin(), gemm.end(), s) != gemm.end());
    for (auto [n, k] : shapes) {
      const GemmSpec problem = sm90_problem(n, k, false);
      for (int64_t m = 1; m <= 17000; m += m < 3000 ? 1 : 13)
        if (std::find(gemm.begin(), gemm.end(),
                      gemm_kernel_spec(sm90_backend(), problem, gemm_tile_choice(sm90_backend(), problem, nullptr, m, 132))) ==
            gemm.end()) {
          FAIL_CHECK(fmt::format("{} x {}, m = {}: its kernel is not prewarmed", n, k, m));
          break;
        }
    }
  }

  TEST_CASE("prewarm of a grouped weight holds the grouped kernel of every rows-per-group bucket") {
    const std::vector<KernelSpec> specs = prewarm_specs({every_layout(1536, 2048, 128)}, {Arch::sm_90a}, 132);
    auto has = [&](const auto& spec) { return std::find(specs.begin(), specs.end(), key_of(spec)) != specs.end(); };
    GemmSpec problem = sm90_problem(1536, 2048, true);
    problem.groups = 128;
    problem.flags |= kFlagGroupedContiguous;
    for (int64_t rows_per_group = 1; rows_per_group <= 3000; ++rows_per_group) {
      const GemmSpec spec =
          gemm_kernel_spec(sm90_backend(), problem, gemm_tile_choice(sm90_backend(), problem, nullptr, rows_per_group, 132));
      CHECK(spec.tile.split_k == 1);
      if (!has(spec)) {
        FAIL_CHECK(fmt::format("{} rows per group: its kernel is not prewarmed", rows_per_group));
        break;
      }
    }
  }

  TEST_CASE("the tile scheduler visits every output tile once, whole clusters first, and splits K exactly") {
    for (int split_k : {1, 2, 4})
      for (int64_t m : {1, 7, 100, 257, 1000, 5000})
        for (int64_t n : {64, 1000, 8192}) {
          const int block_m = 128, block_n = 128;
          const GemmGrid grid = gemm_grid(m, n, 4096, block_m, block_n, split_k, 132);
          const int n_tiles = int((n + block_n - 1) / block_n), k_tiles = 32;
          std::vector<int> covered(size_t(grid.schedule.m_tiles) * n_tiles, 0);  // k-tiles per output tile
          std::vector<int64_t> rows(size_t(grid.schedule.m_tiles), 0);
          auto visit = [&](auto n_tiles_c) {
            constexpr int N_TILES = decltype(n_tiles_c)::value;
            for (int c = 0; c < int(grid.clusters); ++c)
              for (unsigned rank = 0; rank < unsigned(split_k); ++rank) {
                const nvfp4k::ScheduledTile t =
                    split_k == 1 ? nvfp4k::schedule_tile<N_TILES, 1, 32>(grid.schedule, c, rank)
                    : split_k == 2 ? nvfp4k::schedule_tile<N_TILES, 2, 32>(grid.schedule, c, rank)
                                   : nvfp4k::schedule_tile<N_TILES, 4, 32>(grid.schedule, c, rank);
                if (split_k == 1 && rank) continue;
                REQUIRE(t.m_tile < grid.schedule.m_tiles);
                REQUIRE(t.n_tile < N_TILES);
                covered[size_t(t.m_tile) * N_TILES + t.n_tile] += t.kt_end - t.kt_begin;
                rows[size_t(t.m_tile)] = t.m_end - t.m0;
                CHECK(t.split == (split_k > 1 && c >= grid.schedule.whole_clusters));
              }
          };
          if (n_tiles == 1) visit(std::integral_constant<int, 1>{});
          else if (n_tiles == 8) visit(std::integral_constant<int, 8>{});
          else visit(std::integral_constant<int, 64>{});
          CAPTURE(split_k);
          CAPTURE(m);
          CAPTURE(n);
          for (size_t i = 0; i < covered.size(); ++i)
            if (covered[i] != k_tiles) {
              FAIL_CHECK(fmt::format("output tile {} got {} k-tiles, not {}", i, covered[i], k_tiles));
              break;
            }
          int64_t total = 0;
          for (int64_t r : rows) total += r;
          CHECK(total == m);
        }
  }

  TEST_CASE("grouped: bad arguments fail with a message naming the argument") {
    static int32_t ends[4] = {1, 2, 3, 4};
    auto grouped = [] {
      GroupedGemmArgs g;
      g.gemm = valid();
      g.groups = 4;
      g.group_ends = ends;
      return g;
    };
    auto check_grouped = [&](const GroupedGemmArgs& g, const std::string& part) {
      const std::string msg = error_of_grouped(g);
      CAPTURE(msg);
      CHECK(msg.find("nvfp4::jit::grouped_gemm: ") == 0);
      CHECK(msg.find(part) != std::string::npos);
    };
    CHECK(error_of_grouped(grouped()) == "");
    GroupedGemmArgs g = grouped();
    g.groups = 0;
    check_grouped(g, "groups = 0 must be positive");
    g = grouped(), g.layout = GroupedLayout(7);
    check_grouped(g, "layout = 7 is not a GroupedLayout");
    g = grouped(), g.group_ends = nullptr;
    check_grouped(g, "group_ends is null");
    g = grouped(), g.layout = GroupedLayout::masked;
    check_grouped(g, "masked_m is null");
    g = grouped(), g.group_ends = reinterpret_cast<const int32_t*>(buffer + 2);
    check_grouped(g, "group_ends = ");
    g = grouped(), g.expected_m = -1;
    check_grouped(g, "expected_m = -1 is negative");
    g = grouped(), g.gemm.k = 48;
    check_grouped(g, "k = 48 must be a positive multiple of 32");
    g = grouped(), g.layout = GroupedLayout::masked, g.masked_m = ends, g.gemm.m = int64_t(1) << 30;
    check_grouped(g, "rows in each of 4 groups");
    // per-group global scales: a grouped weight's, never a dense one's
    g = grouped(), g.gemm.b.global_scale = {1.0f, reinterpret_cast<const float*>(buffer), true};
    CHECK(error_of_grouped(g) == "");
    GemmArgs dense = valid();
    dense.b.global_scale = g.gemm.b.global_scale;
    check_error(dense, "b.global_scale.per_row is not supported");
    // A's global scale per group: W4A4's, on the device
    g = grouped(), g.a_global_scale_per_group = true;
    check_grouped(g, "a_global_scale_per_group is set but gemm.a_dtype is not nvfp4");
    g = grouped(), g.gemm.a = nullptr, g.gemm.a_dtype = DType::nvfp4, g.a_global_scale_per_group = true;
    g.gemm.a_fp4 = {buffer, 0, buffer, ScaleLayout::linear, {0.5f, nullptr, false}};
    check_grouped(g, "a_global_scale_per_group needs gemm.a_fp4.global_scale.device_ptr");
    g.gemm.a_fp4.global_scale = {1.0f, reinterpret_cast<const float*>(buffer), false};
    CHECK(error_of_grouped(g) == "");
    // A's rows through row_index: contiguous W4A4, the tokens' row count given
    g.row_index = ends, g.a_rows = 3;
    CHECK(error_of_grouped(g) == "");
    GroupedGemmArgs h = g;
    h.a_rows = 0;
    check_grouped(h, "a_rows = 0 must be positive");
    h = g, h.gemm.a_fp4.global_scale.per_row = true, h.a_global_scale_per_group = false;
    check_grouped(h, "gemm.a_fp4.global_scale.per_row with row_index");
    h = g, h.row_index = reinterpret_cast<const int32_t*>(buffer + 2);
    check_grouped(h, "row_index = ");
    h = g, h.layout = GroupedLayout::masked, h.masked_m = ends;
    check_grouped(h, "row_index is for the contiguous layout");
    h = grouped(), h.row_index = ends, h.a_rows = 3;  // W4A16 gathers too
    CHECK(error_of_grouped(h) == "");
    // W4A4's workspace counts every group's rows (a grouped call decodes A first, however few)
    g = grouped(), g.layout = GroupedLayout::masked, g.masked_m = ends, g.gemm.a = nullptr, g.gemm.a_dtype = DType::nvfp4;
    g.gemm.m = 1;
    CHECK(grouped_gemm_workspace_bytes(g) == 4 * g.gemm.k * 2);
    // batched: every row to every group, strides in elements, no group sizes on the device
    auto batched = [] {
      GroupedGemmArgs b;
      b.gemm = valid();
      b.gemm.a_row_stride = b.gemm.d_row_stride = 0;
      b.groups = 4;
      b.layout = GroupedLayout::batched;
      return b;
    };
    CHECK(error_of_grouped(batched()) == "");
    g = batched(), g.a_group_stride = 12;
    check_grouped(g, "a_group_stride = 12 must be a multiple of 8");
    g = batched(), g.d_group_stride = -1;
    check_grouped(g, "d_group_stride = -1 is negative");
    g = batched(), g.d_group_stride = g.gemm.n, g.gemm.d_row_stride = g.gemm.n;
    check_grouped(g, "makes rows of D overlap");
    g = batched(), g.a_group_stride = g.gemm.m * g.gemm.k, g.gemm.a_row_stride = g.gemm.k;  // [groups, m, k]
    g.d_group_stride = g.gemm.m * g.gemm.n, g.gemm.d_row_stride = g.gemm.n;
    CHECK(error_of_grouped(g) == "");
    g = grouped(), g.a_group_stride = 8;
    check_grouped(g, "group strides are for the batched layout only");
    g = batched(), g.gemm.a = nullptr, g.gemm.a_dtype = DType::nvfp4, g.a_group_stride = 8;
    g.gemm.a_fp4 = {buffer, 0, buffer, ScaleLayout::linear, {0.5f, nullptr, false}};
    check_grouped(g, "a_group_stride is for BF16/FP16 A");
    g.a_group_stride = 0;
    CHECK(error_of_grouped(g) == "");
    CHECK(grouped_gemm_workspace_bytes(g) == 4 * g.gemm.m * g.gemm.k * 2);
  }

  TEST_CASE("the SwiGLU epilogue's NVFP4 D: d_fp4 checked naming the argument; kernels of their own on every arch") {
    GemmArgs fused = valid();
    fused.n = 128, fused.b_prepacked = true, fused.b.scales = nullptr, fused.epilogue = GemmEpilogue::swiglu;
    fused.d = nullptr, fused.d_dtype = DType::nvfp4, fused.d_fp4.data = buffer, fused.d_fp4.scales = buffer;
    CHECK(error_of(fused) == "");
    GemmArgs g = fused;
    g.epilogue = GemmEpilogue::none;
    check_error(g, "d_dtype = nvfp4 is the SwiGLU epilogue's output (epilogue swiglu) only so far");
    g = fused, g.d = buffer;
    check_error(g, "d is set but d_dtype = nvfp4: pass NVFP4 D in d_fp4");
    g = fused, g.d_row_stride = 64;
    check_error(g, "d_row_stride = 64 is for BF16, FP16 or FP32 D: NVFP4 D's is d_fp4.row_stride_bytes");
    g = fused, g.n = 48;
    check_error(g, "n = 48 with d_dtype nvfp4: D's n/2 = 24 columns must be a multiple of 16 (whole NVFP4 blocks)");
    g = fused, g.n = 96, g.d_fp4.scale_layout = ScaleLayout::swizzled128x4;
    check_error(g, "n = 96 with d_dtype nvfp4: D's n/2 = 48 columns must be a multiple of 64");
    g.n = 128;
    CHECK(error_of(g) == "");
    g = fused, g.d_fp4.scale_mode = GlobalScaleMode::compute_per_row;
    check_error(g, "d_fp4.scale_mode must be given");
    g = fused, g.d_fp4.global_scale_out = reinterpret_cast<float*>(buffer);
    check_error(g, "d_fp4.global_scale_out is for a computed global scale");
    g = fused, g.d_fp4.row_stride_bytes = 30;
    check_error(g, "d_fp4.row_stride_bytes = 30 must be at least n/4 = 32 and a multiple of 4");
    g.d_fp4.row_stride_bytes = 34;
    check_error(g, "d_fp4.row_stride_bytes = 34 must be at least n/4 = 32 and a multiple of 4");
    g.d_fp4.row_stride_bytes = 36;
    CHECK(error_of(g) == "");
    g = fused, g.d_fp4.data = nullptr;
    check_error(g, "d_fp4.data is null");
    g = fused, g.d_fp4.data = buffer + 2;
    check_error(g, "d_fp4.data = ");
    g = fused, g.d_fp4.scales = nullptr;
    check_error(g, "d_fp4.scales is null");
    g = fused, g.d_fp4.global_scale.per_row = true;
    check_error(g, "d_fp4.global_scale");
    g = fused, g.d_fp4.scale_layout = ScaleLayout(9);
    check_error(g, "d_fp4.scale_layout");
    g = fused, g.m = 0, g.d_fp4.data = nullptr, g.d_fp4.scales = nullptr;  // no rows: no buffers
    CHECK(error_of(g) == "");

    // its kernels: another key and name than BF16 D's, the exchange's shared memory; sm_90a only
    const GemmSpec bf16 = with_epilogue(sm90_problem(2 * 2048, 7168, true), GemmEpilogue::swiglu);
    GemmSpec fp4 = bf16;
    fp4.out_dtype = uint8_t(DType::nvfp4);
    CHECK(gemm_problem(Arch::sm_90a, gemm_call(fused, "test")).out_dtype == uint8_t(DType::nvfp4));
    CHECK_FALSE(gemm_key(fp4) == gemm_key(bf16));
    CHECK(sm90_backend().unsupported(fp4) == "");
    GemmSpec plain = sm90_problem(4096, 7168, true);
    plain.out_dtype = uint8_t(DType::nvfp4);
    CHECK(sm90_backend().unsupported(plain).find("the SwiGLU epilogue's output") != std::string::npos);
    // sm_100a and sm_120a write it too (W4A4 on the weight as stored): every bucket's tiles are
    // ones their kernels build with NVFP4 D
    for (Arch arch : {Arch::sm_100a, Arch::sm_120a}) {
      GemmSpec blackwell = gemm_fp4_problem(with_epilogue(sm90_problem(2 * 2048, 7168, false), GemmEpilogue::swiglu),
                                            ScaleLayout::linear);
      blackwell.arch = arch, blackwell.out_dtype = uint8_t(DType::nvfp4);
      const GemmBackend& backend = gemm_backend(arch, "test");
      CAPTURE(to_string(arch));
      CHECK(backend.unsupported(blackwell) == "");
      for (int bucket : {gemm_m_bucket(1), gemm_m_bucket(16), gemm_m_bucket(4096)})
        for (const GemmTile& tile : gemm_bucket_tiles(backend, blackwell, bucket, 148)) {
          const GemmSpec kernel = gemm_kernel_spec(backend, blackwell, tile);
          CAPTURE(backend.kernel_name(kernel));
          CHECK(backend.arch_tile_problem(kernel) == "");
          CHECK(backend.kernel_name(kernel).find("_nvfp4_") != std::string::npos);
        }
    }
    for (int bucket : {gemm_m_bucket(1), gemm_m_bucket(4096)}) {
      const GemmTile tile = gemm_bucket_tiles(sm90_backend(), fp4, bucket, 132).front();
      const GemmSpec kernel = gemm_kernel_spec(sm90_backend(), fp4, tile);
      CAPTURE(sm90_backend().kernel_name(kernel));
      CHECK(sm90_backend().kernel_name(kernel).find("_nvfp4_") != std::string::npos);
      CHECK(sm90_backend().arch_tile_problem(kernel) == "");  // its stages fit beside the exchange
      CHECK(generate(kernel).source.find("ODT = 3,") != std::string::npos);  // DTYPE_NVFP4
    }
    // a prewarm with d-dtype nvfp4: SwiGLU's kernels only (no plain GEMM writes NVFP4), on every
    // arch (W4A4 on Blackwell); a gate_up of I not a multiple of 16 gets none
    WeightShape shape = every_layout(4096, 7168);
    REQUIRE(set_prewarm_variant(shape.variants, "epilogue", "none,swiglu") == "");
    REQUIRE(set_prewarm_variant(shape.variants, "d-dtype", "bf16,nvfp4") == "");
    auto fp4_specs = [](const std::vector<GemmSpec>& specs) {
      std::vector<GemmSpec> out;
      for (const GemmSpec& s : specs)
        if (s.out_dtype == uint8_t(DType::nvfp4)) out.push_back(s);
      return out;
    };
    const std::vector<GemmSpec> sm90_fp4 = fp4_specs(gemm_specs_of(prewarm_specs({shape}, {Arch::sm_90a}, 132)));
    CHECK_FALSE(sm90_fp4.empty());
    for (const GemmSpec& s : sm90_fp4) CHECK((s.flags & kFlagEpilogueSwiglu) != 0);
    for (Arch arch : {Arch::sm_100a, Arch::sm_120a}) {
      const std::vector<GemmSpec> blackwell_fp4 = fp4_specs(gemm_specs_of(prewarm_specs({shape}, {arch}, 148)));
      CHECK_FALSE(blackwell_fp4.empty());
      for (const GemmSpec& s : blackwell_fp4) {
        CHECK((s.flags & kFlagEpilogueSwiglu) != 0);
        CHECK(gemm_backend(arch, "test").arch_tile_problem(s) == "");
      }
    }
    shape.n = 4112;  // I = 2056
    CHECK(fp4_specs(gemm_specs_of(prewarm_specs({shape}, {Arch::sm_90a}, 132))).empty());
  }

  TEST_CASE("the SwiGLU epilogue: bad combinations fail naming the argument; its kernels are keys and names of their own") {
    GemmArgs fused = valid();
    fused.n = 128, fused.b_prepacked = true, fused.b.scales = nullptr, fused.epilogue = GemmEpilogue::swiglu;
    CHECK(error_of(fused) == "");
    GemmArgs g = fused;
    g.n = 120;
    check_error(g, "n = 120 with epilogue swiglu: the gate_up weight's 2 x I rows need I = n/2 a multiple of 8");
    g = fused, g.n = 63;
    check_error(g, "n = 63 with epilogue swiglu");
    // a weight as stored (sm_100a / sm_120a): ModelOpt's gate then up halves, or interleaved in
    // groups of g rows, g a power of two dividing I; the argument is the fused epilogue's only
    g = fused, g.b_prepacked = false, g.b.scales = buffer;
    CHECK(error_of(g) == "");
    for (int64_t interleave : {1, 8, 64}) {
      g.b_swiglu_interleave = interleave;
      CHECK(error_of(g) == "");
    }
    g.b_swiglu_interleave = 24;
    check_error(g, "b_swiglu_interleave = 24: a gate_up weight as stored interleaved in groups of g rows needs g a power of "
                   "two dividing I = n/2 = 64");
    g.b_swiglu_interleave = 128;
    check_error(g, "b_swiglu_interleave = 128: a gate_up weight as stored interleaved in groups of g rows needs g a power of "
                   "two dividing I = n/2 = 64");
    g.b_swiglu_interleave = -1;
    check_error(g, "b_swiglu_interleave = -1: 0 (gate rows [0, n/2), then up rows) or a group size g > 0");
    g = fused, g.b_swiglu_interleave = 8;
    check_error(g, "b_swiglu_interleave = 8 with b_prepacked: a prepacked weight records its gate / up order");
    g = valid(), g.b_swiglu_interleave = 1;
    check_error(g, "b_swiglu_interleave = 1 is for epilogue swiglu (leave 0)");
    g = fused, g.epilogue = GemmEpilogue(7);
    check_error(g, "epilogue = 7 is not a GemmEpilogue (none, swiglu or moe_combine)");
    g = fused, g.d_row_stride = 60;  // D is [m, n/2]
    check_error(g, "d_row_stride = 60 is less than n/2 (D of epilogue swiglu) = 64");
    g = fused, g.d_row_stride = 64;
    CHECK(error_of(g) == "");
    g = fused, g.a = nullptr, g.a_dtype = DType::nvfp4, g.a_fp4.data = buffer, g.a_fp4.scales = buffer;  // W4A4
    CHECK(error_of(g) == "");
    static int32_t ends[4] = {1, 2, 3, 4};
    GroupedGemmArgs grouped;
    grouped.gemm = fused, grouped.groups = 4, grouped.group_ends = ends;
    CHECK(error_of_grouped(grouped) == "");
    grouped.layout = GroupedLayout::batched;
    const std::string batched = error_of_grouped(grouped);
    CAPTURE(batched);
    CHECK(batched.find("nvfp4::jit::grouped_gemm: gemm.epilogue swiglu with the batched layout is not supported") == 0);

    // the problem and its kernels: another key, another name, the template argument, the JSON field
    const GemmSpec plain = sm90_problem(2 * 2048, 7168, true);
    const GemmSpec swiglu = with_epilogue(plain, GemmEpilogue::swiglu);
    CHECK((gemm_problem(Arch::sm_90a, gemm_call(fused, "test")).flags & kFlagEpilogueSwiglu) != 0);
    CHECK_FALSE(gemm_key(plain) == gemm_key(swiglu));
    CHECK(sm90_backend().unsupported(swiglu) == "");
    CHECK(sm90_backend().unsupported(with_epilogue(sm90_problem(4096, 7168, false), GemmEpilogue::swiglu)).find("prepacked") !=
          std::string::npos);
    const GemmTile tile = gemm_bucket_tiles(sm90_backend(), swiglu, gemm_m_bucket(16), 132).front();
    CHECK(gemm_bucket_tiles(sm90_backend(), swiglu, gemm_m_bucket(16), 132) ==
          gemm_bucket_tiles(sm90_backend(), plain, gemm_m_bucket(16), 132));  // the plain GEMM's tiles
    const GemmSpec kernel = gemm_kernel_spec(sm90_backend(), swiglu, tile);
    const std::string name = sm90_backend().kernel_name(kernel);
    CHECK(name.find("_swiglu_") != std::string::npos);
    CHECK(name != sm90_backend().kernel_name(gemm_kernel_spec(sm90_backend(), plain, tile)));
    CHECK(generate(kernel).source.find("EPILOGUE = 1;") != std::string::npos);  // EPILOGUE_SWIGLU
    const nlohmann::ordered_json json = gemm_spec_json(gemm_spec(swiglu, tile));
    CHECK(json["epilogue"] == "swiglu");
    CHECK(gemm_spec_json(gemm_spec(plain, tile))["epilogue"] == "none");
    GemmSpec back;
    REQUIRE(gemm_spec_from_json(json, Arch::sm_90a, &back) == "");
    CHECK(back == gemm_spec(swiglu, tile));
    nlohmann::json older = json;  // a table written before the field: no epilogue
    older.erase("epilogue");
    REQUIRE(gemm_spec_from_json(older, Arch::sm_90a, &back) == "");
    CHECK(back == gemm_spec(plain, tile));
    older["epilogue"] = "gelu";
    CHECK(gemm_spec_from_json(older, Arch::sm_90a, &back) == "epilogue = \"gelu\" is not none, swiglu or moe_combine");
    // sm_100a / sm_120a run it on the weight as stored (W4A4; not prepacked, not batched): kernels
    // of their own, named `..._swiglu`, GemmConfig's EPILOGUE after the grouped arguments
    for (Arch arch : {Arch::sm_100a, Arch::sm_120a}) {
      const GemmBackend& backend = gemm_backend(arch, "test");
      const GemmSpec fp4 = gemm_fp4_problem(gemm_problem(arch, 4096, 7168, DType::bf16, DType::bf16, ScaleLayout::linear,
                                                         false, kNoDType),
                                            ScaleLayout::linear);
      const GemmSpec fused_fp4 = with_epilogue(fp4, GemmEpilogue::swiglu);
      CHECK(backend.unsupported(fused_fp4) == "");
      const GemmSpec prepacked = with_epilogue(gemm_fp4_problem(gemm_problem(arch, 4096, 7168, DType::bf16, DType::bf16,
                                                                             ScaleLayout::linear, true, kNoDType),
                                                                ScaleLayout::linear),
                                               GemmEpilogue::swiglu);
      CHECK(backend.unsupported(prepacked).find("a prepacked weight (sm_90a's layout) does not run on") == 0);
      const GemmTile t = gemm_bucket_tiles(backend, fused_fp4, gemm_m_bucket(16), 148).front();
      const GemmSpec fused_kernel = gemm_kernel_spec(backend, fused_fp4, t);
      const std::string fused_name = backend.kernel_name(fused_kernel);
      CAPTURE(fused_name);
      CHECK(fused_name.size() > 7);
      CHECK(fused_name.substr(fused_name.size() - 7) == "_swiglu");
      CHECK(fused_name.substr(0, fused_name.size() - 7) == backend.kernel_name(gemm_kernel_spec(backend, fp4, t)));
      CHECK_FALSE(gemm_key(fused_kernel) == gemm_key(gemm_kernel_spec(backend, fp4, t)));
      CHECK(generate(fused_kernel).source.find(", 0, 0, 1>>(p)") != std::string::npos);
    }
    // a prewarm with epilogue=swiglu: the fused kernels of the prepacked weight on sm_90a, of the
    // weight as stored (W4A4) on sm_100a; a gate_up of odd I / 8 gets none
    WeightShape shape = every_layout(4096, 7168);
    REQUIRE(set_prewarm_variant(shape.variants, "epilogue", "none,swiglu") == "");
    auto fused_specs = [](const std::vector<GemmSpec>& specs) {
      std::vector<GemmSpec> out;
      for (const GemmSpec& s : specs)
        if (s.flags & kFlagEpilogueSwiglu) out.push_back(s);
      return out;
    };
    const std::vector<GemmSpec> sm90_fused = fused_specs(gemm_specs_of(prewarm_specs({shape}, {Arch::sm_90a}, 132)));
    CHECK_FALSE(sm90_fused.empty());
    for (const GemmSpec& s : sm90_fused) CHECK(gemm_problem_prepacked(s));
    CHECK(std::find(sm90_fused.begin(), sm90_fused.end(), kernel) != sm90_fused.end());
    const std::vector<GemmSpec> sm100_fused = fused_specs(gemm_specs_of(prewarm_specs({shape}, {Arch::sm_100a}, 148)));
    CHECK_FALSE(sm100_fused.empty());
    for (const GemmSpec& s : sm100_fused) {
      CHECK_FALSE(gemm_problem_prepacked(s));
      CHECK(s.a_dtype == uint8_t(DType::nvfp4));
    }
    shape.n = 4104;
    CHECK(fused_specs(gemm_specs_of(prewarm_specs({shape}, {Arch::sm_90a}, 132))).empty());
  }

  TEST_CASE("the MoE combine epilogue: bad arguments fail naming them; its kernels are keys and names of their own") {
    static int32_t ends[4] = {2, 4, 6, 8}, positions[8] = {}, rows[8] = {};
    alignas(16) static float weights[8] = {};
    GroupedGemmArgs fused;
    fused.gemm = valid(), fused.gemm.m = 8, fused.gemm.epilogue = GemmEpilogue::moe_combine;
    fused.groups = 4, fused.group_ends = ends;
    MoeCombineEpilogue& cb = fused.combine;
    cb.positions = positions, cb.row_token = rows, cb.weights = weights, cb.tokens = 4, cb.topk = 2, cb.out = buffer;
    CHECK(error_of_grouped(fused) == "");
    auto check_grouped = [](const GroupedGemmArgs& g, const std::string& part) {
      const std::string msg = error_of_grouped(g);
      CAPTURE(msg);
      CHECK(msg.find("nvfp4::jit::grouped_gemm: ") == 0);
      CHECK(msg.find(part) != std::string::npos);
    };
    GroupedGemmArgs g = fused;
    g.layout = GroupedLayout::masked, g.masked_m = ends, g.gemm.m = 2;
    check_grouped(g, "gemm.epilogue moe_combine needs the contiguous layout");
    g = fused, g.layout = GroupedLayout::batched, g.group_ends = nullptr, g.gemm.m = 2;
    check_grouped(g, "gemm.epilogue moe_combine needs the contiguous layout");
    g = fused, g.combine.positions = nullptr;
    check_grouped(g, "combine.positions is null");
    g = fused, g.combine.row_token = reinterpret_cast<const int32_t*>(buffer + 2);
    check_grouped(g, "combine.row_token = ");
    g = fused, g.combine.weights = nullptr;
    check_grouped(g, "combine.weights is null");
    g = fused, g.combine.weights_dtype = DType::bf16, g.combine.weights = buffer + 1;
    check_grouped(g, "is not 2-byte aligned");
    g = fused, g.combine.out = nullptr;
    check_grouped(g, "combine.out is null");
    g = fused, g.combine.topk = 0;
    check_grouped(g, "combine.topk = 0 must be positive");
    g = fused, g.combine.tokens = -1;
    check_grouped(g, "combine.tokens = -1 is negative");
    g = fused, g.combine.weights_dtype = DType::fp16;
    check_grouped(g, "combine.weights_dtype");
    g = fused, g.combine.out_dtype = DType::nvfp4;
    check_grouped(g, "combine.out_dtype");
    g = fused, g.combine.out_row_stride = 32;
    check_grouped(g, "combine.out_row_stride = 32 is less than gemm.n = 64");
    g = fused, g.combine.counters = buffer + 2, g.combine.counters_bytes = 64;
    check_grouped(g, "combine.counters = ");
    g = fused, g.combine.counters = buffer, g.combine.counters_bytes = 8;  // 4 tokens x 1 column tile x 4 bytes
    check_grouped(g, "combine.counters_bytes = 8 is less than the 16 bytes the combine counts in");
    g.combine.counters_bytes = 16;
    CHECK(error_of_grouped(g) == "");
    g = fused, g.combine.tokens = 0, g.combine.positions = nullptr;  // nothing to combine: no pointer needed
    CHECK(error_of_grouped(g) == "");
    GemmArgs dense = valid();
    dense.epilogue = GemmEpilogue::moe_combine;
    check_error(dense, "epilogue moe_combine is for grouped_gemm");
    dense.epilogue = GemmEpilogue(9);
    check_error(dense, "epilogue = 9 is not a GemmEpilogue (none, swiglu or moe_combine)");

    // the counters' size: a counter per token and 64 columns; none without the epilogue
    CHECK(moe_combine_counter_bytes(fused) == 4 * 1 * 4);
    g = fused, g.gemm.n = 200, g.combine.tokens = 5;
    CHECK(moe_combine_counter_bytes(g) == 5 * 4 * 4);
    g.gemm.epilogue = GemmEpilogue::none;
    CHECK(moe_combine_counter_bytes(g) == 0);
    g = fused, g.combine.topk = 0;
    CHECK_THROWS_WITH_AS(moe_combine_counter_bytes(g), doctest::Contains("nvfp4::jit::moe_combine_counter_bytes: combine.topk"),
                         Error);

    // the bind writes the combine's arguments (out_row_stride resolved to n)
    const GemmCall call = grouped_gemm_call(fused, "test");
    CHECK(call.combine.out_row_stride == 64);
    CHECK((call.problem.flags & kFlagEpilogueMoeCombine) != 0);
    {
      const GemmBackend& backend = sm90_backend();
      const GemmSpec problem = gemm_problem_on(Arch::sm_90a, call);
      const GemmPlan plan = backend.plan(gemm_spec(problem, backend.heuristic(problem, gemm_tile_rows(call), 132)), 8, 132);
      alignas(64) unsigned char params[GemmPlan::kMaxParamBytes];
      std::memcpy(params, plan.params, sizeof params);
      TensorMapList maps;
      GemmCall counted = call;
      counted.combine.counters = buffer;
      backend.bind(plan, counted, params, maps);
      const auto& p = *reinterpret_cast<const nvfp4k::GemmParams*>(params);
      CHECK(p.combine.positions == positions);
      CHECK(p.combine.row_token == rows);
      CHECK(p.combine.weights == weights);
      CHECK(p.combine.out == buffer);
      CHECK(p.combine.counters == reinterpret_cast<int*>(buffer));
      CHECK(p.combine.out_stride == 64);
      CHECK(p.combine.tokens == 4);
      CHECK(p.combine.topk == 2);
      CHECK(p.combine.d_rows == 8);
      CHECK(p.combine.weights_dtype == nvfp4k::DTYPE_FP32);
      CHECK(p.combine.out_dtype == nvfp4k::DTYPE_BF16);
      CHECK(p.d_from_smem == 0);  // element stores: the counts follow them in the generic proxy
    }

    // the problem and its kernels: another key, another name, the template argument, the JSON field
    GemmSpec plain = sm90_problem(7168, 2048, true);
    plain.groups = 257, plain.flags |= kFlagGroupedContiguous;
    const GemmSpec combined = with_epilogue(plain, GemmEpilogue::moe_combine);
    CHECK_FALSE(gemm_key(plain) == gemm_key(combined));
    CHECK(sm90_backend().unsupported(combined) == "");
    GemmSpec masked = plain;
    masked.flags = uint16_t((masked.flags & ~kFlagGroupedContiguous) | kFlagGroupedMasked);
    CHECK(sm90_backend().unsupported(with_epilogue(masked, GemmEpilogue::moe_combine)).find("contiguous groups") !=
          std::string::npos);
    CHECK(sm90_backend().unsupported(with_epilogue(sm90_problem(7168, 2048, true), GemmEpilogue::moe_combine)) != "");
    const GemmTile tile = gemm_bucket_tiles(sm90_backend(), combined, gemm_m_bucket(16), 132).front();
    CHECK(gemm_bucket_tiles(sm90_backend(), combined, gemm_m_bucket(16), 132) ==
          gemm_bucket_tiles(sm90_backend(), plain, gemm_m_bucket(16), 132));  // the plain GEMM's tiles
    const GemmSpec kernel = gemm_kernel_spec(sm90_backend(), combined, tile);
    const std::string name = sm90_backend().kernel_name(kernel);
    CHECK(name.find("_combine_") != std::string::npos);
    CHECK(name != sm90_backend().kernel_name(gemm_kernel_spec(sm90_backend(), plain, tile)));
    CHECK(generate(kernel).source.find("EPILOGUE = 2;") != std::string::npos);  // EPILOGUE_MOE_COMBINE
    const nlohmann::ordered_json json = gemm_spec_json(gemm_spec(combined, tile));
    CHECK(json["epilogue"] == "moe_combine");
    GemmSpec back;
    REQUIRE(gemm_spec_from_json(json, Arch::sm_90a, &back) == "");
    CHECK(back == gemm_spec(combined, tile));
    // sm_100a / sm_120a run it too (W4A4 on the weight as stored), contiguous groups only
    for (Arch arch : {Arch::sm_100a, Arch::sm_120a}) {
      GemmSpec fp4 = gemm_fp4_problem(gemm_problem(arch, 7168, 2048, DType::bf16, DType::bf16, ScaleLayout::linear, false,
                                                   kNoDType),
                                      ScaleLayout::linear);
      fp4.groups = 257, fp4.flags |= kFlagGroupedContiguous;
      const GemmBackend& backend = gemm_backend(arch, "test");
      CAPTURE(to_string(arch));
      CHECK(backend.unsupported(with_epilogue(fp4, GemmEpilogue::moe_combine)) == "");
      fp4.flags = uint16_t((fp4.flags & ~kFlagGroupedContiguous) | kFlagGroupedMasked);
      CHECK(backend.unsupported(with_epilogue(fp4, GemmEpilogue::moe_combine)).find("contiguous groups") != std::string::npos);
    }
    // a prewarm with epilogue=moe-combine: the fused kernels of a grouped weight's contiguous
    // layout, on every arch; none for a dense weight or the masked layout
    auto fused_specs = [](const std::vector<GemmSpec>& specs) {
      std::vector<GemmSpec> out;
      for (const GemmSpec& s : specs)
        if (s.flags & kFlagEpilogueMoeCombine) out.push_back(s);
      return out;
    };
    WeightShape shape = every_layout(7168, 2048, 257);
    REQUIRE(set_prewarm_variant(shape.variants, "epilogue", "none,moe-combine") == "");
    const std::vector<GemmSpec> sm90_fused = fused_specs(gemm_specs_of(prewarm_specs({shape}, {Arch::sm_90a}, 132)));
    CHECK_FALSE(sm90_fused.empty());
    for (const GemmSpec& s : sm90_fused) CHECK(gemm_problem_grouped(s) == nvfp4k::GROUPED_CONTIGUOUS);
    for (Arch arch : {Arch::sm_100a, Arch::sm_120a}) {
      const std::vector<GemmSpec> blackwell_fused = fused_specs(gemm_specs_of(prewarm_specs({shape}, {arch}, 148)));
      CHECK_FALSE(blackwell_fused.empty());
      for (const GemmSpec& s : blackwell_fused) CHECK(gemm_problem_grouped(s) == nvfp4k::GROUPED_CONTIGUOUS);
    }
    REQUIRE(set_prewarm_variant(shape.variants, "grouped", "masked") == "");
    CHECK(fused_specs(gemm_specs_of(prewarm_specs({shape}, {Arch::sm_90a}, 132))).empty());
    WeightShape dense_shape = every_layout(7168, 2048);
    REQUIRE(set_prewarm_variant(dense_shape.variants, "epilogue", "moe-combine") == "");
    CHECK(fused_specs(gemm_specs_of(prewarm_specs({dense_shape}, {Arch::sm_90a}, 132))).empty());
    // the tuner tunes the plain problem for it
    GemmProblem tuned;
    tuned.n = 7168, tuned.k = 2048, tuned.groups = 257, tuned.epilogue = GemmEpilogue::moe_combine;
    CHECK_THROWS_WITH_AS(tune(tuned, {}), doctest::Contains("epilogue moe_combine runs the tiles tuned for its grouped GEMM"),
                         Error);
  }

  TEST_CASE("batched tile schedule: every row of every group once, rows local to the group") {
    std::mt19937 rng(11);
    for (int trial = 0; trial < 200; ++trial) {
      constexpr int G = 8, N_TILES = 3;
      const int64_t m = 1 + int64_t(rng() % 600);
      const int block_m = int(8 * (1 + rng() % 16));
      const GemmGrid grid = gemm_grouped_grid(nvfp4k::GROUPED_BATCHED, G, m, 64 * N_TILES, block_m, 64);
      std::vector<int> seen(size_t(G * m) * N_TILES, 0);
      for (int cta = 0; cta < int(grid.clusters); ++cta) {
        const nvfp4k::ScheduledTile t =
            nvfp4k::schedule_grouped_tile<N_TILES, nvfp4k::GROUPED_BATCHED, G, 4>(grid.schedule, cta);
        REQUIRE(t.m0 >= 0);
        REQUIRE(t.m_end <= m);
        REQUIRE(t.group < G);
        CHECK(t.m_end - t.m0 <= block_m);
        for (int64_t r = t.m0; r < t.m_end; ++r) ++seen[size_t(t.group * m + r) * N_TILES + t.n_tile];
      }
      CAPTURE(m);
      CAPTURE(block_m);
      CHECK(std::all_of(seen.begin(), seen.end(), [](int v) { return v == 1; }));
    }
  }

  TEST_CASE("grouped tile schedule: every row of every group once, nothing outside A and D") {
    std::mt19937 rng(7);
    for (int layout : {nvfp4k::GROUPED_CONTIGUOUS, nvfp4k::GROUPED_MASKED})
      for (int trial = 0; trial < 200; ++trial) {
        constexpr int G = 16, N_TILES = 3;
        const int64_t m = 1 + int64_t(rng() % 300);
        const int block_m = int(8 * (1 + rng() % 16));
        std::vector<int> sizes(G);
        int64_t end = 0;
        for (int g = 0; g < G; ++g) {
          if (layout == nvfp4k::GROUPED_MASKED) sizes[size_t(g)] = int(rng() % uint64_t(m + 20)) - 10;  // some out of range
          else sizes[size_t(g)] = int(end += int64_t(rng() % uint64_t(m / 4 + 2))) - (g == 5 ? 1000 : 0);
        }
        GemmGrid grid = gemm_grouped_grid(layout, G, m, 64 * N_TILES, block_m, 64);
        grid.schedule.group_ends = sizes.data();
        grid.schedule.group_rows = sizes.data();
        const int64_t rows = layout == nvfp4k::GROUPED_MASKED ? m * G : m;
        std::vector<int> seen(size_t(rows) * N_TILES, 0);
        std::vector<int> owner(size_t(rows), -1);
        for (int cta = 0; cta < int(grid.clusters); ++cta) {
          const nvfp4k::ScheduledTile t =
              layout == nvfp4k::GROUPED_MASKED
                  ? nvfp4k::schedule_grouped_tile<N_TILES, nvfp4k::GROUPED_MASKED, G, 4>(grid.schedule, cta)
                  : nvfp4k::schedule_grouped_tile<N_TILES, nvfp4k::GROUPED_CONTIGUOUS, G, 4>(grid.schedule, cta);
          REQUIRE(t.m0 >= 0);
          REQUIRE(t.m_end <= rows);
          CHECK(t.m_end - t.m0 <= block_m);
          for (int64_t r = t.m0; r < t.m_end; ++r) {
            ++seen[size_t(r) * N_TILES + t.n_tile];
            owner[size_t(r)] = t.group;
          }
        }
        // the rows each group should get, from the documented clamping
        std::vector<int> expected_owner(size_t(rows), -1);
        int64_t prev = 0;
        for (int g = 0; g < G; ++g) {
          int64_t b, e;
          if (layout == nvfp4k::GROUPED_MASKED) b = g * m, e = b + std::clamp<int64_t>(sizes[size_t(g)], 0, m);
          else b = prev, e = std::clamp<int64_t>(sizes[size_t(g)], prev, m), prev = e;
          for (int64_t r = b; r < e; ++r) expected_owner[size_t(r)] = g;
        }
        CAPTURE(layout);
        CAPTURE(m);
        CAPTURE(block_m);
        for (int64_t r = 0; r < rows; ++r) {
          const int want = expected_owner[size_t(r)] >= 0 ? 1 : 0;
          bool bad = owner[size_t(r)] != expected_owner[size_t(r)];
          for (int nt = 0; nt < N_TILES; ++nt) bad |= seen[size_t(r) * N_TILES + nt] != want;
          if (bad) {
            FAIL_CHECK(fmt::format("row {}: group {} (expected {}), covered {} times", r, owner[size_t(r)],
                                   expected_owner[size_t(r)], seen[size_t(r) * N_TILES]));
            break;
          }
        }
      }
  }

  TEST_CASE("a backend is one registration: prewarm, codegen and tile choice find it") {
    // A backend for sm_100a, with one tile and a trivial kernel: registered later than the real
    // one, it takes precedence until it is unregistered.
    struct FakeBackend final : GemmBackend {
      std::string_view name() const override { return "fake"; }
      bool serves(Arch arch) const override { return arch == Arch::sm_100a; }
      std::string unsupported(const GemmSpec& p) const override {
        return gemm_problem_prepacked(p) ? "no prepacked layout" : "";
      }
      GemmTile heuristic(const GemmSpec&, int64_t m, int) const override {
        GemmTile t;
        t.block_m = m <= 64 ? 64 : 128, t.block_n = 128, t.block_k = 256, t.threads = 128, t.stages = 2, t.split_k = 1;
        return t;
      }
      std::vector<GemmTile> candidates(const GemmSpec& p, int bucket, int sms) const override {
        return {heuristic(p, gemm_bucket_m(bucket), sms)};
      }
      std::string arch_tile_problem(const GemmSpec&) const override { return {}; }
      std::string describe(const GemmTile& t) const override { return fmt::format("bm{}", t.block_m); }
      std::string kernel_name(const GemmSpec& s) const override { return fmt::format("fake_gemm_n{}_bm{}", s.n, s.tile.block_m); }
      GeneratedKernel generate(const GemmSpec& s) const override {
        return {kernel_name(s), fmt::format("extern \"C\" __global__ void {}(int) {{}}\n", kernel_name(s))};
      }
      unsigned shared_bytes(const GemmSpec&) const override { return 0; }
      GemmPlan plan(const GemmSpec&, int64_t, int) const override { return {}; }
      void bind(const GemmPlan&, const GemmCall&, void*, TensorMapList&) const override {}
    } fake;
    const GemmBackend* real = find_gemm_backend(Arch::sm_100a);
    REQUIRE(real);
    register_gemm_backend(&fake);
    CHECK(find_gemm_backend(Arch::sm_100a) == &fake);
    const std::vector<GemmSpec> specs = gemm_prewarm(Arch::sm_100a, 1024, 2048);
    unregister_gemm_backend(&fake);
    CHECK(find_gemm_backend(Arch::sm_100a) == real);
    // two layouts as stored (it refuses the prepacked one), two tiles (64 and 128 rows) each
    REQUIRE(specs.size() == 4);
    register_gemm_backend(&fake);
    CHECK(generate(gemm_key(specs[0])).name == "fake_gemm_n1024_bm64");
    CHECK(op_kernels(Op::gemm).kernel_name(gemm_key(specs[3])) == "fake_gemm_n1024_bm128");
    const GemmSpec problem = gemm_problem(Arch::sm_100a, 1024, 2048, DType::bf16, DType::bf16, ScaleLayout::linear, false, kNoDType);
    CHECK(gemm_tile_choice(fake, problem, nullptr, 100, 48).block_m == 128);
    // the core compiles it like any kernel, for its arch
    CHECK(!KernelStore::instance().get(gemm_key(specs[0]))->cubin.empty());
    unregister_gemm_backend(&fake);
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
