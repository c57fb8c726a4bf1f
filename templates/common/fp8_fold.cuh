// NVFP4 weights and 16-bit activations as E4M3, for a product on FP8 tensor cores (the W4A8
// mode; its error model is docs/formats.md's "W4A8"):
//   weight row n:    q[n, k] = RN_e4m3(e2m1[n, k] * scale[n, k / 16] * 2^-e[n])
//   activation row m: x^[m, k] = RN_e4m3(x[m, k] * (448 / amax[m]))
//   D[m, n] ~ gB * 2^e[n] * (amax[m] / 448) * sum_k q[n, k] * x^[m, k]
// e[n] is a power of two chosen per weight row so its largest folded value fits E4M3 (448) and
// its small ones stay as far from E4M3's subnormals as that allows. RN: round to nearest even,
// saturating at 448 (what cvt.rn.satfinite.e4m3x2.f32 does); one rounding each, since
// e2m1 * scale * 2^-e is exact in fp32.
#pragma once
#include "common/nvfp4_format.cuh"
#include "common/nvfp4_quantize.cuh"

namespace nvfp4k {

constexpr float E4M3_MAX = 448.0f;

// 2^i as fp32, for i in [-126, 127].
NVFP4_HD float exp2_int(int i) { return bits_to_float(unsigned(i + 127) << 23); }

// The least e with 6 * max_scale <= 448 * 2^e: every folded value of a row whose largest
// decoded block scale is max_scale is then at most 448. 0 for a row of zero scales (or a NaN
// scale: such a block decodes to NaN whatever e is).
NVFP4_HD int fold_exponent(float max_scale) {
  if (!(max_scale > 0.0f)) return 0;
  const float x = 6.0f * max_scale;  // exact: E4M3 values have 4 significant bits, 6 = 1.5 * 4
  int e = int(float_to_bits(x) >> 23) - 127 - 8;  // 448 = 1.75 * 2^8
  if (x > E4M3_MAX * exp2_int(e)) ++e;  // x < 2^(e + 9) <= 448 * 2^(e + 1): one step at most
  return e;
}

// The E4M3 code of e2m1(nibble) * scale * 2^-e (scale a decoded E4M3 block scale, >= 0 or NaN).
NVFP4_HD unsigned char fold_e2m1(unsigned nibble, float scale, int e) {
  const float magnitude = e2m1_to_float(nibble & 7u) * scale * exp2_int(-e);
  return (unsigned char)(float_to_e4m3_satfinite(magnitude) | ((nibble & 8u) << 4));
}

// One block's eight folded magnitudes (nibbles 0..7 without their sign): byte i of `lo` for
// i < 4, byte i - 4 of `hi` otherwise. A nibble's code is its magnitude's byte with bit 7 set
// when the nibble's bit 3 is (E2M1 and E4M3 both keep the sign in the top bit).
struct FoldedBlock {
  unsigned lo, hi;
};

NVFP4_HD FoldedBlock fold_block(float scale, int e) {
  unsigned bytes[2] = {0u, 0u};
  for (unsigned i = 0; i < 8u; ++i) bytes[i / 4u] |= unsigned(fold_e2m1(i, scale, e)) << (8u * (i % 4u));
  return {bytes[0], bytes[1]};
}

// The folded codes of four nibbles (bits 4i..4i+3 of `nibbles`: element i) as four bytes.
NVFP4_HD unsigned fold_lookup4(FoldedBlock block, unsigned nibbles) {
  const unsigned magnitudes = byte_perm_signed(block.lo, block.hi, nibbles & 0x7777u);
  const unsigned signs = ((nibbles & 0x8u) << 4) | ((nibbles & 0x80u) << 8) | ((nibbles & 0x800u) << 12) | ((nibbles & 0x8000u) << 16);
  return magnitudes | signs;
}

// An activation row's scale: amax / 448 for the row's largest finite |x|, 1 for a row of zeros.
NVFP4_HD float activation_scale(float amax) { return amax > 0.0f ? amax / E4M3_MAX : 1.0f; }

// One activation value as E4M3: x * (448 / amax), rounded to nearest even (saturating: the
// fp32 product may pass 448 by an ulp); a NaN or +-Inf becomes E4M3's NaN, so it reaches the
// product instead of a plausible finite value.
NVFP4_HD unsigned char activation_e4m3(float x, float inverse_scale) {
  if (!is_finite(x)) return E4M3_NAN;
  const float v = mul_rn(x, inverse_scale);
  const unsigned sign = float_to_bits(v) >> 31;
  return (unsigned char)(float_to_e4m3_satfinite(sign ? -v : v) | (sign << 7));
}

// The W4A8 kernel's activation column order (fp8_activations.cuh): within every 16 columns,
// byte `position` holds column fp8_activation_column(position), so that the weight's k32
// fragment (sm90/fp8_operand.cuh) meets it: position 4t + i holds column 2t + i % 2 + 8 (i / 2).
NVFP4_HD constexpr int fp8_activation_column(int position) { return 2 * (position / 4) + position % 2 + 8 * (position / 2 % 2); }

}  // namespace nvfp4k
