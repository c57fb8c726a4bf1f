// quantize: the rounding functions against their definitions, the block quantizer's
// documented decisions, the round-trip bound, and argument validation (no GPU needed).
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <random>

#include "common/nvfp4_quantize.cuh"
#include "common/scale_layout.cuh"
#include "ops/quantize_op.hpp"
#include "ops/row_quantize_op.hpp"
#include "quantize_fixture.hpp"
#include "sass_util.hpp"

using namespace nvfp4::jit;
using namespace nvfp4k;

namespace {

// Nearest of the candidates' values, ties to the even code: rounding from its definition.
template <class Decode>
unsigned nearest_even(double x, int codes, Decode decode) {
  unsigned best = 0;
  for (int c = 1; c < codes; ++c) {
    const double d = std::fabs(decode(c) - x), db = std::fabs(decode(best) - x);
    if (d < db || (d == db && (c & 1) == 0)) best = c;
  }
  return best;
}

double e4m3_value(int c) { return e4m3_to_float(unsigned(c)); }

// quantize_block16(x, gs) against its definition; false (after a failed check) where it differs.
bool block_matches_definition(const float (&x)[16], float gs) {
  unsigned packed[2];
  const unsigned char scale = quantize_block16(x, gs, packed);
  unsigned amax = 0;
  for (float v : x) amax = std::max(amax, float_to_bits(v) & 0x7FFFFFFFu);
  if (amax >= 0x7F800000u) {
    CHECK((scale == E4M3_NAN && packed[0] == 0 && packed[1] == 0));
    return scale == E4M3_NAN && packed[0] == 0 && packed[1] == 0;
  }
  const unsigned want_scale = float_to_e4m3_satfinite(bits_to_float(amax) / 6.0f / gs);
  if (scale != want_scale) {
    FAIL_CHECK("gscale " << gs << ", amax " << bits_to_float(amax) << ": scale " << int(scale) << " != " << want_scale);
    return false;
  }
  const float d = e4m3_to_float(scale) * gs;
  for (int i = 0; i < 16; ++i) {
    const unsigned want = d == 0.0f ? 0u : float_to_e2m1_satfinite(x[i] / d);
    const unsigned got = (packed[i / 8] >> ((i % 8) * 4)) & 15u;
    if (got != want) {
      FAIL_CHECK("gscale " << gs << " element " << i << " = " << x[i] << " (d = " << d << "): nibble " << got << " != " << want);
      return false;
    }
  }
  return true;
}

}  // namespace

TEST_SUITE("quantize") {
  TEST_CASE("fp32 -> E4M3 is round-to-nearest-even, saturating at 448") {
    std::vector<float> probes;
    for (int c = 0; c < 0x7E; ++c) {  // every code, every midpoint, and just either side
      const float a = float(e4m3_value(c)), b = float(e4m3_value(c + 1)), mid = (a + b) / 2;
      for (float v : {a, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f)}) probes.push_back(v);
    }
    std::mt19937 rng(std::random_device{}());
    for (int i = 0; i < 20000; ++i) probes.push_back(std::ldexp(float(rng() % 100000) / 100000.0f + 0.5f, int(rng() % 24) - 14));
    for (float s : probes) {
      CAPTURE(s);
      const unsigned want = s >= 448.0f ? 0x7E : nearest_even(s, 0x7F, e4m3_value);
      REQUIRE(float_to_e4m3_satfinite(s) == want);
    }
    CHECK(float_to_e4m3_satfinite(1e30f) == 0x7E);
    CHECK(float_to_e4m3_satfinite(INFINITY) == 0x7E);
    CHECK(float_to_e4m3_satfinite(NAN) == 0x7F);
    CHECK(float_to_e4m3_satfinite(0.0f) == 0);
  }

  TEST_CASE("fp32 -> E2M1 is round-to-nearest-even onto the grid, saturating, sign kept") {
    auto value = [](int c) { return double(e2m1_to_float(unsigned(c))); };
    std::mt19937 rng(std::random_device{}());
    std::vector<float> probes = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 6.0f, 7.0f, 1e9f, INFINITY, 0.0f};
    for (int i = 0; i < 20000; ++i) probes.push_back(float(rng() % 800000) / 100000.0f);
    for (float x : probes)
      for (float v : {x, -x}) {
        CAPTURE(v);
        const unsigned mag = std::fabs(v) >= 6.0f ? 7 : nearest_even(std::fabs(v), 8, value);
        REQUIRE(float_to_e2m1_satfinite(v) == (mag | (std::signbit(v) ? 8u : 0u)));
      }
    // The ties, spelled out: 0.25->0, 0.75->1, 1.25->1, 1.75->2, 2.5->2, 3.5->4, 5->4.
    const unsigned want[] = {0, 2, 2, 4, 4, 6, 6};
    for (int i = 0; i < 7; ++i) CHECK(float_to_e2m1_satfinite(probes[i]) == want[i]);
  }

  TEST_CASE("the kernels' E2M1 code (least of three roundings) equals RNE onto the grid") {
    auto check = [](float q) {
      const unsigned got = e2m1_code_plus_2p23(q) - 0x4B000000u, want = float_to_e2m1_satfinite(q);
      if (got != want) FAIL_CHECK("q = " << q << " (bits " << float_to_bits(q) << "): code " << got << " != " << want);
      return got == want;
    };
    // every float from 0 to 16 with a stride that visits every exponent and many mantissas
    for (unsigned bits = 0; bits <= 0x41800000u; bits += 977)
      if (!check(bits_to_float(bits))) return;
    // each threshold and grid value, and 64 ulps either side
    for (float t : {0.25f, 0.5f, 0.75f, 1.0f, 1.25f, 1.5f, 1.75f, 2.0f, 2.5f, 3.0f, 3.5f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f}) {
      float lo = t, hi = t;
      for (int i = 0; i < 64; ++i, lo = std::nextafter(lo, 0.0f), hi = std::nextafter(hi, 1e30f))
        if (!check(lo) || !check(hi)) return;
    }
    for (float q : {0.0f, 1e-30f, 1e-45f, 7.9999f, 1e9f, 3e38f, INFINITY}) check(q);
  }

  TEST_CASE("quantize_block16 equals its definition: scale, then each x / d rounded onto the grid") {
    std::mt19937 rng(std::random_device{}());
    for (int rep = 0; rep < 2000; ++rep)
      for (float gs : {1.0f, 0.37f, 1.0f / 2688, 3e-5f}) {
        const auto bytes = testutil::quantize_input(1, 64, 64, DType::fp32, rng, true, gs);
        for (int b = 0; b < 4; ++b) {
          float x[16];
          std::memcpy(x, &bytes[size_t(b) * 64], 64);
          if (!block_matches_definition(x, gs)) return;
        }
      }
  }

  // The largest quotients x / d: scales that round down the most (17/16 2^e, a tie to the even
  // 2^e: quotients up to 6.4), the ends of E4M3's normal range and just past them (subnormal and
  // saturated scales, where quotients reach 7 and saturate), with values at and near amax.
  TEST_CASE("quantize_block16 at the scales that round down the most and at the saturation's edges") {
    std::mt19937 rng(std::random_device{}());
    std::vector<float> scales = {0x1p-6f, std::nextafter(0x1p-6f, 0.0f), 448.0f, std::nextafter(448.0f, 1e9f), 464.0f, 500.0f};
    for (int e = -6; e <= 8; ++e) {
      const float s = std::ldexp(17.0f / 16, e);
      for (float v : {s, std::nextafter(s, 0.0f), std::nextafter(s, 1e9f)}) scales.push_back(v);
    }
    for (float gs : {1.0f, 0.37f, 1.0f / 2688, 3e-5f})
      for (float s : scales)
        for (int rep = 0; rep < 20; ++rep) {
          const float amax = s * 6.0f * gs;
          float x[16];
          for (int i = 0; i < 16; ++i) {
            float v = amax;
            for (unsigned n = rng() % 4; i > 0 && n > 0; --n) v = std::nextafter(v, 0.0f);  // at or just below amax
            if (i > 4) v = amax * float(rng() % 1000) / 1000.0f;
            x[i] = rng() % 2 ? -v : v;
          }
          CAPTURE(s);
          if (!block_matches_definition(x, gs)) return;
        }
  }

  TEST_CASE("the kernels' reciprocal-and-FMA division equals IEEE division") {
    std::mt19937 rng(std::random_device{}());
    auto fma = [](float a, float b, float c) { return std::fma(a, b, c); };
    const float thresholds[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
    for (int i = 0; i < 2000000; ++i) {
      const float d = std::ldexp(1.0f + float(rng() % 8388608) / 8388608.0f, int(rng() % 200) - 100);
      // Half the quotients land within a few ulps of an E2M1 rounding threshold.
      float x = std::ldexp(1.0f + float(rng() % 8388608) / 8388608.0f, int(rng() % 6) - 3) * d;
      if (i % 2) {
        x = thresholds[rng() % 7] * d;
        for (int n = int(rng() % 7) - 3; n != 0; n += n > 0 ? -1 : 1) x = std::nextafter(x, n > 0 ? 1e38f : 0.0f);
      }
      if (i % 1000 == 0) x = 0.0f;
      const float rd = 1.0f / d;
      // Compared as bits (+0 must stay +0).
      if (float_to_bits(divide_rn_nonneg_with(x, d, rd, fma)) != float_to_bits(x / d)) {
        FAIL_CHECK("x = " << x << ", d = " << d << ": " << divide_rn_nonneg_with(x, d, rd, fma) << " != " << x / d);
        break;
      }
    }
  }

  // One FMA correction for BF16 / FP16 dividends (divide_rn_nonneg<true>): every dividend
  // significand of the type at 9 exponents (quotients from 2^-5 to 2^5: the ratio of the
  // significands, not the exponents, decides the rounding) against `divisors` significands of d.
  auto check_narrow_division = [](int mantissa_bits, unsigned divisors, unsigned seed) {
    std::mt19937 rng(seed);
    auto fma = [](float a, float b, float c) { return std::fma(a, b, c); };
    for (unsigned i = 0; i < divisors; ++i) {
      const unsigned dm = i < 4096 ? i : i < 8192 ? 0x7FFFFFu - (i - 4096) : unsigned(rng() % 0x800000u);
      const float d = bits_to_float(0x3F800000u | dm), rd = 1.0f / d;
      for (int e = -4; e <= 4; ++e)
        for (unsigned xm = 0; xm < (1u << mantissa_bits); ++xm) {
          const float x = bits_to_float((unsigned(127 + e) << 23) | (xm << (23 - mantissa_bits)));
          if (float_to_bits(divide_rn_nonneg_with<true>(x, d, rd, fma)) != float_to_bits(x / d)) {
            FAIL_CHECK(mantissa_bits << "-bit significand: x = " << x << ", d = " << d << ": "
                                     << divide_rn_nonneg_with<true>(x, d, rd, fma) << " != " << x / d);
            return;
          }
        }
    }
  };

  TEST_CASE("one FMA correction divides BF16 and FP16 values exactly") {
    check_narrow_division(7, 1 << 16, std::random_device{}());
    check_narrow_division(10, 1 << 13, std::random_device{}());
  }

  // Where the codes come from the conversion instruction (sm_100a and later), the reciprocal path
  // divides a block only where reciprocal_divides says no quotient overflows (an overflowing
  // quotient is NaN there). At its bound the largest quotient stays finite and rounds as IEEE does.
  TEST_CASE("the reciprocal path's guard leaves no quotient that overflows") {
    std::mt19937 rng(std::random_device{}());
    auto fma = [](float a, float b, float c) { return std::fma(a, b, c); };
    for (int i = 0; i < 200000; ++i) {
      const float d = std::ldexp(1.0f + float(rng() % 8388608) / 8388608.0f, int(rng() % 200) - 100);  // [2^-100, 2^100)
      const float bound = std::fmin(0x1p126f * d, 0x1.fffffep127f);
      // below the bound; at it (refused unless 2^126 d overflows); the largest float (a quotient
      // that overflows wherever d < 1)
      const float amax = i % 3 == 0 ? std::nextafter(bound, 0.0f) : i % 3 == 1 ? bound : 0x1.fffffep127f;
      if (!reciprocal_divides(amax, d, true)) {
        CHECK(amax >= 0x1p126f * d);
        continue;
      }
      const float q = divide_rn_nonneg_with(amax, d, 1.0f / d, fma);
      if (!std::isfinite(q) || float_to_bits(q) != float_to_bits(amax / d)) {
        FAIL_CHECK(fmt::format("amax = {:a}, d = {:a}: {:a} != {:a}", amax, d, q, amax / d));
        break;
      }
    }
  }

  // Every divisor significand: about a minute on one core. Run with --no-skip.
  TEST_CASE("one FMA correction divides BF16 and FP16 values exactly: exhaustive" * doctest::skip()) {
    check_narrow_division(7, 1u << 23, 0);
    check_narrow_division(10, 1u << 23, 0);
  }

  TEST_CASE("the 16-bit block quantizer equals the fp32 one on the widened values") {
    std::mt19937 rng(std::random_device{}());
    for (DType dt : {DType::bf16, DType::fp16}) {
      const bool bf16 = dt == DType::bf16;
      auto widen = [&](unsigned h) { return bf16 ? bf16_bits_to_float(h) : fp16_bits_to_float(h); };
      const unsigned inf = bf16 ? 0x7F80u : 0x7C00u;
      for (int rep = 0; rep < 200000; ++rep) {
        unsigned w[8];
        // Mostly values near one exponent (real blocks), some anything at all: subnormals,
        // both zeros, Inf, NaN; a few blocks of one repeated value, and E2M1 ties.
        const unsigned base = unsigned(rng() % (inf - 0x0800u)) & 0x7C00u;
        for (unsigned& word : w) {
          unsigned h[2];
          for (unsigned& v : h) {
            const unsigned r = unsigned(rng());
            v = rep % 7 == 0 ? r & 0xFFFFu : ((r & 0x8000u) | (base + (r >> 16) % 0x0C00u));
            if (rep % 97 == 0 && r % 5 == 0) v = (r & 0x8000u) | (r % 3 == 0 ? inf : r % 3 == 1 ? inf + 1 : 0u);
          }
          word = h[0] | (h[1] << 16);
        }
        if (rep % 13 == 0) for (unsigned& word : w) word = w[0];
        float x[16];
        for (int i = 0; i < 8; ++i) x[2 * i] = widen(w[i] & 0xFFFFu), x[2 * i + 1] = widen(w[i] >> 16);
        for (float gs : {1.0f, 1.0f / 2688, 3.1e-5f}) {
          unsigned want[2], got[2];
          const unsigned char want_scale = quantize_block16(x, gs, want);
          const unsigned char got_scale = bf16 ? quantize_block16_16bit<DTYPE_BF16>(w, gs, got)
                                               : quantize_block16_16bit<DTYPE_FP16>(w, gs, got);
          if (got_scale != want_scale || got[0] != want[0] || got[1] != want[1]) {
            FAIL_CHECK((bf16 ? "bf16" : "fp16") << " block, word 0 = " << w[0] << ", gscale " << gs << ": scale "
                                                << int(got_scale) << " / " << int(want_scale) << ", nibbles " << got[0]
                                                << " " << got[1] << " != " << want[0] << " " << want[1]);
            return;
          }
        }
      }
    }
  }

  TEST_CASE("the scale's two divisions by reciprocals and FMAs equal IEEE division where the kernels use them") {
    // quantize_block16 computes (amax / 6) / gscale so for amax >= 2^-90 and gscale in
    // [2^-90, 2^90]; the result matters (is not rounded to a zero scale) from 2^-10 up, and
    // on the E4M3 rounding ties, which the second half of the cases aims at.
    std::mt19937 rng(std::random_device{}());
    auto fma = [](float a, float b, float c) { return std::fma(a, b, c); };
    auto mantissa = [&] { return 1.0f + float(rng() % 8388608) / 8388608.0f; };
    for (int i = 0; i < 2000000; ++i) {
      const float g = std::ldexp(mantissa(), int(rng() % 180) - 90);
      float amax = std::ldexp(mantissa(), int(rng() % 230) - 90);
      if (i % 2) {  // amax / 6 / g near an E4M3 tie: (code + 1/2) steps, a few ulps off
        const float tie = std::ldexp(1.0f + (float(rng() % 8) + 0.5f) / 8.0f, int(rng() % 16) - 10);
        amax = tie * 6.0f * g;
        for (int n = int(rng() % 7) - 3; n != 0; n += n > 0 ? -1 : 1) amax = std::nextafter(amax, n > 0 ? 1e38f : 0.0f);
        if (!(amax >= 0x1p-90f) || std::isinf(amax)) continue;
      }
      if (std::isinf(amax)) continue;
      auto clamp = [](float q) { return q < 0x1p100f ? q : 0x1p100f; };  // as quantize_block16 does
      const float a6 = divide_rn_nonneg_with(amax, 6.0f, 0x1.555556p-3f, fma);
      const float got = clamp(divide_rn_nonneg_with(a6, g, 1.0f / g, fma)), want = clamp(amax / 6.0f / g);
      if (float_to_bits(a6) != float_to_bits(amax / 6.0f) || (want >= 0x1p-10f && float_to_bits(got) != float_to_bits(want))) {
        FAIL_CHECK("amax = " << amax << ", g = " << g << ": " << got << " != " << want);
        break;
      }
    }
  }

  // A kernel quantizes every block of a global scale g by reciprocals (DIVIDE_RECIPROCAL) where
  // GlobalScale(g).reciprocal_suffices(): the scale's divisions there for an amax below 2^-90
  // (which DIVIDE_EITHER divides by IEEE division) give the same E4M3 code, and every nonzero
  // decoded scale times g is a d the reciprocal path divides by.
  TEST_CASE("where a global scale lets a kernel take reciprocals for every block, they give its bits") {
    std::mt19937 rng(std::random_device{}());
    auto fma = [](float a, float b, float c) { return std::fma(a, b, c); };
    auto mantissa = [&] { return 1.0f + float(rng() % 8388608) / 8388608.0f; };
    int taken = 0;
    for (int i = 0; i < 1000000; ++i) {
      const float g = std::ldexp(mantissa(), int(rng() % 200) - 100);  // [2^-100, 2^100): the range's edges both sides
      if (!nvfp4k::GlobalScale(g).reciprocal_suffices()) {
        CHECK((g < 0x1p-70f || g > 0x1p90f));
        continue;
      }
      ++taken;
      // an amax below 2^-90, subnormals too
      const float amax = i % 5 == 0 ? bits_to_float(unsigned(rng()) % 0x00800000u) : std::ldexp(mantissa(), -91 - int(rng() % 36));
      for (bool narrow : {false, true}) {
        const float a6 = narrow ? divide_rn_nonneg_with<true>(amax, 6.0f, 0x1.555556p-3f, fma)
                                : divide_rn_nonneg_with(amax, 6.0f, 0x1.555556p-3f, fma);
        const float q = divide_rn_nonneg_with(a6, g, 1.0f / g, fma);
        const unsigned got = float_to_e4m3_satfinite(q < 0x1p100f ? q : 0x1p100f), want = float_to_e4m3_satfinite(amax / 6.0f / g);
        if (got != want) {
          FAIL_CHECK(fmt::format("amax = {:a}, g = {:a}{}: scale code {} != {}", amax, g, narrow ? " (narrow)" : "", got, want));
          return;
        }
      }
      const float d_min = 0x1p-9f * g, d_max = 448.0f * g;  // the least and largest nonzero decoded scales
      if (!reciprocal_divides(0.0f, d_min, false) || !reciprocal_divides(0.0f, d_max, false)) {
        FAIL_CHECK(fmt::format("g = {:a}: d from {:a} to {:a} leaves the reciprocal path's range", g, d_min, d_max));
        return;
      }
    }
    CHECK(taken > 400000);
  }

  TEST_CASE("block decisions: zero, NaN, Inf, saturation, subnormal scale") {
    float x[16];
    unsigned packed[2];
    for (float& v : x) v = 0.0f;
    CHECK(quantize_block16(x, 1.0f, packed) == 0);
    CHECK((packed[0] | packed[1]) == 0);
    x[4] = NAN;
    CHECK(quantize_block16(x, 1.0f, packed) == E4M3_NAN);
    CHECK((packed[0] | packed[1]) == 0);
    x[4] = -INFINITY;
    CHECK(quantize_block16(x, 1.0f, packed) == E4M3_NAN);
    for (float& v : x) v = 1.0f;
    x[0] = 6.0f * 448.0f * 2.0f;  // beyond what scale 448 can hold with gscale 1
    CHECK(quantize_block16(x, 1.0f, packed) == 0x7E);
    CHECK((packed[0] & 0xF) == 7);  // saturated to 6
    for (float& v : x) v = 3e-2f;   // amax/6 = 5e-3: an E4M3 subnormal (code 3)
    const unsigned char s = quantize_block16(x, 1.0f, packed);
    CHECK(s == 3);
    for (float& v : x) v = 3e-3f;   // amax/6 = 5e-4 < 2^-10: the scale rounds to 0, nibbles 0
    CHECK(quantize_block16(x, 1.0f, packed) == 0);
    CHECK((packed[0] | packed[1]) == 0);
  }

  TEST_CASE("round trip: every element within one step of its block's scale") {
    std::mt19937 rng(std::random_device{}());
    for (DType dt : {DType::fp32, DType::bf16, DType::fp16})
      for (ScaleLayout layout : {ScaleLayout::linear, ScaleLayout::swizzled128x4})
        for (GlobalScaleMode mode : {GlobalScaleMode::given, GlobalScaleMode::compute_per_tensor, GlobalScaleMode::compute_per_row}) {
          const int64_t rows = 37, k = 80;
          const auto in = testutil::quantize_input(rows, k, k, dt, rng, false);
          std::vector<uint8_t> packed(rows * k / 2), scales(scale_bytes(layout, rows, k), 0xCD);
          std::vector<float> gs_out(rows, -1.0f), back(rows * k);
          QuantizeArgs q;
          q.in = in.data();
          q.in_dtype = dt;
          q.rows = rows;
          q.k = k;
          q.out = packed.data();
          q.scales = scales.data();
          q.scale_layout = layout;
          q.scale_mode = mode;
          q.global_scale.value = 1.0f;  // |x| < 6 * 448: no saturation
          q.global_scale_out = gs_out.data();
          cpu::quantize(q);
          DequantizeArgs d;
          d.src = {packed.data(), 0, scales.data(), layout, {}};
          if (mode == GlobalScaleMode::given) d.src.global_scale.value = 1.0f;
          if (mode == GlobalScaleMode::compute_per_tensor) d.src.global_scale.value = gs_out[0];
          if (mode == GlobalScaleMode::compute_per_row) d.src.global_scale = {1.0f, gs_out.data(), true};
          d.src_rows = rows;
          d.k = k;
          d.out = back.data();
          d.out_dtype = DType::fp32;
          cpu::dequantize(d);
          double err2 = 0, ref2 = 0;
          for (int64_t r = 0; r < rows; ++r) {
            const float gs = mode == GlobalScaleMode::given ? 1.0f : mode == GlobalScaleMode::compute_per_tensor ? gs_out[0] : gs_out[r];
            for (int64_t e = 0; e < k; ++e) {
              const size_t at = size_t(r * k + e);
              float v;
              if (dt == DType::fp32) {
                std::memcpy(&v, &in[at * 4], 4);
              } else {
                uint16_t h;
                std::memcpy(&h, &in[at * 2], 2);
                v = dt == DType::bf16 ? bf16_bits_to_float(h) : fp16_bits_to_float(h);
              }
              // The format's bound: half the widest E2M1 step (1) times the block's decoded
              // scale d, plus what saturation at 6d cuts off.
              const long long off = layout == ScaleLayout::linear ? scale_offset_linear(r, e / 16, k / 16)
                                                                   : scale_offset_swizzled128x4(r, e / 16, k / 16);
              const double d = double(e4m3_to_float(scales[off])) * gs;
              const double err = std::fabs(double(v) - back[at]);
              err2 += err * err;
              ref2 += double(v) * v;
              if (err > d * (1 + 1e-6) + std::max(0.0, std::fabs(double(v)) - 6 * d)) {
                FAIL_CHECK("rows=37 k=80 dtype=" << int(dt) << " mode=" << int(mode) << ": element (" << r << ", " << e
                           << ") " << v << " came back as " << back[at] << " (block scale " << d << ")");
                return;
              }
            }
          }
          if (mode == GlobalScaleMode::given) continue;
          MESSAGE("dtype " << int(dt) << " layout " << int(layout) << " mode " << int(mode)
                           << ": relative Frobenius round-trip error " << std::sqrt(err2 / ref2));
        }
  }

  TEST_CASE("E2M1 codes by pairs (the hardware conversion's definition) equal the kernels' least-of-three codes, nibble for nibble") {
    std::mt19937 rng(std::random_device{}());
    const float edges[] = {0.0f, 0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 6.0f, 7.0f, 1e30f, INFINITY};
    for (int rep = 0; rep < 100000; ++rep) {
      float q[8];
      for (float& v : q) {
        const float e = edges[rng() % 12];
        v = rng() % 3 == 0 ? std::nextafter(e, rng() % 2 ? 0.0f : INFINITY) : rng() % 3 == 1 ? e : float(rng() % 8000) / 1000.0f;
      }
      unsigned want = 0;
      for (int i = 7; i >= 0; --i) want = want * 16u + (e2m1_code_plus_2p23(q[i]) - 0x4B000000u);
      const unsigned got = e2m1x8_satfinite(q);
      CHECK_MESSAGE(got == want, fmt::format("q = {} {} {} {} {} {} {} {}: {:08x}, want {:08x}", q[0], q[1], q[2], q[3], q[4], q[5],
                                             q[6], q[7], got, want));
      if (got != want) break;
    }
  }

  // The instruction has not run here (no Blackwell GPU): tests/gpu/test_gpu_format.cpp runs the
  // packing around it on the H100 with the instruction's definition in its place.
  TEST_CASE("on sm_100a and sm_120a the quantizers take E2M1 codes from the hardware's conversion (SASS)") {
    using namespace nvfp4::jit::detail;
    std::vector<KernelSpec> specs;
    for (Arch arch : {Arch::sm_100a, Arch::sm_103a, Arch::sm_120a, Arch::sm_121a}) {
      for (DType in : {DType::bf16, DType::fp32}) specs.push_back(quantize_spec(arch, 4096, in, ScaleLayout::linear));
      for (Op op : {Op::rmsnorm_quantize, Op::swiglu_quantize, Op::moe_stage})
        specs.push_back(row_quantize_spec(op, arch, 4096, DType::bf16, ScaleLayout::swizzled128x4));
    }
    test::check_kernel_sass(specs, "F2FP.SATFINITE.E2M1.F32", 8);  // four a word, two words a block
    // the few-row SwiGLU and staging kernels: each thread half a block, one word
    std::vector<KernelSpec> halves;
    for (Arch arch : {Arch::sm_100a, Arch::sm_120a})
      for (Op op : {Op::swiglu_quantize, Op::moe_stage}) {
        RowKernel kernel;
        kernel.op = op, kernel.k = 4096, kernel.whole_rows = false, kernel.few_rows = true;
        halves.push_back(row_quantize_spec(arch, kernel));
      }
    test::check_kernel_sass(halves, "F2FP.SATFINITE.E2M1.F32", 4);
  }

  TEST_CASE("bad arguments get an error naming the argument") {
    QuantizeArgs a;
    a.in = reinterpret_cast<void*>(0x10000);
    a.out = reinterpret_cast<void*>(0x20000);
    a.scales = reinterpret_cast<void*>(0x30000);
    a.rows = 4;
    a.k = 64;
    auto expect = [](const QuantizeArgs& q, Status status, const char* text) {
      try {
        quantize(q, nullptr);
        FAIL("expected an error mentioning: " << text);
      } catch (const Error& e) {
        CAPTURE(e.what());
        CHECK(e.status() == status);
        CHECK(std::string(e.what()).find(text) != std::string::npos);
      }
    };
    QuantizeArgs b = a;
    b.k = 40;
    expect(b, Status::invalid_argument, "k = 40");
    b = a, b.in = nullptr;
    expect(b, Status::invalid_argument, "in is null");
    b = a, b.in = reinterpret_cast<void*>(0x10008);
    expect(b, Status::invalid_argument, "in = 0x10008 is not 16-byte aligned");
    b = a, b.in_row_stride = 68;
    expect(b, Status::invalid_argument, "in_row_stride = 68 elements is not a multiple of 16 bytes");
    b = a, b.out_row_stride_bytes = 36;
    expect(b, Status::invalid_argument, "out_row_stride_bytes = 36 must be a multiple of 8");
    b = a, b.in_dtype = DType::nvfp4;
    expect(b, Status::unsupported, "in_dtype = nvfp4");
    b = a, b.global_scale.value = 0.0f;
    expect(b, Status::invalid_argument, "global_scale.value = 0 must be positive and finite");
    b = a, b.scale_mode = GlobalScaleMode::compute_per_row;
    expect(b, Status::invalid_argument, "global_scale_out is null");
    b = a, b.scale_mode = static_cast<GlobalScaleMode>(9);
    expect(b, Status::invalid_argument, "scale_mode = 9");
    CHECK_THROWS_AS(scale_bytes(ScaleLayout::linear, 4, 24), Error);
    CHECK(scale_bytes(ScaleLayout::swizzled128x4, 129, 80) == 256 * 8);
    CHECK(nvfp4_jit_scale_bytes(NVFP4_SCALES_LINEAR, 3, 64) == 12);
  }
}
