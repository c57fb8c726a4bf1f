// gemm in the W4A8 precision mode (sm_90a) against float64 of the EXACT NVFP4 product (the
// decoded values, unrounded activations): fresh random data each run, realistic (Gaussian
// activations with outlier channels, block scales spread as a quantizer leaves them) and
// adversarial (block scales over all of E4M3, subnormal ones, zero blocks and rows, activations
// over 30 binades); poisoned outputs; ragged M, N and K. The bounds come from the error model of
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
#include <vector>

#include "core/error.hpp"
#include "core/gpu_util.hpp"
#include "core/launcher.hpp"
#include "gemm_output.hpp"
#include "nvfp4/jit.hpp"
#include "ops/gemm/backend.hpp"

using namespace nvfp4::jit;
using namespace nvfp4::jit::detail;

namespace {

struct W4a8Case {
  int64_t m, n, k;
  bool adversarial = false;
  DType a = DType::bf16, d = DType::fp32;
  bool bias = false, device_gscale = false, workspace = false;
  float alpha = 1.0f;
};

double e2m1(unsigned nib) {
  static const double v[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  return (nib & 8 ? -1 : 1) * v[nib & 7];
}
double e4m3(uint8_t s) {  // from the format's definition
  const int ex = (s >> 3) & 15, m = s & 7;
  return ex == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1 + m / 8.0, ex - 7);
}
// The E4M3 code nearest below-or-at v (v in [2^-9, 448]): a scale as a quantizer leaves it.
uint8_t e4m3_at_most(double v) {
  uint8_t best = 1;
  for (unsigned c = 1; c < 0x7F; ++c)
    if (e4m3(uint8_t(c)) <= v) best = uint8_t(c);
  return best;
}
// The least e with 6 * max_scale <= 448 * 2^e (0 for a row without a nonzero scale).
int fold_exponent_of(double max_scale) {
  if (max_scale <= 0) return 0;
  int e = -40;
  while (6 * max_scale > 448 * std::ldexp(1.0, e)) ++e;
  return e;
}

void run_w4a8_case(const W4a8Case& c, std::mt19937& rng) {
  CAPTURE(c.m);
  CAPTURE(c.n);
  CAPTURE(c.k);
  CAPTURE(c.adversarial);
  const int64_t kb = c.k / 16;
  std::normal_distribution<double> normal(0.0, 1.0);
  // the weight: ModelOpt layout, linear scales
  std::vector<uint8_t> packed(size_t(c.n * c.k / 2)), scales(size_t(c.n * kb));
  for (auto& b : packed) b = uint8_t(rng());
  for (int64_t n = 0; n < c.n; ++n) {
    const double row = std::ldexp(1.0, -int(rng() % 3));  // rows 1-4x apart
    for (int64_t b = 0; b < kb; ++b) {
      uint8_t& s = scales[size_t(n * kb + b)];
      if (!c.adversarial)
        s = e4m3_at_most(std::max(std::ldexp(1.0, -9), 448 * row * std::exp2(-std::fabs(1.5 * normal(rng)))));
      else
        s = n % 7 == 3 ? uint8_t(rng() % 8)           // subnormal scales (and zero blocks) only
            : n % 11 == 5 ? uint8_t(0)                // a zero row
            : rng() % 8 == 0 ? uint8_t(0)             // zero blocks
                             : uint8_t(rng() % 0x7F);  // every finite E4M3 scale
    }
  }
  std::vector<double> w(size_t(c.n * c.k));
  std::vector<int> fold_e(size_t(c.n));
  for (int64_t n = 0; n < c.n; ++n) {
    double max_scale = 0;
    for (int64_t b = 0; b < kb; ++b) max_scale = std::max(max_scale, e4m3(scales[size_t(n * kb + b)]));
    fold_e[size_t(n)] = fold_exponent_of(max_scale);
    for (int64_t k = 0; k < c.k; ++k) {
      const uint8_t byte = packed[size_t(n * c.k / 2 + k / 2)];
      w[size_t(n * c.k + k)] = e2m1(k % 2 ? byte >> 4 : byte & 15) * e4m3(scales[size_t(n * kb + k / 16)]);
    }
  }
  // activations: 16-bit, rounded there first (the exact product is of the values gemm reads)
  std::vector<uint16_t> a(size_t(c.m * c.k));
  std::vector<double> x(a.size());
  std::vector<int64_t> outliers;
  for (int i = 0; i < 4; ++i) outliers.push_back(int64_t(rng() % uint64_t(c.k)));
  for (int64_t m = 0; m < c.m; ++m)
    for (int64_t k = 0; k < c.k; ++k) {
      double v = normal(rng);
      if (!c.adversarial && std::find(outliers.begin(), outliers.end(), k) != outliers.end()) v *= 40;
      if (c.adversarial) v = m % 13 == 7 ? 0.0 : std::ldexp(v, int(rng() % 31) - 15);
      const uint16_t h = c.a == DType::bf16 ? nvfp4k::float_to_bf16_bits(float(v)) : nvfp4k::float_to_fp16_bits(float(v));
      a[size_t(m * c.k + k)] = h;
      x[size_t(m * c.k + k)] = testutil::half_bits_to_double(c.a, h);
    }
  std::vector<double> row_scale(size_t(c.m));
  for (int64_t m = 0; m < c.m; ++m) {
    double amax = 0;
    for (int64_t k = 0; k < c.k; ++k) amax = std::max(amax, std::fabs(x[size_t(m * c.k + k)]));
    row_scale[size_t(m)] = amax > 0 ? amax / 448 : 1.0;
  }
  // The model's per-value error bounds.
  auto rounding = [](double v, double unit) {  // |RN_e4m3(v / unit) - v / unit| * unit at most
    return v == 0 ? 0.0 : std::max(std::fabs(v) / unit / 17, std::ldexp(1.0, -10)) * unit;
  };
  std::vector<double> dw(w.size()), dx(x.size());
  for (int64_t n = 0; n < c.n; ++n)
    for (int64_t k = 0; k < c.k; ++k)
      dw[size_t(n * c.k + k)] = rounding(w[size_t(n * c.k + k)], std::ldexp(1.0, fold_e[size_t(n)]));
  for (int64_t m = 0; m < c.m; ++m)
    for (int64_t k = 0; k < c.k; ++k) dx[size_t(m * c.k + k)] = rounding(x[size_t(m * c.k + k)], row_scale[size_t(m)]);

  const double gw = std::ldexp(1.0 + (rng() % 100) / 100.0, -10);
  std::vector<float> bias(size_t(c.n));
  for (auto& b : bias) b = float(normal(rng));

  // on the GPU: prepack (checked against the CPU's, fold exponent bytes included), then gemm
  const int64_t pre_bytes = prepacked_bytes(c.n, c.k);
  DeviceBuffer d_packed = to_device(packed), d_scales = to_device(scales), d_pre{static_cast<size_t>(pre_bytes)};
  d_pre.fill(0xA5);
  Nvfp4Tensor wt{d_packed.get(), 0, d_scales.get(), ScaleLayout::linear, {}};
  prepack({wt, c.n, c.k, d_pre.get()}, nullptr);
  std::vector<uint8_t> cpu_pre(static_cast<size_t>(pre_bytes)), gpu_pre(static_cast<size_t>(pre_bytes));
  cpu::prepack({{packed.data(), 0, scales.data(), ScaleLayout::linear, {}}, c.n, c.k, cpu_pre.data()});
  check_cu(driver().cuCtxSynchronize(), "prepack");
  d_pre.download(gpu_pre.data(), gpu_pre.size());
  const auto pre = std::mismatch(gpu_pre.begin(), gpu_pre.end(), cpu_pre.begin());
  REQUIRE_MESSAGE(pre.first == gpu_pre.end(), "GPU prepack differs from the CPU's at byte " << (pre.first - gpu_pre.begin()));

  DeviceBuffer d_a = to_device(a), d_bias = to_device(bias), d_gscale = to_device(std::vector<float>{float(gw)});
  const size_t out_bytes = size_t(c.m * c.n) * (c.d == DType::fp32 ? 4 : 2);
  DeviceBuffer d_out{out_bytes};
  d_out.fill(0xFF);  // NaN: every element must be written
  GemmArgs g;
  g.m = c.m, g.n = c.n, g.k = c.k;
  g.a = d_a.get(), g.a_dtype = c.a;
  g.b.data = d_pre.get();
  g.b_prepacked = true;
  g.b.global_scale = c.device_gscale ? GlobalScale{0.0f, d_gscale.as<float>(), false} : GlobalScale{float(gw), nullptr, false};
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

  // float64 reference and bounds, per row
  const double scale = std::fabs(c.alpha * gw), out_unit = c.d == DType::fp32 ? std::ldexp(1.0, -22) : std::ldexp(1.0, -8);
  std::vector<double> err2(size_t(c.m)), ref2(size_t(c.m)), bound2(size_t(c.m));
  std::vector<int64_t> bad(size_t(c.m), -1);
  std::vector<double> bad_got(size_t(c.m)), bad_ref(size_t(c.m)), bad_bound(size_t(c.m));
  testutil::on_all_cores([&](unsigned t, unsigned threads) {
    for (int64_t m = t; m < c.m; m += threads)
      for (int64_t n = 0; n < c.n; ++n) {
        const double* xr = &x[size_t(m * c.k)];
        const double* dxr = &dx[size_t(m * c.k)];
        const double* wr = &w[size_t(n * c.k)];
        const double* dwr = &dw[size_t(n * c.k)];
        double s = 0, det = 0, rss = 0, acc_det = 0, acc_rss = 0, step_abs = 0;
        for (int64_t k = 0; k < c.k; ++k) {
          const double p = xr[k] * wr[k];
          s += p;
          step_abs += std::fabs(p);
          const double e1 = dwr[k] * std::fabs(xr[k]), e2 = std::fabs(wr[k]) * dxr[k], e3 = dwr[k] * dxr[k];
          det += e1 + e2 + e3;
          rss += e1 * e1 + e2 * e2 + e3 * e3;
          if (k % 32 == 31 || k + 1 == c.k) {
            const double step = std::ldexp(std::fabs(s) + step_abs, -13);
            acc_det += step;
            acc_rss += step * step;
            step_abs = 0;
          }
        }
        const double ref = c.alpha * gw * s + (c.bias ? double(bias[size_t(n)]) : 0.0);
        const double out_round = out_unit * std::fabs(ref) + 1e-30;
        const double bound = scale * (det + acc_det) + 2 * out_round;
        const double value = testutil::output_value(c.d, &got[size_t(m * c.n + n) * (c.d == DType::fp32 ? 4 : 2)]);
        const double e = value - ref;
        err2[size_t(m)] += e * e;
        ref2[size_t(m)] += ref * ref;
        bound2[size_t(m)] += scale * scale * (rss + acc_rss) + out_round * out_round;
        if (bad[size_t(m)] < 0 && !(std::fabs(e) <= bound)) {
          bad[size_t(m)] = n;
          bad_got[size_t(m)] = value, bad_ref[size_t(m)] = ref, bad_bound[size_t(m)] = bound;
        }
      }
  });
  double e2 = 0, r2 = 0, b2 = 0, worst_row = 0;
  int64_t worst = 0;
  for (int64_t m = 0; m < c.m; ++m) {
    e2 += err2[size_t(m)], r2 += ref2[size_t(m)], b2 += bound2[size_t(m)];
    const double rel = ref2[size_t(m)] > 0 ? std::sqrt(err2[size_t(m)] / ref2[size_t(m)]) : std::sqrt(err2[size_t(m)]);
    if (rel > worst_row || std::isnan(rel)) worst_row = rel, worst = m;
    if (bad[size_t(m)] >= 0) {
      FAIL_CHECK("D[" << m << ", " << bad[size_t(m)] << "] = " << bad_got[size_t(m)] << ", reference " << bad_ref[size_t(m)]
                      << ": off by more than the model's bound " << bad_bound[size_t(m)]);
      break;
    }
  }
  const double frob = std::sqrt(e2 / std::max(r2, 1e-300)), frob_bound = std::sqrt(b2 / std::max(r2, 1e-300));
  MESSAGE("W4A8 m=" << c.m << " n=" << c.n << " k=" << c.k << std::string(c.adversarial ? " adversarial" : " realistic")
                    << std::string(c.m <= kW4A8ExactRows ? " (decode size: the exact mode runs)" : "")
                    << ": relative Frobenius error " << frob * 100 << "% (model bound " << frob_bound * 100
                    << "%), worst row " << worst << " " << worst_row * 100 << "%");
  CHECK_MESSAGE(frob <= frob_bound, "relative Frobenius error " << frob << " above the model's " << frob_bound);
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
