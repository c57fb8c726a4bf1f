// Quantizing 16 values to NVFP4 (DESIGN.md section 2), compiled into the kernels and into
// the CPU reference, so both produce the same bits by construction:
//   scale = e4m3_rne_satfinite(amax / 6 / gscale)
//   q[i]  = e2m1_rne_satfinite(x[i] / (decode(scale) * gscale))
// Decisions: a scale that decodes to 0 stores zero nibbles; a block holding NaN or +-Inf
// gets the NaN scale 0x7F (it dequantizes to NaN) and zero nibbles; a computed global
// scale is amax / (6 * 448) over the finite values, and 1 when that amax is 0.
#pragma once
#include "common/nvfp4_format.cuh"

namespace nvfp4k {

constexpr unsigned char E4M3_NAN = 0x7F;

NVFP4_HD bool is_finite(float f) { return (float_to_bits(f) & 0x7F800000u) != 0x7F800000u; }

// Round to nearest even into E4M3, saturating to 448; for s >= 0 or NaN.
NVFP4_HD unsigned char float_to_e4m3_satfinite(float s) {
  if (!(s == s)) return E4M3_NAN;
  if (s >= 448.0f) return 0x7E;
  if (s < 0.015625f) {  // below 2^-6: subnormal steps of 2^-9, exact after scaling
    const float q = s * 512.0f;
    unsigned n = (unsigned)q;
    const float frac = q - (float)n;
    n += (frac > 0.5f || (frac == 0.5f && (n & 1u))) ? 1u : 0u;
    return (unsigned char)n;  // 8 is 2^-6, the first normal: the same code
  }
  unsigned u = float_to_bits(s);
  u += 0x7FFFFu + ((u >> 20) & 1u);  // round the 23-bit mantissa to 3 bits, ties to even
  const unsigned code = ((u >> 23) - 120u) << 3 | ((u >> 20) & 7u);
  return (unsigned char)(code > 0x7Eu ? 0x7Eu : code);
}

// Round to nearest even onto {0, .5, 1, 1.5, 2, 3, 4, 6}, saturating; sign kept.
NVFP4_HD unsigned float_to_e2m1_satfinite(float v) {
  const float a = v < 0.0f ? -v : v;
  const unsigned code = (a > 0.25f) + (a >= 0.75f) + (a > 1.25f) + (a >= 1.75f) + (a > 2.5f) + (a >= 3.5f) + (a > 5.0f);
  return code | ((float_to_bits(v) >> 28) & 8u);
}

NVFP4_HD float global_scale_from_amax(float amax) { return amax > 0.0f ? amax / 2688.0f : 1.0f; }

// The largest finite |x| of n values (0 if none).
template <int N>
NVFP4_HD float finite_amax(const float (&x)[N]) {
  float m = 0.0f;
  for (int i = 0; i < N; ++i) {
    const float a = x[i] < 0.0f ? -x[i] : x[i];
    if (is_finite(x[i]) && a > m) m = a;
  }
  return m;
}

// Quantizes one block of 16; packed[0] holds elements 0..7 (element 0 in the low nibble).
NVFP4_HD unsigned char quantize_block16(const float (&x)[16], float gscale, unsigned (&packed)[2]) {
  float amax = 0.0f;
  bool finite = true;
  for (int i = 0; i < 16; ++i) {
    const float a = x[i] < 0.0f ? -x[i] : x[i];
    finite = finite && is_finite(x[i]);
    amax = a > amax ? a : amax;
  }
  packed[0] = packed[1] = 0u;
  if (!finite) return E4M3_NAN;
  const unsigned char scale = float_to_e4m3_satfinite(amax / 6.0f / gscale);
  const float denom = e4m3_to_float(scale) * gscale;
  if (denom == 0.0f) return scale;
  for (int i = 0; i < 16; ++i) packed[i / 8] |= float_to_e2m1_satfinite(x[i] / denom) << ((i % 8) * 4);
  return scale;
}

}  // namespace nvfp4k
