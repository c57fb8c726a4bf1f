// The W4A8 GPU tests' reference (test_gpu_gemm_w4a8.cpp, test_gpu_gemm_w4a8_nvfp4.cpp): random
// NVFP4 weights and activations with the error model's bound on each value's rounding
// (docs/formats.md, "W4A8"), prepack checked against the CPU's, and a GEMM's output held to
// float64 of the exact NVFP4 product under that model.
#pragma once
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/gpu_util.hpp"
#include "core/launcher.hpp"
#include "gemm_output.hpp"
#include "nvfp4/jit.hpp"

namespace w4a8ref {

using namespace nvfp4::jit;
using namespace nvfp4::jit::detail;

inline double e2m1(unsigned nib) {
  static const double v[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  return (nib & 8 ? -1 : 1) * v[nib & 7];
}
inline double e4m3(uint8_t s) {  // from the format's definition
  const int ex = (s >> 3) & 15, m = s & 7;
  return ex == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1 + m / 8.0, ex - 7);
}
// The E4M3 code nearest below-or-at v (v in [2^-9, 448]): a scale as a quantizer leaves it.
inline uint8_t e4m3_at_most(double v) {
  uint8_t best = 1;
  for (unsigned c = 1; c < 0x7F; ++c)
    if (e4m3(uint8_t(c)) <= v) best = uint8_t(c);
  return best;
}
// The least e with 6 * max_scale <= 448 * 2^e (0 for a row without a nonzero scale).
inline int fold_exponent_of(double max_scale) {
  if (max_scale <= 0) return 0;
  int e = -40;
  while (6 * max_scale > 448 * std::ldexp(1.0, e)) ++e;
  return e;
}

// One expert's weight [n, k] (ModelOpt layout, linear scales), its decoded values and the
// model's bound on each one's rounding.
struct Weight {
  std::vector<uint8_t> packed, scales;
  std::vector<double> w, dw;
};

// A 16-bit activation matrix, the values gemm reads, and the model's bound on each one's rounding.
struct Activations {
  std::vector<uint16_t> a;
  std::vector<double> x, dx;
};

// |RN_e4m3(v / unit) - v / unit| * unit at most
inline double rounding(double v, double unit) {
  return v == 0 ? 0.0 : std::max(std::fabs(v) / unit / 17, std::ldexp(1.0, -10)) * unit;
}

inline Weight random_weight(int64_t rows, int64_t k, bool adversarial, std::mt19937& rng) {
  const int64_t kb = k / 16;
  std::normal_distribution<double> normal(0.0, 1.0);
  Weight wt;
  wt.packed.resize(size_t(rows * k / 2));
  wt.scales.resize(size_t(rows * kb));
  for (auto& b : wt.packed) b = uint8_t(rng());
  for (int64_t n = 0; n < rows; ++n) {
    const double row = std::ldexp(1.0, -int(rng() % 3));  // rows 1-4x apart
    for (int64_t b = 0; b < kb; ++b) {
      uint8_t& s = wt.scales[size_t(n * kb + b)];
      if (!adversarial)
        s = e4m3_at_most(std::max(std::ldexp(1.0, -9), 448 * row * std::exp2(-std::fabs(1.5 * normal(rng)))));
      else
        s = n % 7 == 3 ? uint8_t(rng() % 8)           // subnormal scales (and zero blocks) only
            : n % 11 == 5 ? uint8_t(0)                // a zero row
            : rng() % 8 == 0 ? uint8_t(0)             // zero blocks
                             : uint8_t(rng() % 0x7F);  // every finite E4M3 scale
    }
  }
  wt.w.resize(size_t(rows * k));
  wt.dw.resize(wt.w.size());
  for (int64_t n = 0; n < rows; ++n) {
    double max_scale = 0;
    for (int64_t b = 0; b < kb; ++b) max_scale = std::max(max_scale, e4m3(wt.scales[size_t(n * kb + b)]));
    const double unit = std::ldexp(1.0, fold_exponent_of(max_scale));
    for (int64_t i = 0; i < k; ++i) {
      const uint8_t byte = wt.packed[size_t(n * k / 2 + i / 2)];
      const double v = e2m1(i % 2 ? byte >> 4 : byte & 15) * e4m3(wt.scales[size_t(n * kb + i / 16)]);
      wt.w[size_t(n * k + i)] = v;
      wt.dw[size_t(n * k + i)] = rounding(v, unit);
    }
  }
  return wt;
}

// Rows of Gaussian values, realistic (4 outlier channels 40x) or adversarial (a zero row in 13,
// the rest over 30 binades), rounded to `dtype` first (the exact product is of the values gemm
// reads); each row's values bounded under its scale amax / 448.
inline Activations random_activations(int64_t rows, int64_t k, DType dtype, bool adversarial, std::mt19937& rng) {
  std::normal_distribution<double> normal(0.0, 1.0);
  Activations act;
  act.a.resize(size_t(rows * k));
  act.x.resize(act.a.size());
  act.dx.resize(act.a.size());
  std::vector<int64_t> outliers;
  for (int i = 0; i < 4; ++i) outliers.push_back(int64_t(rng() % uint64_t(k)));
  for (int64_t m = 0; m < rows; ++m) {
    double amax = 0;
    for (int64_t i = 0; i < k; ++i) {
      double v = normal(rng);
      if (!adversarial && std::find(outliers.begin(), outliers.end(), i) != outliers.end()) v *= 40;
      if (adversarial) v = m % 13 == 7 ? 0.0 : std::ldexp(v, int(rng() % 31) - 15);
      const uint16_t h = dtype == DType::bf16 ? nvfp4k::float_to_bf16_bits(float(v)) : nvfp4k::float_to_fp16_bits(float(v));
      act.a[size_t(m * k + i)] = h;
      act.x[size_t(m * k + i)] = testutil::half_bits_to_double(dtype, h);
      amax = std::max(amax, std::fabs(act.x[size_t(m * k + i)]));
    }
    const double row_scale = amax > 0 ? amax / 448 : 1.0;
    for (int64_t i = 0; i < k; ++i) act.dx[size_t(m * k + i)] = rounding(act.x[size_t(m * k + i)], row_scale);
  }
  return act;
}

// Prepacks `wt` [n, k] on the GPU at `dst`, checked against the CPU's bytes (fold exponents included).
inline void prepack_checked(const Weight& wt, int64_t n, int64_t k, unsigned char* dst) {
  const int64_t bytes = prepacked_bytes(n, k);
  DeviceBuffer d_packed = to_device(wt.packed), d_scales = to_device(wt.scales);
  Nvfp4Tensor t{d_packed.get(), 0, d_scales.get(), ScaleLayout::linear, {}};
  prepack({t, n, k, dst}, nullptr);
  std::vector<uint8_t> cpu_pre(static_cast<size_t>(bytes)), gpu_pre(static_cast<size_t>(bytes));
  cpu::prepack({{wt.packed.data(), 0, wt.scales.data(), ScaleLayout::linear, {}}, n, k, cpu_pre.data()});
  check_cu(driver().cuCtxSynchronize(), "prepack");
  check_cu(driver().cuMemcpyDtoH(gpu_pre.data(), reinterpret_cast<CUdeviceptr>(dst), gpu_pre.size()), "cuMemcpyDtoH");
  const auto pre = std::mismatch(gpu_pre.begin(), gpu_pre.end(), cpu_pre.begin());
  REQUIRE_MESSAGE(pre.first == gpu_pre.end(), "GPU prepack differs from the CPU's at byte " << (pre.first - gpu_pre.begin()));
}

// What row r of D must hold: activation row `source` times expert `weight`'s rows; weight -1: the
// row is no group's and keeps its poison (every byte 0xFF); source -1: NaN (an index outside A).
struct RowRef {
  int64_t source = -1;
  int weight = -1;
};

// A grouped call's rows: `counts` rows an expert (contiguous: sorted one expert after the other,
// then `padding` rows of no group; masked: expert g's rows first of its max_m), gathered through
// a row index of `tokens` rows when tokens > 0 (each sorted row some token's, as moe_route
// leaves them, -1 past the routed rows; one row of expert `bad_row_expert` given an index
// outside A). refs: what each row of D must hold; sizes: group_ends or masked_m.
struct GroupedRows {
  std::vector<RowRef> refs;
  std::vector<int32_t> sizes, row_index;
  int64_t routed = 0;
};

inline GroupedRows grouped_rows(bool masked, const std::vector<int32_t>& counts, int64_t max_m, int64_t padding,
                                int64_t tokens, int bad_row_expert, std::mt19937& rng) {
  const int groups = int(counts.size());
  GroupedRows g;
  for (int32_t r : counts) g.routed += r;
  const int64_t rows = masked ? groups * max_m : g.routed + padding;
  g.refs.resize(static_cast<size_t>(rows));
  g.sizes.resize(static_cast<size_t>(groups));
  if (masked) {
    for (int e = 0; e < groups; ++e) {
      g.sizes[size_t(e)] = counts[size_t(e)];
      for (int32_t i = 0; i < counts[size_t(e)]; ++i) g.refs[size_t(e * max_m + i)] = {e * max_m + i, e};
    }
    return g;
  }
  int64_t row = 0;
  for (int e = 0; e < groups; ++e) {
    for (int32_t i = 0; i < counts[size_t(e)]; ++i, ++row) g.refs[size_t(row)] = {row, e};
    g.sizes[size_t(e)] = int32_t(row);
  }
  if (tokens > 0) {
    g.row_index.assign(size_t(rows), -1);
    for (int64_t r = 0; r < g.routed; ++r) g.refs[size_t(r)].source = g.row_index[size_t(r)] = int32_t(rng() % uint64_t(tokens));
    if (bad_row_expert >= 0) {
      const int64_t r = bad_row_expert ? g.sizes[size_t(bad_row_expert - 1)] : 0;  // the expert's first row
      g.row_index[size_t(r)] = int32_t(tokens + 3);
      g.refs[size_t(r)].source = -1;
    }
  }
  return g;
}

struct Epilogue {
  double alpha = 1, gw = 1;
  const std::vector<float>* bias = nullptr;
  DType d = DType::fp32;
};

// D (downloaded, `got`) against float64 of the exact product row by row, every element within
// the error model's bound, and the relative Frobenius error within the root sum of squares of
// the bounds; prints the measured errors under `label`.
inline void check_w4a8_output(const std::string& label, const std::vector<RowRef>& rows, const Activations& act,
                       const std::vector<Weight>& weights, int64_t n, int64_t k, const Epilogue& ep,
                       const std::vector<uint8_t>& got) {
  const int64_t m_rows = int64_t(rows.size()), esize = ep.d == DType::fp32 ? 4 : 2;
  const double scale = std::fabs(ep.alpha * ep.gw), out_unit = ep.d == DType::fp32 ? std::ldexp(1.0, -22) : std::ldexp(1.0, -8);
  const size_t count = rows.size();
  std::vector<double> err2(count), ref2(count), bound2(count);
  std::vector<int64_t> bad(count, -1);
  std::vector<double> bad_got(count), bad_ref(count), bad_bound(count);
  testutil::on_all_cores([&](unsigned t, unsigned threads) {
    for (int64_t m = t; m < m_rows; m += threads) {
      const RowRef r = rows[size_t(m)];
      const uint8_t* d_row = &got[size_t(m * n * esize)];
      if (r.weight < 0 || r.source < 0) {  // poison kept, or NaN
        for (int64_t j = 0; j < n && bad[size_t(m)] < 0; ++j) {
          const bool ok = r.weight < 0 ? std::all_of(d_row + j * esize, d_row + (j + 1) * esize, [](uint8_t b) { return b == 0xFF; })
                                       : std::isnan(testutil::output_value(ep.d, d_row + j * esize));
          if (!ok) bad[size_t(m)] = j, bad_got[size_t(m)] = testutil::output_value(ep.d, d_row + j * esize);
        }
        continue;
      }
      const Weight& wt = weights[size_t(r.weight)];
      const double* xr = &act.x[size_t(r.source * k)];
      const double* dxr = &act.dx[size_t(r.source * k)];
      for (int64_t j = 0; j < n; ++j) {
        const double* wr = &wt.w[size_t(j * k)];
        const double* dwr = &wt.dw[size_t(j * k)];
        double s = 0, det = 0, rss = 0, acc_det = 0, acc_rss = 0, step_abs = 0;
        for (int64_t i = 0; i < k; ++i) {
          const double p = xr[i] * wr[i];
          s += p;
          step_abs += std::fabs(p);
          const double e1 = dwr[i] * std::fabs(xr[i]), e2 = std::fabs(wr[i]) * dxr[i], e3 = dwr[i] * dxr[i];
          det += e1 + e2 + e3;
          rss += e1 * e1 + e2 * e2 + e3 * e3;
          if (i % 32 == 31 || i + 1 == k) {
            const double step = std::ldexp(std::fabs(s) + step_abs, -13);
            acc_det += step;
            acc_rss += step * step;
            step_abs = 0;
          }
        }
        const double ref = ep.alpha * ep.gw * s + (ep.bias ? double((*ep.bias)[size_t(j)]) : 0.0);
        const double out_round = out_unit * std::fabs(ref) + 1e-30;
        const double bound = scale * (det + acc_det) + 2 * out_round;
        const double value = testutil::output_value(ep.d, d_row + j * esize);
        const double e = value - ref;
        err2[size_t(m)] += e * e;
        ref2[size_t(m)] += ref * ref;
        bound2[size_t(m)] += scale * scale * (rss + acc_rss) + out_round * out_round;
        if (bad[size_t(m)] < 0 && !(std::fabs(e) <= bound)) {
          bad[size_t(m)] = j;
          bad_got[size_t(m)] = value, bad_ref[size_t(m)] = ref, bad_bound[size_t(m)] = bound;
        }
      }
    }
  });
  double e2 = 0, r2 = 0, b2 = 0, worst_row = 0;
  int64_t worst = 0;
  for (int64_t m = 0; m < m_rows; ++m) {
    const RowRef r = rows[size_t(m)];
    if (bad[size_t(m)] >= 0) {
      if (r.weight < 0)
        FAIL_CHECK(label << ": D[" << m << ", " << bad[size_t(m)] << "] = " << bad_got[size_t(m)]
                         << " was written: the row is no group's and must keep its poison");
      else if (r.source < 0)
        FAIL_CHECK(label << ": D[" << m << ", " << bad[size_t(m)] << "] = " << bad_got[size_t(m)]
                         << ": the row's index is outside A, its outputs must be NaN");
      else
        FAIL_CHECK(label << ": D[" << m << ", " << bad[size_t(m)] << "] = " << bad_got[size_t(m)] << ", reference "
                         << bad_ref[size_t(m)] << ": off by more than the model's bound " << bad_bound[size_t(m)]);
      break;
    }
    if (r.weight < 0 || r.source < 0) continue;
    e2 += err2[size_t(m)], r2 += ref2[size_t(m)], b2 += bound2[size_t(m)];
    const double rel = ref2[size_t(m)] > 0 ? std::sqrt(err2[size_t(m)] / ref2[size_t(m)]) : std::sqrt(err2[size_t(m)]);
    if (rel > worst_row || std::isnan(rel)) worst_row = rel, worst = m;
  }
  const double frob = std::sqrt(e2 / std::max(r2, 1e-300)), frob_bound = std::sqrt(b2 / std::max(r2, 1e-300));
  MESSAGE(label << ": relative Frobenius error " << frob * 100 << "% (model bound " << frob_bound * 100 << "%), worst row "
                << worst << " " << worst_row * 100 << "%");
  CHECK_MESSAGE(frob <= frob_bound, label << ": relative Frobenius error " << frob << " above the model's " << frob_bound);
}

}  // namespace w4a8ref
