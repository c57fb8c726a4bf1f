// gemm in the W4A8 precision mode (sm_90a) against float64 of the EXACT NVFP4 product (the
// decoded values, unrounded activations): fresh random data each run, realistic (Gaussian
// activations with outlier channels, block scales spread as a quantizer leaves them) and
// adversarial (block scales over all of E4M3, subnormal ones, zero blocks and rows, activations
// over 30 binades); poisoned outputs; ragged M, N and K; grouped calls (contiguous, gathered
// through a row index, masked) with ragged and empty experts and rows of no group. The bounds come from the error model of
// docs/formats.md ("W4A8"), not from a run:
//   weight  w (decoded, row n):  |dw| <= max(|w 2^-e[n]| / 17, 2^-10) 2^e[n]
//   activation x (row m):        |dx| <= max(|x / s[m]| / 17, 2^-10) s[m],  s[m] = amax[m] / 448
//   accumulation (k32 steps):    |d| <= 2^-13 (|partial sum| + the step's |products|), Hopper's
//                                FP8 MMA keeping about 14 bits of its sum
// Each element is held to the sum of those terms (deterministic); the relative Frobenius error
// to the root sum of their squares (the rounding errors independent and zero-mean: its
// expected square is at most that). The measured errors are printed (MESSAGE).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <sstream>
#include <vector>

#include "core/error.hpp"
#include "core/gpu_util.hpp"
#include "core/launcher.hpp"
#include "nvfp4/jit.hpp"
#include "ops/gemm/backend.hpp"
#include "ops/gemm/call.hpp"
#include "ops/gemm/gemm.hpp"
#include "w4a8_reference.hpp"

using namespace nvfp4::jit;
using namespace nvfp4::jit::detail;
using namespace w4a8ref;

namespace {

struct W4a8Case {
  int64_t m, n, k;
  bool adversarial = false;
  DType a = DType::bf16, d = DType::fp32;
  bool bias = false, device_gscale = false, workspace = false;
  float alpha = 1.0f;
};

void run_w4a8_case(const W4a8Case& c, std::mt19937& rng) {
  CAPTURE(c.m);
  CAPTURE(c.n);
  CAPTURE(c.k);
  CAPTURE(c.adversarial);
  std::normal_distribution<double> normal(0.0, 1.0);
  const std::vector<Weight> weights{random_weight(c.n, c.k, c.adversarial, rng)};
  const Activations act = random_activations(c.m, c.k, c.a, c.adversarial, rng);
  Epilogue ep;
  ep.alpha = c.alpha, ep.gw = std::ldexp(1.0 + (rng() % 100) / 100.0, -10), ep.d = c.d;
  std::vector<float> bias(size_t(c.n));
  for (auto& b : bias) b = float(normal(rng));
  if (c.bias) ep.bias = &bias;

  // on the GPU: prepack (checked against the CPU's), then gemm
  DeviceBuffer d_pre{static_cast<size_t>(prepacked_bytes(c.n, c.k))};
  d_pre.fill(0xA5);
  prepack_checked(weights[0], c.n, c.k, d_pre.as<unsigned char>());
  DeviceBuffer d_a = to_device(act.a), d_bias = to_device(bias), d_gscale = to_device(std::vector<float>{float(ep.gw)});
  const size_t out_bytes = size_t(c.m * c.n) * (c.d == DType::fp32 ? 4 : 2);
  DeviceBuffer d_out{out_bytes};
  d_out.fill(0xFF);  // NaN: every element must be written
  GemmArgs g;
  g.m = c.m, g.n = c.n, g.k = c.k;
  g.a = d_a.get(), g.a_dtype = c.a;
  g.b.data = d_pre.get();
  g.b_prepacked = true;
  g.b.global_scale = c.device_gscale ? GlobalScale{0.0f, d_gscale.as<float>(), false} : GlobalScale{float(ep.gw), nullptr, false};
  g.d = d_out.get(), g.d_dtype = c.d;
  g.alpha = c.alpha;
  if (c.bias) g.bias = d_bias.get(), g.bias_dtype = DType::fp32;
  g.precision = GemmPrecision::w4a8;
  DeviceBuffer workspace{static_cast<size_t>(c.workspace ? gemm_workspace_bytes(g) : 16)};
  if (c.workspace) g.workspace = workspace.get(), g.workspace_bytes = int64_t(workspace.bytes());
  gemm(g, nullptr);
  check_cu(driver().cuCtxSynchronize(), "gemm w4a8");
  std::vector<uint8_t> got(out_bytes);
  d_out.download(got.data(), got.size());
  std::vector<RowRef> rows(size_t(c.m));
  for (int64_t m = 0; m < c.m; ++m) rows[size_t(m)] = {m, 0};
  std::ostringstream label;
  label << "W4A8 m=" << c.m << " n=" << c.n << " k=" << c.k << (c.adversarial ? " adversarial" : " realistic")
        << (c.m <= kW4A8ExactRows ? " (decode size: the exact mode runs)" : "");
  check_w4a8_output(label.str(), rows, act, weights, c.n, c.k, ep, got);
}

// A grouped call: `counts` rows an expert (contiguous: sorted one expert after the other, then
// `padding` rows of no group; masked: expert g's rows first of its max_m), gathered through a
// row index of `tokens` rows when tokens > 0 (one row of expert `bad_row_expert` given an index
// outside A), expected_m given.
struct W4a8GroupedCase {
  GroupedLayout layout;
  int64_t n, k;
  std::vector<int32_t> counts;
  int64_t expected_m;
  int64_t padding = 0, max_m = 0, tokens = 0;
  bool adversarial = false;
  DType d = DType::bf16;
  int bad_row_expert = -1;
};

void run_w4a8_grouped_case(const W4a8GroupedCase& c, std::mt19937& rng) {
  const int groups = int(c.counts.size());
  const bool masked = c.layout == GroupedLayout::masked;
  std::vector<Weight> weights;
  for (int e = 0; e < groups; ++e) weights.push_back(random_weight(c.n, c.k, c.adversarial, rng));
  const GroupedRows layout = grouped_rows(masked, c.counts, c.max_m, c.padding, c.tokens, c.bad_row_expert, rng);
  const std::vector<RowRef>& refs = layout.refs;
  const std::vector<int32_t>& sizes = layout.sizes;
  const std::vector<int32_t>& row_index = layout.row_index;
  const int64_t routed = layout.routed, rows = int64_t(refs.size());
  const Activations act = random_activations(c.tokens > 0 ? c.tokens : rows, c.k, DType::bf16, c.adversarial, rng);
  Epilogue ep;
  ep.gw = std::ldexp(1.0 + (rng() % 100) / 100.0, -10), ep.d = c.d;

  const int64_t expert_bytes = prepacked_bytes(c.n, c.k);
  DeviceBuffer d_pre{static_cast<size_t>(expert_bytes * groups)};
  d_pre.fill(0xA5);
  for (int e = 0; e < groups; ++e) prepack_checked(weights[size_t(e)], c.n, c.k, d_pre.as<unsigned char>() + e * expert_bytes);
  DeviceBuffer d_a = to_device(act.a), d_sizes = to_device(sizes), d_index = to_device(row_index.empty() ? sizes : row_index);
  const size_t out_bytes = size_t(rows * c.n) * (c.d == DType::fp32 ? 4 : 2);
  DeviceBuffer d_out{out_bytes};
  d_out.fill(0xFF);  // NaN: rows of no group must keep it
  GroupedGemmArgs ga;
  ga.gemm.m = masked ? c.max_m : rows, ga.gemm.n = c.n, ga.gemm.k = c.k;
  ga.gemm.a = d_a.get();
  ga.gemm.b.data = d_pre.get();
  ga.gemm.b_prepacked = true;
  ga.gemm.b.global_scale.value = float(ep.gw);
  ga.gemm.d = d_out.get(), ga.gemm.d_dtype = c.d;
  ga.gemm.precision = GemmPrecision::w4a8;
  ga.groups = groups, ga.layout = c.layout, ga.expected_m = c.expected_m;
  (masked ? ga.masked_m : ga.group_ends) = d_sizes.as<int32_t>();
  if (c.tokens > 0) ga.row_index = d_index.as<int32_t>(), ga.a_rows = c.tokens;
  grouped_gemm(ga, nullptr);
  check_cu(driver().cuCtxSynchronize(), "grouped_gemm w4a8");
  std::vector<uint8_t> got(out_bytes);
  d_out.download(got.data(), got.size());
  std::ostringstream label;
  label << "W4A8 grouped " << (masked ? "masked" : c.tokens > 0 ? "contiguous gathered" : "contiguous") << " " << groups
        << " experts rows=" << routed << " n=" << c.n << " k=" << c.k << " expected_m=" << c.expected_m
        << (c.adversarial ? " adversarial" : " realistic")
        << (w4a8_runs_exact(true, c.expected_m, c.n) ? " (the exact mode runs)" : "");
  check_w4a8_output(label.str(), refs, act, weights, c.n, c.k, ep, got);
}

}  // namespace

TEST_SUITE("gpu_gemm_w4a8") {
  TEST_CASE("gemm W4A8 against float64 of the exact NVFP4 product, within the error model") {
    if (current_device().arch != Arch::sm_90a) return;  // (refused elsewhere: the case below)
    std::mt19937 rng(std::random_device{}());
    const W4a8Case cases[] = {
        {1, 4096, 4096},
        {16, 2880, 2880},
        {100, 1000, 4096, true},
        {300, 1000, 4096, true},
        {2048, 1000, 2048, false, DType::bf16, DType::fp32, false, false, true},
        {2048, 200, 96, true},
        {1, 8192, 8192, true},
        {257, 4096, 4096, true},  // the smallest M the FP8 kernel runs
        {384, 2880, 2880},
        {300, 8, 32},
        {16, 1000, 2880, false, DType::bf16, DType::bf16, true, true, false, 0.5f},
        {600, 1000, 2880, false, DType::bf16, DType::bf16, true, true, false, 0.5f},
        {400, 2880, 2880, false, DType::fp16, DType::fp32, false, false, true},
        {2048, 640, 8192, false},
    };
    for (const W4a8Case& c : cases) run_w4a8_case(c, rng);
  }

  TEST_CASE("grouped_gemm W4A8 (contiguous, gathered, masked) against float64 of the exact NVFP4 product") {
    if (current_device().arch != Arch::sm_90a) return;
    std::mt19937 rng(std::random_device{}());
    using L = GroupedLayout;
    const W4a8GroupedCase cases[] = {
        // ragged experts, empty ones (first, middle, last), padding rows past the groups (sorted
        // rows: experts of kW4A8GroupedLeastN rows, as fewer run the exact mode)
        {L::contiguous, 4096, 512, {0, 300, 17, 0, 129, 1, 64, 0}, 512, 40},
        {L::contiguous, 4096, 576, {200, 0, 333, 65}, 512, 0, 0, 0, true, DType::fp32},
        {L::contiguous, 1000, 2880, {200, 0, 333, 65}, 512},  // experts of fewer rows: the exact mode
        // the tile chosen for fewer rows than the groups hold (more row tiles an expert)
        {L::contiguous, 640, 1024, {257, 3, 190}, 64, 8},
        // gathered: tokens' rows through a row index, one index outside A (a NaN row), padding
        {L::contiguous, 4096, 1024, {120, 0, 260, 31}, 512, 24, 0, 300, false, DType::bf16, 2},
        {L::contiguous, 4096, 96, {7, 90, 0, 150}, 512, 0, 0, 64, true},
        {L::contiguous, 512, 2880, {40, 17, 0, 33, 1}, 32, 16, 0, 80},  // the exact mode, its rows copied first
        // masked: counts up to max_m, empty groups, rows past the counts poisoned
        {L::masked, 4096, 512, {300, 0, 17, 129, 300, 1}, 512, 0, 300},
        {L::masked, 4096, 576, {0, 64, 200}, 256, 0, 200, 0, true, DType::fp32},
        {L::masked, 128, 512, {40, 0, 5}, 16, 0, 48},
    };
    for (const W4a8GroupedCase& c : cases) run_w4a8_grouped_case(c, rng);
  }

  // The epilogue takes the same fp32 sums as a plain W4A8 call on the same tile (the fold's row
  // factors applied per stored row, so in the SwiGLU row order too): y = silu(g) u of that call's
  // FP32 D, one BF16 rounding (2^-8), the epilogue's exp and divide approximations and the scale's
  // product order (2^-16 of |g u|).
  TEST_CASE("W4A8 with the SwiGLU epilogue: silu(gate) * up of a plain W4A8 call's FP32 sums, dense and gathered") {
    if (current_device().arch != Arch::sm_90a) return;
    std::mt19937 rng(std::random_device{}());
    const int64_t inter = 2048, n = 2 * inter, k = 512, tokens = 200;
    const GemmBackend& backend = gemm_backend(Arch::sm_90a, "test");
    for (const bool grouped : {false, true}) {
      CAPTURE(grouped);
      const int groups = grouped ? 3 : 1;
      const int64_t m = grouped ? 500 : 300;  // past the exact mode's rows (dense 256, grouped 128 an expert)
      const std::vector<float> gscales{1e-3f, 2e-3f, 5e-4f};
      DeviceBuffer plain(size_t(prepacked_bytes(n, k) * groups)), paired(size_t(prepacked_bytes(n, k) * groups));
      for (int e = 0; e < groups; ++e) {
        const Weight w = random_weight(n, k, false, rng);
        DeviceBuffer d_packed = to_device(w.packed), d_scales = to_device(w.scales);
        for (const int64_t interleave : {int64_t(-1), int64_t(0)}) {  // stored order, and SwiGLU's (ModelOpt halves)
          PrepackArgs pre;
          pre.weight = {d_packed.get(), 0, d_scales.get(), ScaleLayout::linear, {}};
          pre.n = n, pre.k = k, pre.swiglu_interleave = interleave;
          pre.out = static_cast<unsigned char*>((interleave < 0 ? plain : paired).get()) + e * prepacked_bytes(n, k);
          prepack(pre, nullptr);
        }
      }
      const Activations act = random_activations(grouped ? tokens : m, k, DType::bf16, false, rng);
      const std::vector<int32_t> ends{300, 300, 500};  // experts of 300, 0 and 200 rows
      std::vector<int32_t> row_index(static_cast<size_t>(m));
      for (auto& r : row_index) r = int32_t(rng() % uint64_t(tokens));
      DeviceBuffer d_a = to_device(act.a), d_ends = to_device(ends), d_index = to_device(row_index), d_gs = to_device(gscales);
      DeviceBuffer d_sums(size_t(m * n * 4)), d_y(size_t(m * inter * 2));
      d_sums.fill(0xFF), d_y.fill(0xFF);
      GroupedGemmArgs ga;
      ga.gemm.m = m, ga.gemm.n = n, ga.gemm.k = k, ga.gemm.a = d_a.get(), ga.gemm.b_prepacked = true;
      ga.gemm.b.global_scale = grouped ? GlobalScale{1.0f, d_gs.as<float>(), true} : GlobalScale{gscales[0], nullptr, false};
      ga.gemm.alpha = 0.75f, ga.gemm.precision = GemmPrecision::w4a8;
      ga.groups = groups, ga.group_ends = d_ends.as<int32_t>(), ga.expected_m = 512;
      ga.row_index = d_index.as<int32_t>(), ga.a_rows = tokens;
      GroupedGemmArgs sums = ga, fused = ga;
      sums.gemm.b.data = plain.get(), sums.gemm.d = d_sums.get(), sums.gemm.d_dtype = DType::fp32;
      fused.gemm.b.data = paired.get(), fused.gemm.d = d_y.get(), fused.gemm.epilogue = GemmEpilogue::swiglu;
      // one tile for both (the fused call's), so each output's sum runs in the same order
      const GemmCall call = grouped ? grouped_gemm_call(fused, "test") : gemm_call(fused.gemm, "test");
      REQUIRE(call.args.precision == GemmPrecision::w4a8);
      const GemmSpec problem = gemm_fp8_problem(gemm_problem_on(Arch::sm_90a, call));
      const GemmTile tile = backend.heuristic(problem, grouped ? call.expected_m * groups : m, current_device().sm_count);
      if (grouped) {
        grouped_gemm_with_tile(sums, tile, nullptr);
        grouped_gemm_with_tile(fused, tile, nullptr);
      } else {
        gemm_with_tile(sums.gemm, tile, nullptr);
        gemm_with_tile(fused.gemm, tile, nullptr);
      }
      check_cu(driver().cuCtxSynchronize(), "W4A8 with the SwiGLU epilogue");
      std::vector<float> g_u(size_t(m * n));
      std::vector<uint16_t> y(size_t(m * inter));
      d_sums.download(g_u.data(), g_u.size() * 4);
      d_y.download(y.data(), y.size() * 2);
      int64_t checked = 0;
      for (int64_t r = 0; r < m; ++r)
        for (int64_t i = 0; i < inter; ++i) {
          const double g = g_u[size_t(r * n + i)], u = g_u[size_t(r * n + inter + i)];
          const double ref = g / (1.0 + std::exp(-g)) * u, got = nvfp4k::bf16_bits_to_float(y[size_t(r * inter + i)]);
          const double bound = std::ldexp(std::fabs(ref), -8) + std::ldexp(std::fabs(g * u), -16) + 1e-30;
          if (!(std::fabs(got - ref) <= bound)) {
            FAIL_CHECK("m=" << m << " n=" << n << " k=" << k << ": first wrong element (" << r << ", " << i << ") = " << got
                            << ", silu(g) u of the plain call's sums g = " << g << ", u = " << u << ": " << ref
                            << " (bound " << bound << ")");
            r = m;
            break;
          }
          ++checked;
        }
      CHECK(checked == m * inter);
    }
  }

  TEST_CASE("gemm W4A8 off sm_90a: refused, naming the precision and the arch's native FP4 path") {
    const Arch arch = current_device().arch;
    if (arch == Arch::sm_90a) return;
    alignas(16) static unsigned char buffer[1 << 16];
    GemmArgs g;
    g.m = 4, g.n = 64, g.k = 64;
    g.a = g.d = buffer;
    g.b.data = buffer;
    g.b_prepacked = true;
    g.precision = GemmPrecision::w4a8;
    try {
      gemm(g, nullptr);
      FAIL("no error");
    } catch (const Error& e) {
      CHECK(e.status() == Status::unsupported);
      CHECK(std::string(e.what()).find("w4a8") != std::string::npos);
      CHECK(std::string(e.what()).find("native FP4") != std::string::npos);
      CHECK(std::string(e.what()).find(to_string(arch)) != std::string::npos);
    }
  }
}
