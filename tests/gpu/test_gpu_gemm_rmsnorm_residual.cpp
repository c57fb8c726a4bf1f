// RMSNorm of A inside the sm_90a GEMM (GemmArgs::a_rmsnorm_weight) and the residual add in its
// epilogue (GemmArgs::residual) against a float64 reference of their math (sm90/a_rmsnorm.cuh),
// each element within the bound the 16-bit rounding of decoded weight x norm weight allows, and
// against the chain they replace (rmsnorm_quantize's normed output, then gemm; the residual
// added in float64): rows of very different scales (and a zero row), a random norm weight with
// signs, in A's type or fp32, poisoned D with padded rows (or D holding the residual, in place),
// K a multiple of the stage or not, both weight layouts and the tiles that split K, slice it or
// run tall.
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
  bool norm = true;   // RMSNorm of A in the GEMM
  enum Residual { none, own, in_place } residual = none;  // own: a buffer of its own; in_place: D holds it
};

uint16_t half_bits(DType t, float v) { return t == DType::bf16 ? nvfp4k::float_to_bf16_bits(v) : nvfp4k::float_to_fp16_bits(v); }

// The call's D (bytes, row stride n_out + 8 elements): poisoned with 0xFF before the call, or
// holding `initial` (the residual, in place: g.residual is then D).
std::vector<uint8_t> run(const NormCase& c, GemmArgs g, int64_t n_out, int esize, const std::vector<uint8_t>* initial = nullptr) {
  DeviceBuffer d_out(size_t(c.m * (n_out + 8) * esize));
  if (initial)
    d_out.upload(initial->data(), initial->size());
  else
    d_out.fill(0xFF);  // NaN in every output type
  g.d = d_out.get(), g.d_dtype = c.d, g.d_row_stride = n_out + 8;
  if (initial) g.residual = d_out.get(), g.residual_row_stride = n_out + 8;
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
  CAPTURE(int(c.residual));
  const std::string name = "m=" + std::to_string(c.m) + " n=" + std::to_string(c.n) + " k=" + std::to_string(c.k) +
                           (c.tile.block_m ? " tile " + sm90::describe(c.tile) : std::string()) +
                           (c.norm ? "" : " no norm") +
                           (c.residual == NormCase::own ? " residual" : c.residual == NormCase::in_place ? " residual in place" : "") +
                           ": ";
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
    gd[size_t(k)] = !c.norm ? 1.0 : c.weight_fp32 ? double(v) : testutil::half_bits_to_double(c.a, g16[size_t(k)]);
  }
  // the residual [m, n_out] in D's type, rows n_out + 8 apart (the padding 0xFF, never written)
  std::vector<uint8_t> residual(size_t(c.m * (n_out + 8) * esize), 0xFF);
  std::vector<double> res(size_t(c.m * n_out), 0.0);
  if (c.residual != NormCase::none)
    for (int64_t m = 0; m < c.m; ++m)
      for (int64_t n = 0; n < n_out; ++n) {
        const float v = 4 * normal(rng);
        uint8_t* at = &residual[size_t(m * (n_out + 8) + n) * esize];
        if (c.d == DType::fp32) {
          std::memcpy(at, &v, 4);
        } else {
          const uint16_t h = half_bits(c.d, v);
          std::memcpy(at, &h, 2);
        }
        res[size_t(m * n_out + n)] = testutil::output_value(c.d, at);
      }

  DeviceBuffer d_a = to_device(a), d_w = to_device(w.packed), d_s = to_device(w.scales), d_res = to_device(residual);
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
  if (c.norm) fused.a_rmsnorm_weight = d_g.get(), fused.a_rmsnorm_weight_fp32 = c.weight_fp32, fused.a_rmsnorm_eps = c.eps;
  if (c.residual == NormCase::own) fused.residual = d_res.get(), fused.residual_row_stride = n_out + 8;
  const std::vector<uint8_t> got = run(c, fused, n_out, esize, c.residual == NormCase::in_place ? &residual : nullptr);

  // the chain: rmsnorm_quantize's normed output (its NVFP4 output unused), then the plain gemm
  // (without the norm: the plain gemm on A); the residual added to it in float64 below
  DeviceBuffer d_y(a.size() * 2), d_q(size_t(c.m * c.k / 2)), d_qs(size_t(c.m * c.k / 16));
  GemmArgs chain_args = g;
  if (c.norm) {
    RmsNormQuantizeArgs r;
    r.in = d_a.get(), r.in_dtype = c.a, r.rows = c.m, r.k = c.k, r.weight = d_g.get(), r.weight_fp32 = c.weight_fp32;
    r.eps = c.eps, r.normed = d_y.get();
    r.out.data = d_q.get(), r.out.scales = d_qs.get();
    rmsnorm_quantize(r, nullptr);
    chain_args.a = d_y.get();
  }
  const std::vector<uint8_t> chain = run(c, chain_args, n_out, esize);

  // float64 of the fused math: ref = gw * inv_rms * sum_k a g w, and sum_k |a g w| for the bound
  std::vector<double> inv(size_t(c.m)), abs_a(size_t(c.m));
  for (int64_t m = 0; m < c.m; ++m) {
    double s = 0;
    for (int64_t k = 0; k < c.k; ++k) {
      s += ad[size_t(m * c.k + k)] * ad[size_t(m * c.k + k)];
      abs_a[size_t(m)] += std::fabs(ad[size_t(m * c.k + k)]);
    }
    inv[size_t(m)] = c.norm ? 1.0 / std::sqrt(s / double(c.k) + double(c.eps)) : 1.0;
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
  const double u_g = !c.norm ? 0.0 : c.weight_fp32 ? 2 * u : u;
  const double u_chain = c.norm ? 2 * u : 0.0;  // the chain's x * inv_rms and * g roundings
  const double u_out = c.d == DType::fp32 ? std::ldexp(1.0, -22) : c.d == DType::bf16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11);
  testutil::FrobeniusError to_ref, to_chain;
  double worst = 0, worst_chain = 0;  // the largest |error| / bound
  for (int64_t m = 0; m < c.m; ++m)
    for (int64_t n = 0; n < n_out + 8; ++n) {
      const size_t at = size_t(m * (n_out + 8) + n) * esize;
      if (n >= n_out) {
        if (!std::all_of(&got[at], &got[at] + esize, [](uint8_t b) { return b == 0xFF; })) {
          FAIL_CHECK(name << "padding element (" << m << ", " << n << ") written");
          return;
        }
        continue;
      }
      const double rv = res[size_t(m * n_out + n)];
      const double v = testutil::output_value(c.d, &got[at]), ch = testutil::output_value(c.d, &chain[at]) + rv;
      if (!std::isfinite(v) || !std::isfinite(ch)) {
        FAIL_CHECK(name << "element (" << m << ", " << n << ") = " << v << " (chain " << ch << "): unwritten or not finite");
        return;
      }
      if (!swiglu) {
        const double r = ref[size_t(m * c.n + n)] + rv, s = mag[size_t(m * c.n + n)];
        const double fp16_floor = c.a == DType::fp16 ? std::ldexp(gw * inv[size_t(m)] * abs_a[size_t(m)], -18) : 0.0;
        const double bound = (u_g + std::ldexp(1.0, -14)) * s + fp16_floor + u_out * std::fabs(r) + 1e-30;
        if (std::fabs(v - r) > bound) {
          FAIL_CHECK(name << "first element past the bound: (" << m << ", " << n << ") = " << v << ", float64 " << r
                          << " (|error| " << std::fabs(v - r) << " > " << bound << ")");
          return;
        }
        // the chain rounds x * inv_rms and then * g: twice the operand rounding, its own D rounding
        const double chain_bound = (u_chain + u_g + std::ldexp(1.0, -13)) * s + 2 * fp16_floor +
                                   u_out * (std::fabs(r) + std::fabs(r - rv)) + 1e-30;
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

TEST_SUITE("gpu_gemm_rmsnorm_residual") {
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

  TEST_CASE("gemm with a residual add: a buffer of its own or D itself, with and without RMSNorm of A") {
    constexpr DType bf16 = DType::bf16, fp16 = DType::fp16, fp32 = DType::fp32;
    std::mt19937 rng(std::random_device{}());
    auto with = [](NormCase c, NormCase::Residual r, bool norm) {
      c.residual = r, c.norm = norm;
      return c;
    };
    const NormCase cases[] = {
        with({1, 4096, 4096, bf16, bf16, false, true}, NormCase::own, false),
        with({1, 4096, 14336, bf16, bf16, false, true}, NormCase::in_place, false),  // Llama's down_proj
        with({16, 1024, 4096, bf16, bf16, false, true}, NormCase::in_place, true),
        with({64, 768, 2080, fp16, fp16, true, false}, NormCase::own, true),
        with({300, 512, 4096, bf16, fp32, false, true}, NormCase::in_place, false),
        with({130, 512, 2080, bf16, bf16, false, false, GemmEpilogue::none, {128, 2, 4, 1, 128}}, NormCase::own, true),
        with({3, 1024, 4096, bf16, bf16, false, true, GemmEpilogue::none, {8, 1, 4, 2, 128}}, NormCase::in_place, true),
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
