// RMSNorm of A inside the sm_90a GEMM (GemmArgs::a_rmsnorm_weight) against a float64 reference
// of its own math (sm90/a_rmsnorm.cuh), each element within the bound the 16-bit rounding of
// decoded weight x norm weight allows, and against the chain it replaces (rmsnorm_quantize's
// normed output, then gemm): rows of very different scales (and a zero row), a random norm
// weight with signs, in A's type or fp32, poisoned D with padded rows, K a multiple of the
// stage or not, both weight layouts and the tiles that split K, slice it or run tall.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "../dequantize_fixture.hpp"
#include "gemm_output.hpp"
#include "common/nvfp4_format.cuh"
#include "common/scale_layout.cuh"
#include "core/gpu_util.hpp"
#include "core/launcher.hpp"
#include "ops/gemm/gemm.hpp"
#include "ops/gemm/sm90/tiles.hpp"

using namespace nvfp4::jit;
using namespace nvfp4::jit::detail;

namespace {

struct NormCase {
  int64_t m, n, k;
  DType a = DType::bf16, d = DType::bf16;
  bool weight_fp32 = false;  // the norm weight in fp32, else in A's type
  bool prepacked = false;    // the weight prepacked, else ModelOpt's linear layout
  GemmEpilogue epilogue = GemmEpilogue::none;  // swiglu: checked against the chain only
  sm90::Tile tile{};                           // block_m 0: the heuristic's
  float eps = 1e-5f;
};

uint16_t half_bits(DType t, float v) { return t == DType::bf16 ? nvfp4k::float_to_bf16_bits(v) : nvfp4k::float_to_fp16_bits(v); }

// The call's D (bytes, row stride n_out + 8 elements, poisoned with 0xFF before the call).
std::vector<uint8_t> run(const NormCase& c, GemmArgs g, int64_t n_out, int esize) {
  DeviceBuffer d_out(size_t(c.m * (n_out + 8) * esize));
  d_out.fill(0xFF);  // NaN in every output type
  g.d = d_out.get(), g.d_dtype = c.d, g.d_row_stride = n_out + 8;
  if (c.tile.block_m)
    gemm_with_tile(g, sm90::to_config(c.tile), nullptr);
  else
    gemm(g, nullptr);
  check_cu(driver().cuCtxSynchronize(), "gemm");
  std::vector<uint8_t> got(d_out.bytes());
  d_out.download(got.data(), got.size());
  return got;
}

void run_norm_case(const NormCase& c, std::mt19937& rng) {
  CAPTURE(c.m);
  CAPTURE(c.n);
  CAPTURE(c.k);
  CAPTURE(c.prepacked);
  CAPTURE(c.weight_fp32);
  const std::string name = "m=" + std::to_string(c.m) + " n=" + std::to_string(c.n) + " k=" + std::to_string(c.k) +
                           (c.tile.block_m ? " tile " + sm90::describe(c.tile) : std::string()) + ": ";
  const bool swiglu = c.epilogue == GemmEpilogue::swiglu;
  const int64_t n_out = swiglu ? c.n / 2 : c.n;
  const int esize = c.d == DType::fp32 ? 4 : 2;
  testutil::HostNvfp4 w(c.n, c.k, ScaleLayout::linear, rng);
  const double gw = std::ldexp(1.0 + (rng() % 100) / 100.0, -10);

  // A: rows of very different scales (2^-8 .. 2^8 for FP16's range, 2^-24 .. 2^24 for BF16),
  // row 2 all zeros (its rms is sqrt(eps)); the norm weight random with signs, not ones
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uniform(0.25f, 2.0f);
  const int spread = c.a == DType::fp16 ? 8 : 24;
  std::vector<uint16_t> a(size_t(c.m * c.k));
  std::vector<double> ad(a.size());
  for (int64_t m = 0; m < c.m; ++m) {
    const float scale = m == 2 ? 0.0f : std::ldexp(1.0f, int(rng() % unsigned(2 * spread + 1)) - spread);
    for (int64_t k = 0; k < c.k; ++k) {
      const size_t at = size_t(m * c.k + k);
      a[at] = half_bits(c.a, normal(rng) * scale);
      ad[at] = testutil::half_bits_to_double(c.a, a[at]);
    }
  }
  std::vector<float> g32(size_t(c.k));
  std::vector<uint16_t> g16(size_t(c.k));
  std::vector<double> gd(size_t(c.k));
  for (int64_t k = 0; k < c.k; ++k) {
    const float v = (rng() % 8 == 0 ? -1.0f : 1.0f) * uniform(rng);
    g16[size_t(k)] = half_bits(c.a, v);
    g32[size_t(k)] = v;
    gd[size_t(k)] = c.weight_fp32 ? double(v) : testutil::half_bits_to_double(c.a, g16[size_t(k)]);
  }

  DeviceBuffer d_a = to_device(a), d_w = to_device(w.packed), d_s = to_device(w.scales);
  DeviceBuffer d_g = c.weight_fp32 ? to_device(g32) : to_device(g16);
  DeviceBuffer d_pre(size_t(prepacked_bytes(c.n, c.k)));
  GemmArgs g;
  g.m = c.m, g.n = c.n, g.k = c.k;
  g.a = d_a.get(), g.a_dtype = c.a;
  g.b = {d_w.get(), 0, d_s.get(), ScaleLayout::linear, {float(gw), nullptr, false}};
  if (c.prepacked) {
    PrepackArgs p;
    p.weight = g.b, p.n = c.n, p.k = c.k, p.out = d_pre.get(), p.swiglu_interleave = swiglu ? 0 : -1;
    prepack(p, nullptr);
    g.b = {d_pre.get(), 0, nullptr, ScaleLayout::linear, {float(gw), nullptr, false}};
    g.b_prepacked = true;
  }
  g.epilogue = c.epilogue;
  GemmArgs fused = g;
  fused.a_rmsnorm_weight = d_g.get(), fused.a_rmsnorm_weight_fp32 = c.weight_fp32, fused.a_rmsnorm_eps = c.eps;
  const std::vector<uint8_t> got = run(c, fused, n_out, esize);

  // the chain: rmsnorm_quantize's normed output (its NVFP4 output unused), then the plain gemm
  DeviceBuffer d_y(a.size() * 2), d_q(size_t(c.m * c.k / 2)), d_qs(size_t(c.m * c.k / 16));
  RmsNormQuantizeArgs r;
  r.in = d_a.get(), r.in_dtype = c.a, r.rows = c.m, r.k = c.k, r.weight = d_g.get(), r.weight_fp32 = c.weight_fp32;
  r.eps = c.eps, r.normed = d_y.get();
  r.out.data = d_q.get(), r.out.scales = d_qs.get();
  rmsnorm_quantize(r, nullptr);
  GemmArgs chain_args = g;
  chain_args.a = d_y.get();
  const std::vector<uint8_t> chain = run(c, chain_args, n_out, esize);

  // float64 of the fused math: ref = gw * inv_rms * sum_k a g w, and sum_k |a g w| for the bound
  std::vector<double> inv(size_t(c.m)), abs_a(size_t(c.m));
  for (int64_t m = 0; m < c.m; ++m) {
    double s = 0;
    for (int64_t k = 0; k < c.k; ++k) {
      s += ad[size_t(m * c.k + k)] * ad[size_t(m * c.k + k)];
      abs_a[size_t(m)] += std::fabs(ad[size_t(m * c.k + k)]);
    }
    inv[size_t(m)] = 1.0 / std::sqrt(s / double(c.k) + double(c.eps));
  }
  std::vector<double> wd(size_t(c.n * c.k));
  for (int64_t n = 0; n < c.n; ++n)
    for (int64_t k = 0; k < c.k; ++k) wd[size_t(n * c.k + k)] = w.value(n, k) * gd[size_t(k)];
  std::vector<double> ref(size_t(c.m * c.n)), mag(ref.size());
  testutil::on_all_cores([&](unsigned t, unsigned threads) {
    for (int64_t m = t; m < c.m; m += threads)
      for (int64_t n = 0; n < c.n; ++n) {
        double s = 0, sa = 0;
        for (int64_t k = 0; k < c.k; ++k) {
          const double p = ad[size_t(m * c.k + k)] * wd[size_t(n * c.k + k)];
          s += p;
          sa += std::fabs(p);
        }
        ref[size_t(m * c.n + n)] = gw * inv[size_t(m)] * s;
        mag[size_t(m * c.n + n)] = gw * inv[size_t(m)] * sa;
      }
  });

  // Bounds: the decoded weight x g rounded to A's type (unit roundoff u: 2^-8 BF16, 2^-11 FP16;
  // an fp32 g rounded to it first, 2u; FP16's products below 2^-14 on a grid of 2^-24, at
  // 2^-7 of the weight's scale), the fp32 sums, 1 / rms and D's rounding.
  const double u = c.a == DType::bf16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11);
  const double u_g = c.weight_fp32 ? 2 * u : u;
  const double u_out = c.d == DType::fp32 ? std::ldexp(1.0, -22) : c.d == DType::bf16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11);
  testutil::FrobeniusError to_ref, to_chain;
  double worst = 0, worst_chain = 0;  // the largest |error| / bound
  for (int64_t m = 0; m < c.m; ++m)
    for (int64_t n = 0; n < n_out + 8; ++n) {
      const size_t at = size_t(m * (n_out + 8) + n) * esize;
      if (n >= n_out) {
        if (got[at] != 0xFF) {
          FAIL_CHECK(name << "padding element (" << m << ", " << n << ") written");
          return;
        }
        continue;
      }
      const double v = testutil::output_value(c.d, &got[at]), ch = testutil::output_value(c.d, &chain[at]);
      if (!std::isfinite(v) || !std::isfinite(ch)) {
        FAIL_CHECK(name << "element (" << m << ", " << n << ") = " << v << " (chain " << ch << "): unwritten or not finite");
        return;
      }
      if (!swiglu) {
        const double r = ref[size_t(m * c.n + n)], s = mag[size_t(m * c.n + n)];
        const double fp16_floor = c.a == DType::fp16 ? std::ldexp(gw * inv[size_t(m)] * abs_a[size_t(m)], -18) : 0.0;
        const double bound = (u_g + std::ldexp(1.0, -14)) * s + fp16_floor + u_out * std::fabs(r) + 1e-30;
        if (std::fabs(v - r) > bound) {
          FAIL_CHECK(name << "first element past the bound: (" << m << ", " << n << ") = " << v << ", float64 " << r
                          << " (|error| " << std::fabs(v - r) << " > " << bound << ")");
          return;
        }
        // the chain rounds x * inv_rms and then * g: twice the operand rounding, its own D rounding
        const double chain_bound = (2 * u + u_g + std::ldexp(1.0, -13)) * s + 2 * fp16_floor + 2 * u_out * std::fabs(r) + 1e-30;
        if (std::fabs(v - ch) > chain_bound) {
          FAIL_CHECK(name << "first element past the chain's bound: (" << m << ", " << n << ") = " << v << ", chain " << ch
                          << " (|difference| " << std::fabs(v - ch) << " > " << chain_bound << ")");
          return;
        }
        to_ref.add(v, r);
        worst = std::max(worst, std::fabs(v - r) / bound);
        worst_chain = std::max(worst_chain, std::fabs(v - ch) / chain_bound);
      }
      to_chain.add(v, ch);
    }
  MESSAGE(name << "relative Frobenius error " << to_ref.relative() << " to float64, " << to_chain.relative()
               << " to the chain; worst element at " << worst << " of its bound (" << worst_chain << " of the chain's)");
  if (!swiglu) CHECK(to_ref.relative() < testutil::rounding_bound(c.d) + 2 * u);
  CHECK(to_chain.relative() < 2 * testutil::rounding_bound(c.d) + 4 * u);
}

}  // namespace

TEST_SUITE("gpu_gemm_a_rmsnorm") {
  TEST_CASE("gemm with RMSNorm of A: m = 1 to 300, K = 4096 and a tail, both layouts, the weight in A's type or fp32") {
    constexpr DType bf16 = DType::bf16, fp16 = DType::fp16, fp32 = DType::fp32;
    std::mt19937 rng(std::random_device{}());
    const NormCase cases[] = {
        {1, 3072, 4096},
        {5, 1024, 4096, bf16, bf16, true, true},
        {16, 1024, 2080, bf16, bf16, false, false},
        {64, 768, 4096, fp16, fp16, false, true},
        {300, 1024, 4096, bf16, bf16, false, true},
        {300, 512, 2080, fp16, bf16, true, false},
        {5, 512, 4096, bf16, fp32, true, true},
    };
    for (const NormCase& c : cases) run_norm_case(c, rng);
  }

  TEST_CASE("gemm with RMSNorm of A on given tiles: split K, two k slices, 128 rows of two or three consumers") {
    std::mt19937 rng(std::random_device{}());
    auto with = [](NormCase c, sm90::Tile t) {
      c.tile = t;
      return c;
    };
    const NormCase cases[] = {
        with({3, 1024, 4096}, {8, 1, 4, 2, 128}),
        with({5, 512, 4096, DType::bf16, DType::bf16, false, true}, {8, 1, 4, 1, 256, 2}),
        with({130, 512, 2080}, {128, 2, 4, 1, 128}),
        with({100, 768, 4096, DType::bf16, DType::bf16, true, true}, {128, 3, 4, 1, 128}),
    };
    for (const NormCase& c : cases) run_norm_case(c, rng);
  }

  TEST_CASE("gemm with RMSNorm of A and the SwiGLU epilogue (Llama's gate_up), against the chain") {
    std::mt19937 rng(std::random_device{}());
    const NormCase cases[] = {
        {1, 2 * 1024, 4096, DType::bf16, DType::bf16, false, true, GemmEpilogue::swiglu},
        {16, 2 * 1024, 4096, DType::bf16, DType::bf16, true, true, GemmEpilogue::swiglu},
    };
    for (const NormCase& c : cases) run_norm_case(c, rng);
  }
}
