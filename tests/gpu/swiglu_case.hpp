// The fused SwiGLU epilogue's GPU case (GemmEpilogue::swiglu), shared by the suites of every
// backend: a gate_up weight stored in each row order prepack takes (ModelOpt halves, interleaved
// by 1 and 8), prepacked into sm_90a's 8-row interleave or read as stored (ModelOpt halves: the
// sm_100a / sm_120a backends), dense and grouped (contiguous with empty experts and a row_index
// gather, masked), W4A16 and W4A4, ragged M. Outputs are poisoned (NaN bytes) and padded, so
// every element must be written and no padding touched.
//
// Two bounds per element, with r = silu(g) u the float64 value of the exact products
// (g, u: alpha gw sum_k a w + bias, of the decoded values), y the fused output:
// - to float64: |y - r| <= 2^-8 |r| + 1.2 (|u| E_g + |silu(g)| E_u) + 2^-140, where
//   E_x = (K + 2) 2^-24 S_x bounds the fp32 sum's error (S_x = alpha gw sum_k |a w| + |bias|:
//   K fp32 additions, the scale and bias steps), |silu'| <= 1.1 (x 1.2 for silu's own few ulp
//   of fp32), and 2^-8 |r| covers the one rounding to BF16 (2^-9 relative; FP16's 2^-11,
//   FP32's 2^-24 lie inside) with the silu evaluation's error (the hardware's exp2 and divide
//   approximations: below 2^-19 relative, gemm_epilogue.cuh's silu_mul_fp32).
// - to the unfused chain c = silu(G) U with G, U the BF16 GEMM outputs (float64 SwiGLU of
//   them): |y - c| <= |y - r| + |r - c|, and rounding g, u to BF16 moves r by at most
//   2^-9 (|silu'(g) g u| + |silu(g) u|) to first order (doubled for the second order and
//   the BF16 GEMM's own accumulation), so |y - c| <= bound_r + 2^-8 (|silu'(g) g u| +
//   |silu(g) u|) + 2 (|u| E_g + |silu(g)| E_u). The chain's BF16 rounding of g is what the
//   fused epilogue does not make: where silu'(g) g is large against silu(g) (g < 0) the
//   chain is the less accurate one.
#pragma once
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "../dequantize_fixture.hpp"
#include "gemm_output.hpp"
#include "common/nvfp4_format.cuh"
#include "core/gpu_util.hpp"
#include "core/launcher.hpp"
#include "ops/gemm/gemm.hpp"
#include "ops/gemm/backend.hpp"
#include "ops/gemm/sm90/tiles.hpp"

using namespace nvfp4::jit;
using namespace nvfp4::jit::detail;

namespace {

struct SwigluCase {
  int64_t m;        // rows of A and D (grouped contiguous: all groups'; masked: per group)
  int64_t inter;    // I: D's columns; the weight has 2 I rows
  int64_t k;
  int64_t interleave = 0;  // the stored gate / up order (PrepackArgs::swiglu_interleave)
  DType a = DType::bf16, d = DType::bf16;
  int bias = 0;     // 0 none, 1 bf16, 2 fp32
  int groups = 0;   // 0: dense
  GroupedLayout layout = GroupedLayout::contiguous;
  bool gather = false;  // contiguous: A's rows through row_index
  int64_t d_pad = 0;
  sm90::Tile tile{};    // block_m 0: the heuristic's
  // The fused call reads the weight as stored (GemmArgs::b_swiglu_interleave = interleave), not
  // prepacked: the sm_100a / sm_120a backends (W4A4); backend_tile, when given, their tile.
  bool as_stored = false;
  GemmTile backend_tile{};
  // W4A4's sums reach 10^2 - 10^3 (random E4M3 block scales): gate x up then passes FP16's
  // 65504 unless alpha scales them down
  float alpha = 0.75f;
};

double silu(double g) { return g / (1.0 + std::exp(-g)); }
double dsilu(double g) {
  const double s = 1.0 / (1.0 + std::exp(-g));
  return s * (1.0 + g * (1.0 - s));
}

// Stored row of gate (up = false) or up row i of a weight of 2 I rows in `interleave` order.
int64_t stored_row(int64_t i, bool up, int64_t inter, int64_t interleave) {
  if (interleave == 0) return (up ? inter : 0) + i;
  return i / interleave * 2 * interleave + (up ? interleave : 0) + i % interleave;
}

uint16_t half_bits(DType t, float v) { return t == DType::bf16 ? nvfp4k::float_to_bf16_bits(v) : nvfp4k::float_to_fp16_bits(v); }

void run_grouped_or_dense(const SwigluCase& c, const GemmArgs& g, const GroupedGemmArgs& grouped) {
  const GemmTile tile = c.tile.block_m ? sm90::to_config(c.tile) : c.backend_tile;  // the fused call's
  if (c.groups) {
    GroupedGemmArgs ga = grouped;
    ga.gemm = g;
    if (tile.block_m && g.epilogue == GemmEpilogue::swiglu)
      grouped_gemm_with_tile(ga, tile, nullptr);
    else
      grouped_gemm(ga, nullptr);
  } else if (tile.block_m && g.epilogue == GemmEpilogue::swiglu) {
    gemm_with_tile(g, tile, nullptr);
  } else {
    gemm(g, nullptr);
  }
}

void run_swiglu_case(const SwigluCase& c, std::mt19937& rng) {
  const int64_t n = 2 * c.inter, k = c.k, weights = std::max(1, c.groups);
  const bool masked = c.groups && c.layout == GroupedLayout::masked;
  const int64_t rows = masked ? c.m * c.groups : c.m;  // of D
  std::string name = "m=" + std::to_string(c.m) + " I=" + std::to_string(c.inter) + " k=" + std::to_string(k) +
                     " interleave=" + std::to_string(c.interleave) + " groups=" + std::to_string(c.groups) +
                     (masked ? " masked" : "") + (c.gather ? " gathered" : "") + (c.a == DType::nvfp4 ? " W4A4" : "") +
                     (c.tile.block_m ? " tile " + sm90::describe(c.tile) : "") + (c.as_stored ? " as stored" : "") +
                     (c.backend_tile.block_m ? " tile " + find_gemm_backend(current_device().arch)->describe(c.backend_tile) : "");
  CAPTURE(name);
  // the weights, one after the other: [groups * 2I, k] in the stored order
  testutil::HostNvfp4 w(weights * n, k, ScaleLayout::linear, rng);
  std::vector<float> wd(size_t(weights * n * k));  // decoded (exact in fp32: e2m1 x e4m3)
  testutil::on_all_cores([&](unsigned t, unsigned threads) {
    for (int64_t r = t; r < weights * n; r += threads)
      for (int64_t e = 0; e < k; ++e) wd[size_t(r * k + e)] = float(w.value(r, e));
  });
  const double gw = std::ldexp(1.0 + (rng() % 100) / 100.0, -12);
  const float alpha = c.alpha;

  // A: the rows the kernel reads (gathered: a_rows tokens, row r of the sorted A is token index[r])
  const int64_t a_rows = c.gather ? std::max<int64_t>(1, c.m / 3) : rows;
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const bool w4a4 = c.a == DType::nvfp4;
  testutil::HostNvfp4 a4(w4a4 ? a_rows : 0, k, ScaleLayout::linear, rng);
  const float ga = std::ldexp(1.0f + (rng() % 100) / 100.0f, -3);
  std::vector<uint16_t> a(size_t(a_rows * k));
  std::vector<double> ad(size_t(a_rows * k));
  for (int64_t r = 0; r < a_rows; ++r)
    for (int64_t e = 0; e < k; ++e) {
      if (w4a4) {
        ad[size_t(r * k + e)] = a4.value(r, e) * double(ga);
        continue;
      }
      a[size_t(r * k + e)] = half_bits(c.a, normal(rng));
      ad[size_t(r * k + e)] = testutil::half_bits_to_double(c.a, a[size_t(r * k + e)]);
    }
  std::vector<int32_t> index(size_t(c.gather ? c.m : 0));
  for (auto& i : index) i = int32_t(rng() % uint64_t(a_rows));
  auto a_row_of = [&](int64_t r) { return c.gather ? int64_t(index[size_t(r)]) : r; };

  // groups: contiguous ends with empty experts (every third), masked counts in [0, m]
  std::vector<int32_t> sizes(size_t(c.groups));
  std::vector<int64_t> group_of(size_t(rows), 0);
  if (c.groups && !masked) {
    std::vector<int32_t>& ends = sizes;
    for (auto& end : ends) end = int32_t(rng() % uint64_t(c.m + 1));
    std::sort(ends.begin(), ends.end());
    for (int e = 1; e < c.groups; e += 3) ends[size_t(e)] = ends[size_t(e - 1)];  // every third expert empty
    ends.back() = int32_t(c.m);
    for (int64_t r = 0, e = 0; r < rows; ++r) {
      while (r >= ends[size_t(e)]) ++e;
      group_of[size_t(r)] = e;
    }
  } else if (masked) {
    for (int e = 0; e < c.groups; ++e) sizes[size_t(e)] = e % 3 == 1 ? 0 : int32_t(rng() % uint64_t(c.m + 1));
    for (int64_t r = 0; r < rows; ++r) group_of[size_t(r)] = r / c.m;
  }
  auto row_live = [&](int64_t r) { return !masked || r % c.m < sizes[size_t(r / c.m)]; };

  std::vector<double> bias_d(size_t(n), 0.0);  // gate's I values, then up's
  std::vector<uint8_t> bias_bytes(size_t(n) * 4);
  for (int64_t i = 0; i < n && c.bias; ++i) {
    const float v = normal(rng);
    if (c.bias == 1) {
      const uint16_t h = nvfp4k::float_to_bf16_bits(v);
      std::memcpy(&bias_bytes[size_t(i) * 2], &h, 2);
      bias_d[size_t(i)] = nvfp4k::bf16_bits_to_float(h);
    } else {
      std::memcpy(&bias_bytes[size_t(i) * 4], &v, 4);
      bias_d[size_t(i)] = v;
    }
  }
  // the unfused GEMM's bias: the stored rows' order
  std::vector<uint8_t> stored_bias(bias_bytes.size());
  const int bias_size = c.bias == 1 ? 2 : 4;
  for (int64_t i = 0; i < c.inter && c.bias; ++i)
    for (int up = 0; up < 2; ++up)
      std::memcpy(&stored_bias[size_t(stored_row(i, up, c.inter, c.interleave)) * bias_size],
                  &bias_bytes[size_t(up * c.inter + i) * bias_size], size_t(bias_size));

  // device buffers; the weight prepacked per group
  DeviceBuffer d_a = to_device(a), d_w = to_device(w.packed), d_s = to_device(w.scales);
  DeviceBuffer d_a4 = to_device(a4.packed), d_a4s = to_device(a4.scales);
  DeviceBuffer d_bias = to_device(bias_bytes), d_stored_bias = to_device(stored_bias);
  DeviceBuffer d_index = to_device(index.empty() ? std::vector<int32_t>{0} : index);
  DeviceBuffer d_sizes = to_device(sizes.empty() ? std::vector<int32_t>{0} : sizes);
  const int64_t pre_bytes = prepacked_bytes(n, k);
  DeviceBuffer d_pre(size_t(c.as_stored ? 0 : pre_bytes * weights));
  if (!c.as_stored) d_pre.fill(0xA5);
  for (int64_t e = 0; e < weights && !c.as_stored; ++e) {
    PrepackArgs p;
    p.weight = {static_cast<unsigned char*>(d_w.get()) + e * n * k / 2, 0,
                static_cast<unsigned char*>(d_s.get()) + e * n * (k / 16), ScaleLayout::linear, {}};
    p.n = n, p.k = k, p.out = static_cast<unsigned char*>(d_pre.get()) + e * pre_bytes;
    p.swiglu_interleave = c.interleave;
    prepack(p, nullptr);
  }
  if (!c.as_stored) {  // the GPU prepack in the 8-row interleave gives the CPU reference's bytes (the last weight)
    std::vector<uint8_t> cpu_pre(static_cast<size_t>(pre_bytes)), gpu_pre(static_cast<size_t>(pre_bytes));
    const int64_t e = weights - 1;
    PrepackArgs host{{w.packed.data() + e * n * k / 2, 0, w.scales.data() + e * n * (k / 16), ScaleLayout::linear, {}},
                     n, k, cpu_pre.data(), c.interleave};
    cpu::prepack(host);
    check_cu(driver().cuCtxSynchronize(), "prepack");
    d_pre.download(gpu_pre.data(), gpu_pre.size(), size_t(e * pre_bytes));
    const auto diff = std::mismatch(gpu_pre.begin(), gpu_pre.end(), cpu_pre.begin());
    if (diff.first != gpu_pre.end()) {
      FAIL_CHECK(name << ": GPU prepack differs from the CPU's at byte " << (diff.first - gpu_pre.begin()));
      return;
    }
  }
  const int esize = c.d == DType::fp32 ? 4 : 2;
  const int64_t ldd = c.inter + c.d_pad;
  DeviceBuffer d_out(size_t(rows * ldd * esize)), d_chain(size_t(rows * n * 2));
  d_out.fill(0xFF);  // NaN in every output type
  d_chain.fill(0xFF);

  GemmArgs g;
  g.m = c.m, g.n = n, g.k = k;
  g.a = d_a.get(), g.a_dtype = c.a;
  if (w4a4) g.a = nullptr, g.a_fp4 = {d_a4.get(), 0, d_a4s.get(), ScaleLayout::linear, {ga, nullptr, false}};
  g.b = {d_pre.get(), 0, nullptr, ScaleLayout::linear, {float(gw), nullptr, false}};
  g.b_prepacked = true;
  if (c.as_stored) {
    g.b = {d_w.get(), 0, d_s.get(), ScaleLayout::linear, {float(gw), nullptr, false}}, g.b_prepacked = false;
    g.b_swiglu_interleave = c.interleave;
  }
  g.d = d_out.get(), g.d_dtype = c.d, g.d_row_stride = ldd;
  if (c.bias) g.bias = d_bias.get(), g.bias_dtype = c.bias == 1 ? DType::bf16 : DType::fp32;
  g.alpha = alpha;
  g.epilogue = GemmEpilogue::swiglu;
  GroupedGemmArgs grouped;
  grouped.groups = c.groups, grouped.layout = c.layout;
  if (c.groups) (masked ? grouped.masked_m : grouped.group_ends) = d_sizes.as<int32_t>();
  if (c.gather) grouped.row_index = d_index.as<int32_t>(), grouped.a_rows = a_rows;
  run_grouped_or_dense(c, g, grouped);
  check_cu(driver().cuCtxSynchronize(), "fused gate_up gemm");
  // the unfused chain's GEMM: the weight as stored, BF16 out [rows, 2I]
  GemmArgs chain = g;
  chain.b = {d_w.get(), 0, d_s.get(), ScaleLayout::linear, {float(gw), nullptr, false}};
  chain.b_prepacked = false, chain.epilogue = GemmEpilogue::none, chain.b_swiglu_interleave = 0;
  chain.d = d_chain.get(), chain.d_dtype = DType::bf16, chain.d_row_stride = 0;
  if (c.bias) chain.bias = d_stored_bias.get();
  run_grouped_or_dense(c, chain, grouped);
  check_cu(driver().cuCtxSynchronize(), "unfused gate_up gemm");
  std::vector<uint8_t> got(d_out.bytes());
  d_out.download(got.data(), got.size());
  std::vector<uint16_t> chain_out(size_t(rows * n));
  d_chain.download(chain_out.data(), chain_out.size() * 2);

  // float64 reference and both bounds, rows split over the cores
  struct Result {
    int64_t bad_row = -1, bad_col = 0;
    double got = 0, want = 0, bound = 0;
    bool against_chain = false;
    testutil::FrobeniusError to_ref, to_chain;
    double worst_ratio = 0;
  };
  std::vector<Result> results(std::max(1u, std::thread::hardware_concurrency()));
  testutil::on_all_cores([&](unsigned t, unsigned threads) {
    Result& res = results[t];
    for (int64_t r = t; r < rows; r += threads) {
      const bool live = row_live(r);
      const double* ar = &ad[size_t(a_row_of(r) * k)];
      const int64_t e = group_of[size_t(r)];
      for (int64_t col = 0; col < ldd; ++col) {
        const size_t at = size_t(r * ldd + col) * esize;
        const bool poison = std::all_of(&got[at], &got[at] + esize, [](uint8_t b) { return b == 0xFF; });
        if (col >= c.inter || !live) {  // padding, or a masked group's rows past its count: untouched
          if (!poison && res.bad_row < 0) res.bad_row = r, res.bad_col = col, res.got = testutil::output_value(c.d, &got[at]);
          continue;
        }
        double x[2], s[2];
        for (int up = 0; up < 2; ++up) {
          const float* wr = &wd[size_t((e * n + stored_row(col, up, c.inter, c.interleave)) * k)];
          double sum = 0, abs_sum = 0;
          for (int64_t kk = 0; kk < k; ++kk) {
            const double p = ar[kk] * double(wr[kk]);
            sum += p;
            abs_sum += std::fabs(p);
          }
          const double b = bias_d[size_t(up * c.inter + col)];
          x[up] = alpha * gw * sum + b;
          s[up] = alpha * gw * abs_sum + std::fabs(b);
        }
        const double eg = double(k + 2) * std::ldexp(s[0], -24), eu = double(k + 2) * std::ldexp(s[1], -24);
        const double ref = silu(x[0]) * x[1];
        const double accum = std::fabs(x[1]) * eg * 1.1 + std::fabs(silu(x[0])) * eu;
        const double bound_ref = std::ldexp(std::fabs(ref), -8) + 1.2 * accum + std::ldexp(1.0, -140);
        const double y = testutil::output_value(c.d, &got[at]);
        const size_t chain_at = size_t(r * n);
        const double cg = nvfp4k::bf16_bits_to_float(chain_out[chain_at + size_t(stored_row(col, false, c.inter, c.interleave))]);
        const double cu = nvfp4k::bf16_bits_to_float(chain_out[chain_at + size_t(stored_row(col, true, c.inter, c.interleave))]);
        const double chained = silu(cg) * cu;
        const double bound_chain = bound_ref +
                                   std::ldexp(std::fabs(dsilu(x[0]) * x[0] * x[1]) + std::fabs(silu(x[0]) * x[1]), -8) +
                                   2 * accum;
        if (poison || !std::isfinite(y) || std::fabs(y - ref) > bound_ref || !(std::fabs(y - chained) <= bound_chain)) {
          if (res.bad_row < 0) {
            res.bad_row = r, res.bad_col = col, res.got = y;
            res.against_chain = std::isfinite(y) && std::fabs(y - ref) <= bound_ref;
            res.want = res.against_chain ? chained : ref;
            res.bound = res.against_chain ? bound_chain : bound_ref;
          }
          continue;
        }
        res.to_ref.add(y, ref);
        res.to_chain.add(y, chained);
        res.worst_ratio = std::max(res.worst_ratio, std::fabs(y - ref) / bound_ref);
      }
    }
  });
  testutil::FrobeniusError to_ref, to_chain;
  double worst = 0;
  for (const Result& res : results) {
    to_ref.err2 += res.to_ref.err2, to_ref.ref2 += res.to_ref.ref2;
    to_chain.err2 += res.to_chain.err2, to_chain.ref2 += res.to_chain.ref2;
    worst = std::max(worst, res.worst_ratio);
  }
  for (const Result& res : results)
    if (res.bad_row >= 0) {
      FAIL_CHECK(name << ": first wrong element (" << res.bad_row << ", " << res.bad_col << ") = " << res.got
                      << (res.bound == 0 ? " (padding, an empty masked row or unwritten)"
                                         : std::string(res.against_chain ? ", the unfused chain's " : ", float64 ") +
                                               std::to_string(res.want) + " +- " + std::to_string(res.bound)));
      return;
    }
  MESSAGE("swiglu " << name << ": relative Frobenius error to float64 " << to_ref.relative() << ", to the unfused chain "
                    << to_chain.relative() << "; worst element at " << worst << " of its bound");
  CHECK_MESSAGE(to_ref.relative() <= testutil::rounding_bound(c.d),
                name << ": relative error " << to_ref.relative() << " (bound " << testutil::rounding_bound(c.d) << ")");
}

}  // namespace
