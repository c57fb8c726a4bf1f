// The W4A8 numerics of templates/common/fp8_fold.cuh, compiled as host code: every folded value
// against an independent nearest-value search over E4M3's codes, and the error model of
// docs/formats.md ("W4A8") held element by element on realistic and adversarial data.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "common/fp8_fold.cuh"
#include "nvfp4/jit.hpp"

using namespace nvfp4k;

namespace {

// Round to nearest, ties to the even code, saturating: the closest of E4M3's 127 finite
// non-negative values to v >= 0, found by search (no bit tricks shared with the code under test).
unsigned char e4m3_nearest(double v) {
  unsigned char best = 0;
  for (unsigned c = 1; c <= 0x7E; ++c) {
    const double d = std::fabs(double(e4m3_to_float(c)) - v), b = std::fabs(double(e4m3_to_float(best)) - v);
    if (d < b || (d == b && (c & 1u) == 0)) best = (unsigned char)c;
  }
  return best;
}

// The finite, non-negative E4M3 scales: every code but the NaN one.
std::vector<unsigned> finite_scales() {
  std::vector<unsigned> codes;
  for (unsigned c = 0; c <= 0x7E; ++c) codes.push_back(c);
  return codes;
}

// A weight [n, k] in NVFP4 (nibbles one per byte here, linear scales) and a global scale.
struct Weight {
  int64_t n, k;
  std::vector<uint8_t> nibbles, scales;
  float global_scale;
  double value(int64_t r, int64_t c) const {
    return double(e2m1_to_float(nibbles[size_t(r * k + c)])) * e4m3_to_float(scales[size_t(r * (k / 16) + c / 16)]) * global_scale;
  }
};

// The weight as cpu::quantize writes it (per-tensor global scale computed), from `values`.
Weight quantized_weight(const std::vector<float>& values, int64_t n, int64_t k) {
  std::vector<uint8_t> packed(size_t(n * k / 2));
  Weight w{n, k, std::vector<uint8_t>(size_t(n * k)), std::vector<uint8_t>(size_t(n * k / 16)), 0.0f};
  nvfp4::jit::QuantizeArgs q;
  q.in = values.data(), q.in_dtype = nvfp4::jit::DType::fp32, q.rows = n, q.k = k;
  q.out = packed.data(), q.scales = w.scales.data();
  q.scale_mode = nvfp4::jit::GlobalScaleMode::compute_per_tensor, q.global_scale_out = &w.global_scale;
  nvfp4::jit::cpu::quantize(q);
  for (size_t i = 0; i < packed.size(); ++i) w.nibbles[2 * i] = packed[i] & 15u, w.nibbles[2 * i + 1] = packed[i] >> 4;
  return w;
}

struct Errors {
  double rel_frobenius = 0, worst_row = 0;  // worst row: its error's norm over its exact values' norm
  double weights_only = 0, activations_only = 0;  // the relative Frobenius error of each rounding alone
};

// D = A . W^T three ways: exactly (float64 of the decoded NVFP4 values and the BF16-exact
// activations), in W4A8 (folded weights, E4M3 activations, float64 sums), and the model's bound
// on each element's difference. Fails naming the first element past its bound.
Errors check_w4a8(const Weight& w, const std::vector<float>& a, int64_t m, const char* what) {
  const int64_t n = w.n, k = w.k, kb = k / 16;
  // E4M3 rounds to nearest with 3 mantissa bits: at most 1/17 of a normal value off (half a step
  // of 2^-3 over 1 + 2^-4), at most 2^-10 off below 2^-6 (half the subnormal step); fp32 steps.
  constexpr double u = 1.0 / 17, sub = 1.0 / 1024, slack = 1.0 / (1 << 20);
  std::vector<double> wq(size_t(n * k)), w_err(size_t(n * k));
  for (int64_t r = 0; r < n; ++r) {
    float max_scale = 0;
    for (int64_t b = 0; b < kb; ++b) max_scale = std::max(max_scale, e4m3_to_float(w.scales[size_t(r * kb + b)]));
    const int e = fold_exponent(max_scale);
    for (int64_t c = 0; c < k; ++c) {
      const float s = e4m3_to_float(w.scales[size_t(r * kb + c / 16)]);
      const unsigned char code = fold_e2m1(w.nibbles[size_t(r * k + c)], s, e);
      wq[size_t(r * k + c)] = double(e4m3_to_float(code)) * std::ldexp(1.0, e) * w.global_scale;
      const double x = std::fabs(w.value(r, c));
      w_err[size_t(r * k + c)] = std::max(u * x, sub * std::ldexp(1.0, e) * w.global_scale) * (1 + slack);
      if (!(std::fabs(wq[size_t(r * k + c)] - w.value(r, c)) <= w_err[size_t(r * k + c)])) {
        FAIL(fmt::format("{}: weight ({}, {}) folded to {}, {} off its value {}: past the model's {}", what, r, c,
                         wq[size_t(r * k + c)], std::fabs(wq[size_t(r * k + c)] - w.value(r, c)), w.value(r, c), w_err[size_t(r * k + c)]));
        return {};
      }
    }
  }
  std::vector<double> aq(size_t(m * k)), a_err(size_t(m * k));
  for (int64_t r = 0; r < m; ++r) {
    float amax = 0;
    for (int64_t c = 0; c < k; ++c) amax = std::max(amax, std::fabs(a[size_t(r * k + c)]));
    const float scale = activation_scale(amax), inverse = amax > 0 ? 448.0f / amax : 1.0f;
    for (int64_t c = 0; c < k; ++c) {
      const float x = a[size_t(r * k + c)];
      aq[size_t(r * k + c)] = double(e4m3_to_float(activation_e4m3(x, inverse))) * scale;
      a_err[size_t(r * k + c)] = std::max(u * std::fabs(x), sub * scale) + 4 * slack * std::fabs(x);
      if (!(std::fabs(aq[size_t(r * k + c)] - x) <= a_err[size_t(r * k + c)])) {
        FAIL(fmt::format("{}: activation ({}, {}) = {} as E4M3 times its row scale is {}: past the model's {}", what, r, c, x,
                         aq[size_t(r * k + c)], a_err[size_t(r * k + c)]));
        return {};
      }
    }
  }
  double err2 = 0, ref2 = 0, worst = 0, w_only2 = 0, a_only2 = 0;
  for (int64_t i = 0; i < m; ++i) {
    double row_err2 = 0, row_ref2 = 0;
    for (int64_t j = 0; j < n; ++j) {
      double exact = 0, got = 0, bound = 0, mass = 0, got_w = 0, got_a = 0;
      for (int64_t c = 0; c < k; ++c) {
        const double x = a[size_t(i * k + c)], v = w.value(j, c);
        exact += x * v;
        got += aq[size_t(i * k + c)] * wq[size_t(j * k + c)];
        got_w += x * wq[size_t(j * k + c)], got_a += aq[size_t(i * k + c)] * v;
        const double ex = a_err[size_t(i * k + c)], ew = w_err[size_t(j * k + c)];
        bound += ew * (std::fabs(x) + ex) + std::fabs(v) * ex;
        mass += std::fabs(x * v);
      }
      bound += 1e-12 * mass;  // float64 sums
      if (!(std::fabs(got - exact) <= bound)) {
        FAIL(fmt::format("{}: [m {}, n {}, k {}] element ({}, {}): W4A8 {} vs exact {}, off by {} past the bound {}", what, m,
                         n, k, i, j, got, exact, std::fabs(got - exact), bound));
        return {};
      }
      row_err2 += (got - exact) * (got - exact), row_ref2 += exact * exact;
      w_only2 += (got_w - exact) * (got_w - exact), a_only2 += (got_a - exact) * (got_a - exact);
    }
    err2 += row_err2, ref2 += row_ref2;
    if (row_ref2 > 0) worst = std::max(worst, std::sqrt(row_err2 / row_ref2));
  }
  if (ref2 == 0) return {};
  return {std::sqrt(err2 / ref2), worst, std::sqrt(w_only2 / ref2), std::sqrt(a_only2 / ref2)};
}

std::vector<float> bf16_values(std::vector<float> v) {
  for (float& x : v) x = bf16_bits_to_float(float_to_bf16_bits(x));
  return v;
}

}  // namespace

TEST_SUITE("fp8_fold") {
  TEST_CASE("a row's fold exponent is the least that keeps its largest value within 448") {
    for (unsigned c : finite_scales()) {
      CAPTURE(c);
      const float s = e4m3_to_float(c);
      const int e = fold_exponent(s);
      if (s == 0) {
        CHECK(e == 0);
        continue;
      }
      CHECK(6.0 * s <= 448.0 * std::ldexp(1.0, e));
      CHECK(6.0 * s > 448.0 * std::ldexp(1.0, e - 1));
    }
    CHECK(fold_exponent(448.0f) == 3);        // 2688 <= 3584
    CHECK(fold_exponent(0x1p-9f) == -15);     // the smallest scale's values lifted 2^15
    CHECK(fold_exponent(std::nanf("")) == 0);
  }

  TEST_CASE("every nibble folded with every scale rounds to the nearest E4M3 value") {
    for (unsigned c : finite_scales()) {
      const float s = e4m3_to_float(c);
      const int e0 = fold_exponent(s);
      for (int e = e0 - 3; e <= e0 + 3; ++e)  // below e0 the largest values saturate at 448
        for (unsigned nibble = 0; nibble < 16; ++nibble) {
          const double v = double(e2m1_to_float(nibble & 7u)) * s * std::ldexp(1.0, -e);
          const unsigned want = e4m3_nearest(v) | ((nibble & 8u) << 4);
          const unsigned got = fold_e2m1(nibble, s, e);
          if (got != want) FAIL(fmt::format("scale {:#04x}, e {}, nibble {:#x}: {:#04x}, want {:#04x}", c, e, nibble, got, want));
        }
    }
  }

  TEST_CASE("a folded block's table gives every nibble's code, four at a time") {
    std::mt19937 rng(std::random_device{}());
    for (unsigned c : finite_scales()) {
      const float s = e4m3_to_float(c);
      const int e = fold_exponent(s) + int(rng() % 3) - 1;
      const FoldedBlock block = fold_block(s, e);
      for (int trial = 0; trial < 64; ++trial) {
        const unsigned nibbles = rng() & 0xFFFFu;
        const unsigned got = fold_lookup4(block, nibbles);
        for (unsigned i = 0; i < 4; ++i) {
          const unsigned want = fold_e2m1((nibbles >> (4 * i)) & 15u, s, e), byte = (got >> (8 * i)) & 0xFFu;
          if (byte != want) FAIL(fmt::format("scale {:#04x}, e {}, nibbles {:#06x}: element {} {:#04x}, want {:#04x}", c, e, nibbles, i, byte, want));
        }
      }
    }
  }

  TEST_CASE("activations round to the nearest E4M3 value of x * 448 / amax; NaN and Inf stay NaN") {
    std::mt19937 rng(std::random_device{}());
    std::normal_distribution<float> normal(0.0f, 3.0f);
    for (int trial = 0; trial < 2000; ++trial) {
      const float amax = std::ldexp(1.0f + float(rng() % 1000) / 1000.0f, int(rng() % 40) - 20);
      const float inverse = 448.0f / amax, x = std::ldexp(normal(rng), int(std::ilogb(amax)) - 2);
      const float v32 = x * inverse;
      CAPTURE(x);
      CAPTURE(amax);
      const unsigned want = e4m3_nearest(std::fabs(double(v32))) | (std::signbit(v32) ? 0x80u : 0u);
      CHECK(activation_e4m3(x, inverse) == want);
    }
    CHECK(activation_e4m3(448.0f, 1.0f) == 0x7E);
    CHECK(activation_e4m3(480.0f, 1.0f) == 0x7E);  // saturates
    CHECK(activation_e4m3(-448.0f, 1.0f) == 0xFE);
    CHECK(activation_e4m3(std::nanf(""), 1.0f) == E4M3_NAN);
    CHECK(activation_e4m3(INFINITY, 1.0f) == E4M3_NAN);
    CHECK(activation_e4m3(-INFINITY, 1.0f) == E4M3_NAN);
    CHECK(activation_scale(0.0f) == 1.0f);
  }

  TEST_CASE("W4A8 stays within its error model: realistic weights and activations with outlier channels") {
    std::mt19937 rng(std::random_device{}());
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::uniform_real_distribution<float> spread(0.25f, 4.0f);
    const int64_t m = 16, n = 96, k = 1024;
    std::vector<float> w(size_t(n * k));
    for (int64_t r = 0; r < n; ++r) {
      const float sigma = 0.02f * spread(rng);  // rows of different ranges: different scale spreads
      for (int64_t c = 0; c < k; ++c) w[size_t(r * k + c)] = sigma * normal(rng);
    }
    std::vector<float> a(size_t(m * k));
    for (float& x : a) x = normal(rng);
    for (int c : {7, 300, 301, 999})  // outlier channels, as LLM activations have
      for (int64_t r = 0; r < m; ++r) a[size_t(r * k + c)] *= 40.0f;
    const Errors e = check_w4a8(quantized_weight(w, n, k), bf16_values(a), m, "realistic");
    MESSAGE(fmt::format("realistic: relative Frobenius error {:.4f} (weights alone {:.4f}, activations alone {:.4f}), worst row {:.4f}",
                        e.rel_frobenius, e.weights_only, e.activations_only, e.worst_row));
    CHECK(e.rel_frobenius > 0);  // something was rounded: the data is not trivially exact
  }

  TEST_CASE("W4A8 stays within its error model: scales across E4M3's range, subnormal scales, zero blocks and rows") {
    std::mt19937 rng(std::random_device{}());
    const int64_t m = 8, n = 40, k = 512, kb = k / 16;
    Weight w{n, k, std::vector<uint8_t>(size_t(n * k)), std::vector<uint8_t>(size_t(n * kb)), 0.75f};
    for (auto& x : w.nibbles) x = uint8_t(rng() & 15u);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t b = 0; b < kb; ++b) {
        unsigned code = 1 + rng() % 0x7E;                   // any finite non-zero scale in a row
        if (r % 5 == 1) code = 1 + rng() % 7;               // rows of subnormal scales only
        if (r % 5 == 2 && b % 3 == 0) code = 0x7E;           // 448 beside 2^-9 in one row
        if (r % 5 == 3 && b % 4 == 0) code = 0;              // zero blocks
        w.scales[size_t(r * kb + b)] = uint8_t(code);
      }
    for (int64_t c = 0; c < k; ++c) w.scales[size_t(4 * kb + c / 16)] = 0;  // a zero row
    std::vector<float> a(size_t(m * k));
    for (auto& x : a) x = std::ldexp(float(int(rng() % 255) - 127) / 64.0f, int(rng() % 30) - 20);
    for (int64_t c = 0; c < k; ++c) a[size_t(3 * k + c)] = 0;  // a zero row of activations
    const Errors e = check_w4a8(w, bf16_values(a), m, "adversarial");
    MESSAGE(fmt::format("adversarial: relative Frobenius error {:.4f} (weights alone {:.4f}, activations alone {:.4f}), worst row {:.4f}",
                        e.rel_frobenius, e.weights_only, e.activations_only, e.worst_row));
  }
}
