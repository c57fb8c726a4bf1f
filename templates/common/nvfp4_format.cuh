// NVFP4 element formats: E2M1 values, E4M3 block scales, and the rounding of fp32 results
// to BF16 / FP16: round to nearest even, overflow to Inf, NaN to the canonical 0x7FFF (what
// the hardware conversions give). Device code uses those instructions, host code the same
// arithmetic in software.
#pragma once
#include "common/portable.cuh"

namespace nvfp4k {

// E2M1 nibble: sign in bit 3, magnitude index in bits 0..2 -> {0, .5, 1, 1.5, 2, 3, 4, 6}.
NVFP4_HD float e2m1_to_float(unsigned nibble) {
#if defined(__CUDA_ARCH__)
  // The magnitude bits e1 e0 m placed at fp32 bits 24..22 read as 2^(e-127) * (1 + m/2)
  // (or m/2 * 2^-126 when e = 0): times 2^126 that is the E2M1 value, exactly. Needs
  // denormals kept (no --ftz), which nvrtc_options guarantees.
  return bits_to_float(((nibble & 7u) << 22) | ((nibble & 8u) << 28)) * 0x1p126f;
#else
  // The doubled magnitudes {0,1,2,3,4,6,8,12} sit one per nibble of this constant (no
  // denormals involved, so a host with flush-to-zero still decodes right).
  const float mag = float((0xC8643210u >> ((nibble & 7u) * 4u)) & 15u) * 0.5f;
  return (nibble & 8u) ? -mag : mag;
#endif
}

// E4M3 (the "fn" variant: no infinities, S.1111.111 is NaN), bias 7, subnormals m * 2^-9.
NVFP4_HD float e4m3_to_float(unsigned byte) {
  const unsigned e = (byte >> 3) & 15u, m = byte & 7u;
  if (e == 15u && m == 7u) return bits_to_float(0x7FC00000u | ((byte & 0x80u) << 24));
  const float mag = e == 0u ? float(m) * 0.001953125f : bits_to_float(((e + 120u) << 23) | (m << 20));
  return (byte & 0x80u) ? -mag : mag;
}

NVFP4_HD unsigned short float_to_bf16_bits(float f) {
#if defined(__CUDA_ARCH__)
  unsigned short h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
#else
  unsigned u = float_to_bits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FFFu;  // NaN: the canonical NaN cvt.rn.bf16.f32 gives
  u += 0x7FFFu + ((u >> 16) & 1u);
  return (unsigned short)(u >> 16);
#endif
}

// Two values rounded and packed: `lo` in bits 0..15, `hi` in bits 16..31.
NVFP4_HD unsigned pack_bf16x2(float lo, float hi) {
#if defined(__CUDA_ARCH__)
  unsigned d;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
  return d;
#else
  return float_to_bf16_bits(lo) | (unsigned(float_to_bf16_bits(hi)) << 16);
#endif
}

NVFP4_HD unsigned short float_to_fp16_bits(float f) {
#if defined(__CUDA_ARCH__)
  unsigned short h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
#else
  unsigned u = float_to_bits(f);
  const unsigned sign = (u >> 16) & 0x8000u;
  u &= 0x7FFFFFFFu;
  if (u > 0x7F800000u) return 0x7FFFu;  // NaN: the canonical NaN cvt.rn.f16.f32 gives
  if (u >= 0x477FF000u) return (unsigned short)(sign | 0x7C00u);  // >= 65520 rounds to Inf
  if (u >= 0x38800000u) {                                          // normal: >= 2^-14
    unsigned r = u - 0x38000000u;
    r += 0xFFFu + ((r >> 13) & 1u);
    return (unsigned short)(sign | (r >> 13));
  }
  if (u <= 0x33000000u) return (unsigned short)sign;  // <= 2^-25 rounds to zero
  const unsigned e = u >> 23, m = (u & 0x7FFFFFu) | 0x800000u;
  const unsigned shift = 126u - e, q = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
  return (unsigned short)(sign | (q + ((rem > half || (rem == half && (q & 1u))) ? 1u : 0u)));
#endif
}

// BF16 / FP16 bits widened to fp32 (exact).
NVFP4_HD float bf16_bits_to_float(unsigned h) { return bits_to_float((h & 0xFFFFu) << 16); }

NVFP4_HD float fp16_bits_to_float(unsigned h) {
#if defined(__CUDA_ARCH__)
  float f;
  asm("{ .reg .b16 t; cvt.u16.u32 t, %1; cvt.f32.f16 %0, t; }" : "=f"(f) : "r"(h));
  return f;
#else
  const unsigned sign = (h & 0x8000u) << 16, e = (h >> 10) & 31u, m = h & 0x3FFu;
  if (e == 31u) return bits_to_float(sign | 0x7F800000u | (m << 13));               // Inf / NaN
  if (e == 0u) return (h & 0x8000u) ? -float(m) * 5.9604645e-08f : float(m) * 5.9604645e-08f;  // m * 2^-24
  return bits_to_float(sign | ((e + 112u) << 23) | (m << 13));
#endif
}

NVFP4_HD unsigned pack_fp16x2(float lo, float hi) {
#if defined(__CUDA_ARCH__)
  unsigned d;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
  return d;
#else
  return float_to_fp16_bits(lo) | (unsigned(float_to_fp16_bits(hi)) << 16);
#endif
}

}  // namespace nvfp4k

