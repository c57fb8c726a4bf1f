// The SwiGLU epilogue's NVFP4 output (GemmArgs::d_fp4) on every backend (sm_100a and sm_120a
// natively or emulated on sm_90a: on_blackwell_backend.hpp): the same call with FP32 D gives
// the fp32 values silu(gate) * up (bounded against float64 by test_gpu_gemm_swiglu.cpp), and the
// NVFP4 D must be exactly what the CPU quantizer makes of them, bit for bit: packed values and
// scales, both scale layouts, the global scale on the host, on the device, or one per row; dense
// and grouped (contiguous with empty experts and a row_index gather, masked), W4A16 and W4A4,
// ragged M, the tiles of every code path (sm_90a: split K, k slices, three consumers,
// persistent; sm_100a: every weight tile width, CTA pairs; sm_120a: row tiles, split K), the
// Blackwell backends on the gate_up weight as ModelOpt stores it; sm_90a's W4A8 mode.
// Outputs are poisoned and padded: rows the call does not own and the row padding stay untouched.
// Each decoded value is also held to NVFP4's error model: |q - x| <= max(d, |x|) / 4, d the
// block's divisor (decoded scale x global scale), plus |x| - 6 d where the value saturates.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "../dequantize_fixture.hpp"
#include "on_blackwell_backend.hpp"
#include "common/nvfp4_format.cuh"
#include "common/scale_layout.cuh"
#include "core/gpu_util.hpp"
#include "ops/gemm/call.hpp"
#include "ops/gemm/gemm.hpp"
#include "ops/gemm/sm100/tiles.hpp"
#include "ops/gemm/sm120/tiles.hpp"
#include "ops/gemm/sm90/tiles.hpp"

using namespace nvfp4::jit;
using namespace nvfp4::jit::detail;

namespace {

enum class DScale { host, device, per_row };

struct Fp4Case {
  int64_t m;      // rows of A and D (contiguous: all groups'; masked: per group)
  int64_t inter;  // I: D's columns
  int64_t k;
  ScaleLayout layout = ScaleLayout::linear;
  DScale gscale = DScale::host;
  DType a = DType::bf16;
  int groups = 0;
  GroupedLayout grouped = GroupedLayout::contiguous;
  bool gather = false;
  int64_t pad_bytes = 0;  // D's row stride past n/4
  GemmTile tile{};        // block_m 0: the heuristic's
  bool as_stored = false;  // the weight as ModelOpt stores it (the Blackwell backends), else prepacked
  GemmPrecision precision = GemmPrecision::exact;
};

constexpr uint8_t kPoison = 0x77;

void run(const Fp4Case& c, const GemmArgs& g, const GroupedGemmArgs& grouped) {
  const GemmTile tile = c.tile;
  if (c.groups) {
    GroupedGemmArgs ga = grouped;
    ga.gemm = g;
    tile.block_m ? grouped_gemm_with_tile(ga, tile, nullptr) : grouped_gemm(ga, nullptr);
  } else {
    tile.block_m ? gemm_with_tile(g, tile, nullptr) : gemm(g, nullptr);
  }
  check_cu(driver().cuCtxSynchronize(), "gate_up gemm");
}

void run_fp4_case(const Fp4Case& c, std::mt19937& rng) {
  const int64_t n = 2 * c.inter, k = c.k, weights = std::max(1, c.groups), kblocks = c.inter / 16;
  const bool masked = c.groups && c.grouped == GroupedLayout::masked;
  const int64_t rows = masked ? c.m * c.groups : c.m;
  const std::string name = "m=" + std::to_string(c.m) + " I=" + std::to_string(c.inter) + " k=" + std::to_string(k) +
                           (c.layout == ScaleLayout::swizzled128x4 ? " swizzled" : " linear") +
                           (c.gscale == DScale::host ? " gscale host" : c.gscale == DScale::device ? " gscale device" : " gscale per row") +
                           (c.a == DType::nvfp4 ? " W4A4" : "") + " groups=" + std::to_string(c.groups) +
                           (masked ? " masked" : "") + (c.gather ? " gathered" : "") +
                           (c.tile.block_m ? " tile " + find_gemm_backend(current_device().arch)->describe(c.tile) : "") +
                           (c.as_stored ? " as stored" : "") + (c.precision == GemmPrecision::w4a8 ? " precision w4a8" : "");
  CAPTURE(name);

  // the gate_up weights (ModelOpt halves), as stored or prepacked for the SwiGLU epilogue
  testutil::HostNvfp4 w(weights * n, k, ScaleLayout::linear, rng);
  DeviceBuffer d_w = to_device(w.packed), d_s = to_device(w.scales);
  const int64_t pre_bytes = prepacked_bytes(n, k);
  DeviceBuffer d_pre(size_t(c.as_stored ? 0 : pre_bytes * weights));
  for (int64_t e = 0; e < weights && !c.as_stored; ++e) {
    PrepackArgs p;
    p.weight = {static_cast<unsigned char*>(d_w.get()) + e * n * k / 2, 0,
                static_cast<unsigned char*>(d_s.get()) + e * n * (k / 16), ScaleLayout::linear, {}};
    p.n = n, p.k = k, p.out = static_cast<unsigned char*>(d_pre.get()) + e * pre_bytes, p.swiglu_interleave = 0;
    prepack(p, nullptr);
  }
  // A: BF16 from N(0, 1), or NVFP4
  const int64_t a_rows = c.gather ? std::max<int64_t>(1, c.m / 3) : rows;
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<uint16_t> a(size_t(a_rows * k));
  for (auto& x : a) x = nvfp4k::float_to_bf16_bits(normal(rng));
  testutil::HostNvfp4 a4(c.a == DType::nvfp4 ? a_rows : 0, k, ScaleLayout::linear, rng);
  DeviceBuffer d_a = to_device(a), d_a4 = to_device(a4.packed), d_a4s = to_device(a4.scales);
  // groups: contiguous ends with every third expert empty; masked counts in [0, m]
  std::vector<int32_t> sizes(size_t(std::max(1, c.groups)), 0);
  if (c.groups && !masked) {
    for (auto& end : sizes) end = int32_t(rng() % uint64_t(c.m + 1));
    std::sort(sizes.begin(), sizes.end());
    for (int e = 1; e < c.groups; e += 3) sizes[size_t(e)] = sizes[size_t(e - 1)];
    sizes.back() = int32_t(c.m);
  } else if (masked) {
    for (int e = 0; e < c.groups; ++e) sizes[size_t(e)] = e % 3 == 1 ? 0 : int32_t(rng() % uint64_t(c.m + 1));
  }
  auto row_live = [&](int64_t r) { return !masked || r % c.m < sizes[size_t(r / c.m)]; };
  std::vector<int32_t> index(size_t(c.gather ? c.m : 1), 0);
  for (auto& i : index) i = int32_t(rng() % uint64_t(a_rows));
  DeviceBuffer d_sizes = to_device(sizes), d_index = to_device(index);

  GemmArgs g;
  g.m = c.m, g.n = n, g.k = k;
  if (c.a == DType::nvfp4)
    g.a_dtype = DType::nvfp4, g.a_fp4 = {d_a4.get(), 0, d_a4s.get(), ScaleLayout::linear, {0.125f, nullptr, false}};
  else
    g.a = d_a.get();
  const float gw = std::ldexp(1.0f + float(rng() % 100) / 100.0f, -12);
  g.b = {d_pre.get(), 0, nullptr, ScaleLayout::linear, {gw, nullptr, false}};
  g.b_prepacked = true;
  if (c.as_stored) g.b = {d_w.get(), 0, d_s.get(), ScaleLayout::linear, {gw, nullptr, false}}, g.b_prepacked = false;
  g.alpha = 0.75f;
  g.epilogue = GemmEpilogue::swiglu;
  g.precision = c.precision;
  GroupedGemmArgs grouped;
  grouped.groups = c.groups, grouped.layout = c.grouped;
  if (c.groups) (masked ? grouped.masked_m : grouped.group_ends) = d_sizes.as<int32_t>();
  if (c.gather) grouped.row_index = d_index.as<int32_t>(), grouped.a_rows = a_rows;

  // the fp32 values, from the same call with FP32 D
  DeviceBuffer d_f32(size_t(rows * c.inter * 4));
  d_f32.fill(0xFF);
  GemmArgs f32 = g;
  f32.d = d_f32.get(), f32.d_dtype = DType::fp32;
  if (c.precision == GemmPrecision::w4a8) {  // past the exact mode's rows: the FP8 kernel runs
    GroupedGemmArgs ga = grouped;
    ga.gemm = f32;
    CHECK((c.groups ? grouped_gemm_call(ga, "test") : gemm_call(f32, "test")).args.precision == GemmPrecision::w4a8);
  }
  run(c, f32, grouped);
  std::vector<float> x(size_t(rows * c.inter));
  d_f32.download(x.data(), x.size() * 4);

  // global scales around amax / (6 * 448) of the live values (per row: each row's), times a
  // factor in [1/2, 2) so that blocks saturate and go subnormal too
  std::vector<float> gscales(size_t(c.gscale == DScale::per_row ? rows : 1), 1.0f);
  auto factor = [&] { return std::ldexp(1.0f + float(rng() % 100) / 100.0f, -1); };
  float tensor_amax = 0.0f;
  for (int64_t r = 0; r < rows; ++r) {
    float amax = 0.0f;
    for (int64_t i = 0; r < rows && row_live(r) && i < c.inter; ++i)
      if (std::isfinite(x[size_t(r * c.inter + i)])) amax = std::max(amax, std::fabs(x[size_t(r * c.inter + i)]));
    tensor_amax = std::max(tensor_amax, amax);
    if (c.gscale == DScale::per_row) gscales[size_t(r)] = amax > 0 ? amax / 2688.0f * factor() : 1.0f;
  }
  if (c.gscale != DScale::per_row) gscales[0] = tensor_amax > 0 ? tensor_amax / 2688.0f * factor() : 1.0f;
  DeviceBuffer d_gscales = to_device(gscales);

  // NVFP4 D, poisoned
  const int64_t stride = c.inter / 2 + c.pad_bytes;
  const int64_t scale_bytes = nvfp4k::scale_bytes(int(c.layout), rows, kblocks);
  DeviceBuffer d_q{size_t(rows * stride)}, d_qs{size_t(scale_bytes)};
  d_q.fill(kPoison), d_qs.fill(kPoison);
  GemmArgs fp4 = g;
  fp4.d_dtype = DType::nvfp4;
  fp4.d_fp4.data = d_q.get(), fp4.d_fp4.row_stride_bytes = c.pad_bytes ? stride : 0;
  fp4.d_fp4.scales = d_qs.get(), fp4.d_fp4.scale_layout = c.layout;
  fp4.d_fp4.global_scale = c.gscale == DScale::host ? GlobalScale{gscales[0], nullptr, false}
                                                    : GlobalScale{1.0f, d_gscales.as<float>(), c.gscale == DScale::per_row};
  run(c, fp4, grouped);
  std::vector<uint8_t> q(size_t(rows * stride)), qs(static_cast<size_t>(scale_bytes));
  d_q.download(q.data(), q.size());
  d_qs.download(qs.data(), qs.size());

  // the CPU quantizer's bits of the fp32 values
  std::vector<uint8_t> want(q.size()), want_s(qs.size());
  QuantizeArgs ref;
  ref.in = x.data(), ref.in_dtype = DType::fp32, ref.rows = rows, ref.k = c.inter;
  ref.out = want.data(), ref.out_row_stride_bytes = stride, ref.scales = want_s.data(), ref.scale_layout = c.layout;
  ref.global_scale = fp4.d_fp4.global_scale;
  if (c.gscale != DScale::host) ref.global_scale.device_ptr = gscales.data();  // (host pointers on the CPU)
  cpu::quantize(ref);

  double err2 = 0, ref2 = 0;
  const std::string first_wrong = [&]() -> std::string {
    for (int64_t r = 0; r < rows; ++r) {
      const bool live = row_live(r);
      const float gs = gscales[size_t(c.gscale == DScale::per_row ? r : 0)];
      for (int64_t b = 0; b < stride; ++b) {
        const uint8_t got = q[size_t(r * stride + b)];
        const bool owned = live && b < c.inter / 2;
        if (owned ? got != want[size_t(r * stride + b)] : got != kPoison)
          return "packed byte (" + std::to_string(r) + ", " + std::to_string(b) + ") = " + std::to_string(got) + ", want " +
                 std::to_string(owned ? want[size_t(r * stride + b)] : kPoison) + (owned ? "" : " (not D's: untouched)");
      }
      for (int64_t kb = 0; kb < kblocks; ++kb) {
        const int64_t at = c.layout == ScaleLayout::linear ? nvfp4k::scale_offset_linear(r, kb, kblocks)
                                                           : nvfp4k::scale_offset_swizzled128x4(r, kb, kblocks);
        const uint8_t got = qs[size_t(at)], expected = live ? want_s[size_t(at)] : kPoison;
        if (got != expected)
          return "scale (" + std::to_string(r) + ", block " + std::to_string(kb) + ") = " + std::to_string(got) + ", want " +
                 std::to_string(expected);
        if (!live) continue;
        const double divisor = double(nvfp4k::e4m3_to_float(got)) * gs;
        for (int64_t i = kb * 16; i < kb * 16 + 16; ++i) {
          const uint8_t byte = q[size_t(r * stride + i / 2)];
          const double decoded = double(nvfp4k::e2m1_to_float(i % 2 ? byte >> 4 : byte & 15u)) * divisor;
          const double value = x[size_t(r * c.inter + i)];
          // (past 6 d the value saturates: a global scale under amax / 2688 saturates the E4M3 scale)
          const double bound = std::max(divisor, std::fabs(value)) / 4 * (1 + 1e-6) + std::max(0.0, std::fabs(value) - 6 * divisor);
          if (!(std::fabs(decoded - value) <= bound))
            return "(" + std::to_string(r) + ", " + std::to_string(i) + ") decodes to " + std::to_string(decoded) + " from " +
                   std::to_string(value) + ", past NVFP4's error model (block divisor " + std::to_string(divisor) + ")";
          err2 += (decoded - value) * (decoded - value), ref2 += value * value;
        }
      }
    }
    return "";
  }();
  CHECK_MESSAGE(first_wrong.empty(), name << ": first wrong element: " << first_wrong);
  MESSAGE("swiglu nvfp4 " << name << ": relative Frobenius error of the NVFP4 values to the fp32 ones "
                          << std::sqrt(err2 / std::max(ref2, 1e-300)));
}

constexpr ScaleLayout linear = ScaleLayout::linear, swizzled = ScaleLayout::swizzled128x4;
constexpr GroupedLayout contiguous = GroupedLayout::contiguous, masked = GroupedLayout::masked;

GemmTile sm100_tile(int block_n, int stages, int ctas = 1) { return sm100::Tiles::to_config({block_n, stages, ctas}); }
GemmTile sm120_tile(int block_m, int block_n, int stages, int split_k = 1) {
  return sm120::Tiles::to_config({block_m, block_n, stages, split_k});
}

// `c` in the W4A8 mode (sm_90a)
Fp4Case w4a8(Fp4Case c) {
  c.precision = GemmPrecision::w4a8;
  return c;
}

// `c` on the Blackwell backends: W4A4 on the weight as stored, on `tile` when given
Fp4Case stored(Fp4Case c, GemmTile tile = {}) {
  c.a = DType::nvfp4, c.as_stored = true, c.tile = tile;
  return c;
}

}  // namespace

TEST_SUITE("gpu_gemm_swiglu_fp4") {
  TEST_CASE("gemm with the SwiGLU epilogue's NVFP4 D: the quantizer's bits, both scale layouts, every global scale") {
    std::mt19937 rng(std::random_device{}());
    auto with = [](Fp4Case c, sm90::Tile t) {
      c.tile = sm90::to_config(t);
      return c;
    };
    const Fp4Case cases[] = {
        {1, 2048, 4096},
        {16, 768, 2048, swizzled, DScale::device},
        {100, 1440, 2880, linear, DScale::per_row},
        {37, 256, 512, swizzled, DScale::per_row, DType::bf16, 0, GroupedLayout::contiguous, false, 8},
        {2, 1024, 2048, linear, DScale::device, DType::nvfp4},
        {300, 512, 1024, swizzled, DScale::host, DType::nvfp4},
        {1000, 1024, 1024, linear, DScale::host},
        // tiles: split-K, two k slices, three consumers, a 256-row tile
        with({3, 1024, 4096}, {8, 1, 4, 2, 128}),
        with({5, 80, 2048, linear, DScale::per_row}, {8, 1, 4, 2, 256, 2}),
        with({130, 800, 1024, linear, DScale::device}, {128, 3, 4, 1, 128}),
        with({520, 512, 1024, swizzled, DScale::per_row}, {256, 2, 2, 1, 128}),
    };
    for (const Fp4Case& c : cases) run_fp4_case(c, rng);
  }

  TEST_CASE("grouped_gemm with the SwiGLU epilogue's NVFP4 D: contiguous, gathered, masked, persistent") {
    std::mt19937 rng(std::random_device{}());
    const Fp4Case cases[] = {
        {1, 2048, 7168, linear, DScale::host, DType::bf16, 9},
        {16, 768, 2048, swizzled, DScale::device, DType::bf16, 16, GroupedLayout::contiguous, true},
        {300, 256, 1024, linear, DScale::per_row, DType::bf16, 8},
        {200, 256, 1024, swizzled, DScale::host, DType::nvfp4, 8, GroupedLayout::contiguous, true},
        {40, 384, 1024, linear, DScale::device, DType::bf16, 4, GroupedLayout::masked},
        {1000, 512, 2048, swizzled, DScale::per_row, DType::bf16, 4},
    };
    for (const Fp4Case& c : cases) run_fp4_case(c, rng);
  }

  // The W4A8 mode's FP8 kernel (past its exact rows: dense 256, grouped 128 an expert, experts of
  // 4096 rows and up), BF16 and NVFP4 activations: its fp32 values quantized as quantize() does.
  TEST_CASE("W4A8 with the SwiGLU epilogue's NVFP4 D: the quantizer's bits, dense and grouped") {
    if (current_device().arch != Arch::sm_90a) return;
    std::mt19937 rng(std::random_device{}());
    const Fp4Case cases[] = {
        w4a8({300, 2048, 512, linear, DScale::host}),
        w4a8({520, 2048, 1024, swizzled, DScale::per_row, DType::nvfp4}),
        w4a8({700, 2048, 512, linear, DScale::device, DType::bf16, 3}),
        w4a8({600, 2048, 512, swizzled, DScale::per_row, DType::bf16, 3, GroupedLayout::contiguous, true}),
        w4a8({300, 2048, 512, linear, DScale::host, DType::nvfp4, 2, GroupedLayout::masked}),
    };
    for (const Fp4Case& c : cases) run_fp4_case(c, rng);
  }
}


TEST_SUITE("gpu_gemm_swiglu_fp4_sm100") {
  TEST_CASE("sm_100a: the SwiGLU epilogue's NVFP4 D, the quantizer's bits: dense and grouped, every weight tile width, CTA pairs") {
    const test::OnSm100Backend on;
    if (!on.ready()) return;
    std::mt19937 rng(std::random_device{}());
    const Fp4Case cases[] = {
        stored({1, 2048, 4096}),
        stored({16, 768, 2048, swizzled, DScale::device}),
        stored({100, 1440, 2880, linear, DScale::per_row}),
        stored({37, 256, 512, swizzled, DScale::per_row, DType::nvfp4, 0, contiguous, false, 8}),
        stored({260, 208, 576, linear, DScale::host}, sm100_tile(64, 2)),  // I = 13 blocks: a 32-column read half past D
        stored({130, 512, 1024, swizzled, DScale::device}, sm100_tile(256, 2)),
        stored({300, 592, 512, linear, DScale::per_row}, sm100_tile(256, 2, 2)),  // a pair: the even CTA's gate, the odd's up rows
        stored({300, 256, 1024, linear, DScale::per_row, DType::nvfp4, 8}),
        stored({16, 768, 2048, swizzled, DScale::device, DType::nvfp4, 16, contiguous, true}),
        stored({40, 384, 1024, linear, DScale::host, DType::nvfp4, 4, masked}, sm100_tile(128, 2, 2)),
        stored({600, 512, 512, swizzled, DScale::per_row, DType::nvfp4, 4, contiguous, true}, sm100_tile(128, 2, 2)),
    };
    for (const Fp4Case& c : cases) run_fp4_case(c, rng);
  }

  TEST_CASE("sm_100a: the SwiGLU epilogue's NVFP4 D, small shapes for the sanitizers") {
    const test::OnSm100Backend on;
    if (!on.ready()) return;
    std::mt19937 rng(std::random_device{}());
    const Fp4Case cases[] = {
        stored({3, 48, 256, linear, DScale::per_row}, sm100_tile(64, 2)),
        stored({130, 64, 256, swizzled, DScale::device}, sm100_tile(128, 2, 2)),
        stored({50, 80, 256, linear, DScale::host, DType::nvfp4, 4, contiguous, true}, sm100_tile(128, 2)),
    };
    for (const Fp4Case& c : cases) run_fp4_case(c, rng);
  }
}

TEST_SUITE("gpu_gemm_swiglu_fp4_sm120") {
  TEST_CASE("sm_120a: the SwiGLU epilogue's NVFP4 D, the quantizer's bits: dense and grouped, row tiles, split K") {
    const test::OnSm120Backend on;
    if (!on.ready()) return;
    std::mt19937 rng(std::random_device{}());
    const Fp4Case cases[] = {
        stored({1, 2048, 4096}),  // the 16-row tile: 128 weight rows where 64 would split a warp's blocks
        stored({16, 768, 2048, swizzled, DScale::device}),
        stored({100, 1440, 2880, linear, DScale::per_row}),
        stored({37, 256, 512, swizzled, DScale::per_row, DType::nvfp4, 0, contiguous, false, 8}),
        stored({20, 208, 576, linear, DScale::host}, sm120_tile(16, 128, 2)),
        stored({130, 528, 1024, linear, DScale::device}, sm120_tile(128, 128, 3)),
        stored({70, 320, 1024, swizzled, DScale::per_row}, sm120_tile(32, 256, 2)),
        stored({40, 592, 2048, linear, DScale::per_row}, sm120_tile(64, 128, 2, 2)),  // split K: partial sums added first
        stored({3, 1024, 4096, linear, DScale::host}, sm120_tile(16, 128, 4, 4)),
        stored({300, 256, 1024, linear, DScale::per_row, DType::nvfp4, 8}),
        stored({16, 768, 2048, swizzled, DScale::device, DType::nvfp4, 16, contiguous, true}),
        stored({40, 384, 1024, linear, DScale::host, DType::nvfp4, 4, masked}, sm120_tile(32, 256, 2)),
    };
    for (const Fp4Case& c : cases) run_fp4_case(c, rng);
  }

  TEST_CASE("sm_120a: the SwiGLU epilogue's NVFP4 D, small shapes for the sanitizers") {
    const test::OnSm120Backend on;
    if (!on.ready()) return;
    std::mt19937 rng(std::random_device{}());
    const Fp4Case cases[] = {
        stored({3, 48, 256, linear, DScale::per_row}, sm120_tile(16, 128, 2)),
        stored({20, 64, 1024, swizzled, DScale::device}, sm120_tile(16, 128, 2, 2)),
        stored({50, 80, 256, linear, DScale::host, DType::nvfp4, 4, contiguous, true}, sm120_tile(64, 128, 2)),
    };
    for (const Fp4Case& c : cases) run_fp4_case(c, rng);
  }
}
