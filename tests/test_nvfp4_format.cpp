// The format pieces of templates/common, compiled as host code: decode tables, rounding.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "common/nvfp4_format.cuh"

using namespace nvfp4k;

TEST_SUITE("format") {
  TEST_CASE("e2m1 decodes every nibble") {
    const float expected[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.f, -0.5f, -1, -1.5f, -2, -3, -4, -6};
    for (unsigned n = 0; n < 16; ++n) {
      CAPTURE(n);
      CHECK(e2m1_to_float(n) == expected[n]);
      CHECK(std::signbit(e2m1_to_float(n)) == (n >= 8));
    }
  }

  TEST_CASE("e4m3 decodes every byte") {
    for (unsigned b = 0; b < 256; ++b) {
      CAPTURE(b);
      const int e = (b >> 3) & 15, m = b & 7;
      const double sign = (b & 0x80) ? -1 : 1;
      const float got = e4m3_to_float(b);
      if (e == 15 && m == 7) {
        CHECK(std::isnan(got));
        continue;
      }
      const double want = sign * (e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1 + m / 8.0, e - 7));
      CHECK(double(got) == want);
    }
    CHECK(e4m3_to_float(0x7E) == 448.0f);  // the largest finite scale
    CHECK(e4m3_to_float(0x01) == std::ldexp(1.0f, -9));
  }

  TEST_CASE("bf16 rounding is round-to-nearest-even") {
    auto from_bits = [](unsigned u) { float f; std::memcpy(&f, &u, 4); return f; };
    CHECK(float_to_bf16_bits(1.0f) == 0x3F80);
    CHECK(float_to_bf16_bits(from_bits(0x3F808000)) == 0x3F80);  // tie, even stays
    CHECK(float_to_bf16_bits(from_bits(0x3F818000)) == 0x3F82);  // tie, odd rounds up
    CHECK(float_to_bf16_bits(from_bits(0x3F808001)) == 0x3F81);
    CHECK(float_to_bf16_bits(from_bits(0x7F7FFFFF)) == 0x7F80);  // overflow to Inf
    CHECK(float_to_bf16_bits(-INFINITY) == 0xFF80);
    CHECK(float_to_bf16_bits(NAN) == 0x7FFF);
    CHECK(float_to_bf16_bits(-NAN) == 0x7FFF);
    CHECK(pack_bf16x2(1.0f, -2.0f) == 0xC0003F80u);
    CHECK(pack_fp16x2(1.0f, -2.0f) == 0xC0003C00u);
  }

  TEST_CASE("fp16 rounding matches the compiler's float -> _Float16 on edge and random values") {
    auto check_one = [](float f) {
      const _Float16 h = static_cast<_Float16>(f);
      unsigned short want;
      std::memcpy(&want, &h, 2);
      CAPTURE(f);
      if (std::isnan(f)) CHECK(float_to_fp16_bits(f) == 0x7FFF);
      else CHECK(float_to_fp16_bits(f) == want);
    };
    for (float f : {0.f, -0.f, 1.f, 65504.f, 65519.f, 65520.f, 1e6f, 6.1035156e-05f, 5.9604645e-08f, 2.9802322e-08f,
                    2.9802326e-08f, 8.940697e-08f, 1e-10f, INFINITY, -INFINITY, NAN})
      check_one(f);
    std::mt19937 rng(std::random_device{}());
    for (int i = 0; i < 200000; ++i) {
      // Random mantissas across the half range (normals, subnormals, overflow), a quarter of
      // them exactly halfway between two halves.
      const unsigned mantissa = (i % 4 == 0) ? ((rng() & 0x3FF) << 13) | 0x1000 : (rng() & 0x7FFFFF);
      float f = std::ldexp(1.0f + mantissa / 8388608.0f, int(rng() % 48) - 30);
      if (rng() & 1) f = -f;
      check_one(f);
    }
  }
}
