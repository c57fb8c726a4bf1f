// Quantizing 16 values to NVFP4 (docs/formats.md), compiled into the kernels and into
// the CPU reference, so both produce the same bits by construction:
//   scale = e4m3_rne_satfinite(amax / 6 / gscale)
//   q[i]  = e2m1_rne_satfinite(x[i] / (decode(scale) * gscale))
// Decisions: a scale that decodes to 0 stores zero nibbles; a block holding NaN or +-Inf
// gets the NaN scale 0x7F (it dequantizes to NaN) and zero nibbles; a computed global
// scale is amax / (6 * 448) over the finite values, and 1 when that amax is 0.
#pragma once
#include "common/nvfp4_format.cuh"
#include "common/params.cuh"

namespace nvfp4k {

constexpr unsigned char E4M3_NAN = 0x7F;

NVFP4_HD bool is_finite(float f) { return (float_to_bits(f) & 0x7F800000u) != 0x7F800000u; }

// Round to nearest even into E4M3, saturating to 448, for s >= 0 or NaN; `decoded` gets the
// code's value (NaN for the NaN code). Branch-free: below 2^-6 the steps are 2^-9, which adding
// 2^14 rounds to (its code is the sum's low bits); above, the mantissa is rounded to 3 bits
// in place, and saturation is a minimum of both.
NVFP4_HD unsigned char e4m3_round_satfinite_definition(float s, float& decoded) {
  const float t = add_rn(s, 16384.0f);
  const unsigned sub_code = float_to_bits(t) - 0x46800000u;  // 0..8 (8 is 2^-6, the first normal)
  const float sub_value = add_rn(t, -16384.0f);              // exact
  const unsigned u = (float_to_bits(s) + 0x7FFFFu + ((float_to_bits(s) >> 20) & 1u)) & 0xFFF00000u;
  const unsigned norm_code = (u >> 20) - 0x3C0u;  // (exponent - 120) << 3 | mantissa
  const float norm_value = bits_to_float(u);
  const bool sub = s < 0.015625f;
  decoded = sub ? sub_value : norm_value < 448.0f ? norm_value : 448.0f;
  const unsigned code = sub ? sub_code : norm_code < 0x7Eu ? norm_code : 0x7Eu;
  if (!(s == s)) {
    decoded = s;
    return E4M3_NAN;
  }
  return (unsigned char)code;
}

// The same by the GPU's conversion (PTX ISA: cvt.rn.satfinite.e4m3x2.f32 rounds to nearest
// even, takes finite values past 448 to 448 and NaN to NaN, the second source to the low byte)
// and its exact widening back through FP16: 4 instructions instead of 14.
// tests/gpu/test_gpu_format.cpp holds the two equal on every s >= 0 and NaN.
NVFP4_HD unsigned char e4m3_round_satfinite(float s, float& decoded) {
#if defined(__CUDA_ARCH__)
  unsigned short pair;
  unsigned halves;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(pair) : "f"(0.0f), "f"(s));
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(halves) : "h"(pair));
  decoded = fp16_bits_to_float(halves & 0xFFFFu);
  return (unsigned char)(pair & 0xFFu);
#else
  return e4m3_round_satfinite_definition(s, decoded);
#endif
}

NVFP4_HD unsigned char float_to_e4m3_satfinite(float s) {
  float decoded;
  return e4m3_round_satfinite(s, decoded);
}

// Round to nearest even onto {0, .5, 1, 1.5, 2, 3, 4, 6}, saturating; sign kept.
// Adding 2^22, 2^23 or 2^24 leaves the sum a spacing of 0.5, 1 or 2 (the E2M1 grid's
// spacing below 2, below 4, and above), so the hardware's own round-to-nearest-even does the
// rounding; subtracting it back is exact. The code then comes from the result's bits.
NVFP4_HD unsigned float_to_e2m1_satfinite(float v) {
  const float a = v < 0.0f ? -v : v;
  const float magic = a < 2.0f ? 4194304.0f : a < 4.0f ? 8388608.0f : 16777216.0f;
  const float r = (a + magic) - magic;  // a >= 7 rounds to 8 or more: saturated below
  const unsigned bits = float_to_bits(r);
  unsigned code = r >= 1.0f ? (bits >> 22) - 252u : (r == 0.5f ? 1u : 0u);  // 1 -> 2, 1.5 -> 3, 2 -> 4, ...
  code = code > 7u ? 7u : code;
  return code | ((float_to_bits(v) >> 28) & 8u);
}

// x / d rounded to nearest even for x >= 0, given rd = RN(1/d) for a d in [2^-100, 2^100],
// with one reciprocal per block instead of a division per value. The first FMA correction
// brings x * rd within one ulp of x / d; the second (Markstein's theorem) makes it the
// correctly rounded quotient, the same bits as IEEE division (+0 for x = +0). When x has at
// most 11 significant bits (a BF16 or FP16 value: NARROW) the first is already correctly
// rounded: an exhaustive run over every such significand and every fp32 significand of d
// found no exception (tests/test_quantize.cpp holds it, skipped by default, and samples it).
template <bool NARROW = false, class Fma>
NVFP4_HD float divide_rn_nonneg_with(float x, float d, float rd, Fma fma) {
  float q = x * rd;
  q = fma(fma(-q, d, x), rd, q);
  if (!NARROW) q = fma(fma(-q, d, x), rd, q);
  return q;
}

template <bool NARROW = false>
NVFP4_HD float divide_rn_nonneg(float x, float d, float rd) {
#if defined(__CUDA_ARCH__)
  return divide_rn_nonneg_with<NARROW>(x, d, rd, [](float a, float b, float c) { return __fmaf_rn(a, b, c); });
#else
  (void)rd;
  return x / d;
#endif
}

// The least of three unsigned values (one DPX instruction on sm_90).
NVFP4_HD unsigned umin3(unsigned a, unsigned b, unsigned c) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  return __vimin3_u32(a, b, c);
#else
  const unsigned m = a < b ? a : b;
  return m < c ? m : c;
#endif
}

// The E2M1 magnitude code of q >= 0 (or +Inf), as the bits of the float 2^23 + code. The
// grid's spacing is 0.5 below 2, 1 up to 4 and 2 above, so the code is RNE(2q), RNE(q) + 2 or
// RNE(q/2) + 4, each one rounding of an exact 2q + 2^23, q + 2^23 + 2 or q/2 + 2^23 + 4 to an
// integer, ties to even. The three are the pieces of a concave function, so the code is their
// least, saturated at 7; positive floats order as their bits, so the least is two integer
// minimums: five instructions instead of a dozen compares and selects.
NVFP4_HD unsigned e2m1_code_plus_2p23(float q) {
  const float t1 = fma_rn(q, 2.0f, 8388608.0f), t2 = add_rn(q, 8388610.0f), t3 = fma_rn(q, 0.5f, 8388612.0f);
  const unsigned m = umin3(float_to_bits(t1), float_to_bits(t2), float_to_bits(t3));
  return m < 0x4B000007u ? m : 0x4B000007u;
}

// (acc << 4) | (v >> 28): shifts the top nibble of v (its sign and three exponent bits) in.
NVFP4_HD unsigned shift_in_top_nibble(unsigned acc, unsigned v) {
#if defined(__CUDA_ARCH__)
  return __funnelshift_l(v, acc, 4);
#else
  return (acc << 4) | (v >> 28);
#endif
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

// PTX prmt: byte i of the result is byte (sel >> 4i) & 7 of {b, a} (a's bytes first), all
// ones or zeros by its top bit when (sel >> 4i) & 8.
NVFP4_HD unsigned byte_perm_signed(unsigned a, unsigned b, unsigned sel) {
#if defined(__CUDA_ARCH__)
  unsigned d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
  return d;
#else
  const unsigned long long both = (static_cast<unsigned long long>(b) << 32) | a;
  unsigned d = 0;
  for (int i = 0; i < 4; ++i) {
    const unsigned n = (sel >> (4 * i)) & 15u;
    unsigned byte = unsigned(both >> (8 * (n & 7u))) & 0xFFu;
    if (n & 8u) byte = (byte & 0x80u) ? 0xFFu : 0u;
    d |= byte << (8 * i);
  }
  return d;
#endif
}

// The largest of three per 16-bit half (one DPX instruction on sm_90).
NVFP4_HD unsigned umax3_u16x2(unsigned a, unsigned b, unsigned c) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  return __vimax3_u16x2(a, b, c);
#else
  unsigned d = 0;
  for (int s = 0; s < 32; s += 16) {
    unsigned m = (a >> s) & 0xFFFFu;
    m = ((b >> s) & 0xFFFFu) > m ? (b >> s) & 0xFFFFu : m;
    m = ((c >> s) & 0xFFFFu) > m ? (c >> s) & 0xFFFFu : m;
    d |= m << s;
  }
  return d;
#endif
}

// The sign of each of 8 16-bit values (word j holds values 2j and 2j + 1) at bit 3 of its
// nibble, what pack_magnitudes expects: two sign-replicating byte permutes take the words'
// top bytes, two more sort them into even and odd values, one LOP3 interleaves the two.
// Five instructions per 8 values, against two per value shifting each sign in.
NVFP4_HD unsigned sign_nibbles(unsigned w0, unsigned w1, unsigned w2, unsigned w3) {
  const unsigned a = byte_perm_signed(w0, w1, 0xFBD9u);  // signs of values 0, 2, 1, 3 as bytes
  const unsigned c = byte_perm_signed(w2, w3, 0xFBD9u);  // 4, 6, 5, 7
  const unsigned even = byte_perm_signed(a, c, 0x5410u), odd = byte_perm_signed(a, c, 0x7632u);
#if defined(__CUDA_ARCH__)
  unsigned d;  // (even & mask) | (odd & ~mask) as one LOP3 (ptxas makes two of the C++)
  asm("lop3.b32 %0, %1, %2, %3, 0xE2;" : "=r"(d) : "r"(even), "r"(0x0F0F0F0Fu), "r"(odd));
  return d;
#else
  return (even & 0x0F0F0F0Fu) | (odd & 0xF0F0F0F0u);
#endif
}

// Whether the E2M1 codes come from the hardware's conversion (sm_100a and later:
// cvt.rn.satfinite.e2m1x2.f32) rather than from e2m1_code_plus_2p23. A test defines it on the
// H100 to run that path with the conversion's definition in its place (e2m1x8_satfinite).
#ifndef NVFP4_E2M1_BY_PAIRS
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
#define NVFP4_E2M1_BY_PAIRS 1
#else
#define NVFP4_E2M1_BY_PAIRS 0
#endif
#endif

// The E2M1 codes of eight quotients >= 0 as one word, q[i] in nibble i, as four
// cvt.rn.satfinite.e2m1x2.f32 compute them (PTX ISA: round to nearest even, finite values past
// 6 to 6, the first source in the upper nibble of its byte): the instructions where the GPU
// has them (ptxas chains the four into the word), else their definition.
NVFP4_HD unsigned e2m1x8_satfinite(const float (&q)[8]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
  unsigned d;
  asm("{\n .reg .b8 b0, b1, b2, b3;\n"
      " cvt.rn.satfinite.e2m1x2.f32 b0, %2, %1;\n cvt.rn.satfinite.e2m1x2.f32 b1, %4, %3;\n"
      " cvt.rn.satfinite.e2m1x2.f32 b2, %6, %5;\n cvt.rn.satfinite.e2m1x2.f32 b3, %8, %7;\n"
      " mov.b32 %0, {b0, b1, b2, b3};\n}"
      : "=r"(d)
      : "f"(q[0]), "f"(q[1]), "f"(q[2]), "f"(q[3]), "f"(q[4]), "f"(q[5]), "f"(q[6]), "f"(q[7]));
  return d;
#else
  unsigned d = 0;
  for (int i = 0; i < 8; ++i) d |= float_to_e2m1_satfinite(q[i]) << (4 * i);
  return d;
#endif
}

// The nibbles of magnitudes a[8 PACKED] / d as PACKED words of 8 (d > 0, rd = RN(1/d) when
// FAST) with the signs in `signs` (bit 3 of nibble i, one word per 8 values). By the hardware's
// conversion, a word's eight at once; else, from the last value to the first, the codes' bits
// (2^23 + code) are accumulated as acc * 16 + bits, whose 2^23 parts sum to a constant taken
// off once (modulo 2^32): one instruction per value for the packing.
template <bool FAST, bool NARROW, int PACKED>
NVFP4_HD void pack_magnitudes(const float (&a)[8 * PACKED], const unsigned (&signs)[PACKED], float d, float rd,
                              unsigned (&packed)[PACKED]) {
  auto quotient = [&](int i) { return FAST ? divide_rn_nonneg<NARROW>(a[i], d, rd) : a[i] / d; };
  for (int w = 0; w < PACKED; ++w) {
#if NVFP4_E2M1_BY_PAIRS
    float q[8];
    for (int i = 0; i < 8; ++i) q[i] = quotient(8 * w + i);
    packed[w] = e2m1x8_satfinite(q) | (signs[w] & 0x88888888u);
#else
    constexpr unsigned kOffset = 0x4B000000u + (0x4B000000u << 4);  // 0x4B000000 * 0x11111111 mod 2^32
    unsigned codes = 0u;
    for (int i = 7; i >= 0; --i) codes = codes * 16u + e2m1_code_plus_2p23(quotient(8 * w + i));
    packed[w] = (codes - kOffset) | (signs[w] & 0x88888888u);
#endif
  }
}

// Whether the reciprocal path divides a block by d: d in [2^-100, 2^100], and where the codes
// come from the conversion instruction (by_pairs), no quotient of the block's largest magnitude
// past 2^126. An overflowing quotient is NaN on that path: the least-of-three codes saturate it
// (code 7, as the IEEE quotient's Inf gets), but what the conversion makes of a NaN is not the
// PTX ISA's word, so those blocks take IEEE division there.
NVFP4_HD bool reciprocal_divides(float amax, float d, bool by_pairs = NVFP4_E2M1_BY_PAIRS) {
  return d >= 0x1p-100f && d <= 0x1p100f && (!by_pairs || amax < 0x1p126f * d);
}

// How a block quantizer divides. A block with an extreme amax, global scale or d needs IEEE
// division, the rest take reciprocals and FMA corrections (the same bits): DIVIDE_EITHER picks
// per block behind a branch. DIVIDE_RECIPROCAL takes reciprocals for every block, for a global
// scale whose blocks all may (GlobalScale::reciprocal_suffices): a kernel branches once on
// that around all its blocks, so that its hot path holds no copy of the rare path's code (two
// more divisions and a second copy of the quotients and codes) before its stores.
constexpr int DIVIDE_EITHER = 0, DIVIDE_RECIPROCAL = 1;

// A global scale and its reciprocal, made once for all the blocks a thread quantizes with it.
struct GlobalScale {
  float value, reciprocal;
  NVFP4_HD explicit GlobalScale(float g) : value(g), reciprocal(rcp_rn(g)) {}
  // Whether every block quantized with this global scale takes the reciprocal path by
  // DIVIDE_EITHER, or gets the same bits on it: for g in [2^-70, 2^90] every nonzero d lies in
  // [2^-79, 2^99], and the scale's quotients are exact from amax = 2^-90 up; below, both paths
  // give a quotient far under 2^-10, the scale 0 (tests/test_quantize.cpp). Not where the
  // conversion instruction makes the codes: a block's d there must also exceed amax / 2^126.
  NVFP4_HD bool reciprocal_suffices() const { return suffices(value); }
  NVFP4_HD static bool suffices(float g) { return !NVFP4_E2M1_BY_PAIRS && g >= 0x1p-70f && g <= 0x1p90f; }
};

// A block's scale and nibbles from its magnitudes a (16 of them, or the 8 of half a block: PACKED
// words of 8 nibbles), the block's largest (finite) `amax` and the values' signs; NARROW as for
// divide_rn_nonneg.
// A block's E4M3 scale from its largest (finite) magnitude `amax`, and in `d` the divisor its
// values are divided by, decode(scale) * gscale (0: the block's nibbles are all zero).
template <bool NARROW, int DIVISION>
NVFP4_HD unsigned char block_scale(float amax, GlobalScale g, float& d) {
  const float gscale = g.value;
  // (amax / 6) / gscale, both divisions correctly rounded: by reciprocals and FMA corrections
  // unless amax or gscale is extreme (the scale needs exact quotients from 2^-10 up, where
  // the corrections' remainders stay exact), else IEEE division. Quotients past 2^100 (an
  // overflow is NaN on the FMA path) all saturate the scale, so they are clamped first.
  const bool fast_scale = amax >= 0x1p-90f && gscale >= 0x1p-90f && gscale <= 0x1p90f;
  const float q = DIVISION == DIVIDE_RECIPROCAL || fast_scale
                      ? divide_rn_nonneg(divide_rn_nonneg<NARROW>(amax, 6.0f, 0x1.555556p-3f), gscale, g.reciprocal)
                      : div_rn(div_rn(amax, 6.0f), gscale);
  float decoded;
  const unsigned char scale = e4m3_round_satfinite(q < 0x1p100f ? q : 0x1p100f, decoded);
  d = mul_rn(decoded, gscale);
  return scale;
}

// Whether a block of largest magnitude amax and divisor d > 0 divides by reciprocals: unless d is
// extreme (or, for the conversion instruction's codes, a quotient could overflow).
NVFP4_HD bool block_divides_by_reciprocal(float amax, float d) {
#if NVFP4_E2M1_BY_PAIRS
  return reciprocal_divides(amax, d);
#else
  (void)amax;
  return d >= 0x1p-100f && d <= 0x1p100f;
#endif
}

// One value's nibble (its E2M1 code, the sign in bit 3) in a block of largest magnitude amax and
// divisor d > 0 (block_scale), rd = RN(1 / d): the nibble quantize_magnitudes makes of it, for
// a quantizer whose threads hold one value of a block each (a GEMM epilogue's accumulators).
// Both paths' quotients are the correctly rounded one, and the E2M1 code is its rounding to
// nearest even, saturated, as the conversion instruction's too.
template <int DIVISION>
NVFP4_HD unsigned quantize_value(float x, float amax, float d, float rd) {
  const float a = bits_to_float(float_to_bits(x) & 0x7FFFFFFFu);
  const float q = DIVISION == DIVIDE_RECIPROCAL || block_divides_by_reciprocal(amax, d) ? divide_rn_nonneg(a, d, rd) : div_rn(a, d);
  return (e2m1_code_plus_2p23(q) - 0x4B000000u) | ((float_to_bits(x) >> 28) & 8u);
}

template <bool NARROW, int PACKED, int DIVISION>
NVFP4_HD unsigned char quantize_magnitudes(const float (&a)[8 * PACKED], float amax, const unsigned (&signs)[PACKED],
                                           GlobalScale g, unsigned (&packed)[PACKED]) {
  for (int w = 0; w < PACKED; ++w) packed[w] = 0u;
  float d;
  const unsigned char scale = block_scale<NARROW, DIVISION>(amax, g, d);
  if (d == 0.0f) return scale;
  // block_divides_by_reciprocal, one uniform branch per block, not one per value. The range is
  // written out for the least-of-three codes: through the function ptxas lays the branch out the
  // other way round, which was not measured.
#if NVFP4_E2M1_BY_PAIRS
  const bool reciprocal = reciprocal_divides(amax, d);
#else
  const bool reciprocal = d >= 0x1p-100f && d <= 0x1p100f;
#endif
  if (DIVISION == DIVIDE_RECIPROCAL || reciprocal) pack_magnitudes<true, NARROW, PACKED>(a, signs, d, rcp_rn(d), packed);
  else pack_magnitudes<false, NARROW, PACKED>(a, signs, d, 0.0f, packed);
  return scale;
}

// A block's scale from the bits of its largest magnitude (|x| as bits: their integer order is
// the float order, and NaN / Inf sit at 0x7F800000 and up), and the nibbles of PACKED words of
// its values: all 16 (PACKED 2), or the 8 of half a block (PACKED 1: threads that share a block
// and meet its largest magnitude by shuffle).
template <int DIVISION, int PACKED>
NVFP4_HD unsigned char quantize_fp32_words(const float (&x)[8 * PACKED], unsigned amax_bits, GlobalScale g,
                                           unsigned (&packed)[PACKED]) {
  if (amax_bits >= 0x7F800000u) {
    for (int w = 0; w < PACKED; ++w) packed[w] = 0u;
    return E4M3_NAN;
  }
  float a[8 * PACKED];
  for (int i = 0; i < 8 * PACKED; ++i) a[i] = bits_to_float(float_to_bits(x[i]) & 0x7FFFFFFFu);
  // each value's top nibble shifted in, from the last to the first: its sign lands on bit 3
  unsigned signs[PACKED];
  for (int w = 0; w < PACKED; ++w) {
    signs[w] = 0u;
    for (int i = 7; i >= 0; --i) signs[w] = shift_in_top_nibble(signs[w], float_to_bits(x[8 * w + i]));
  }
  return quantize_magnitudes<false, PACKED, DIVISION>(a, bits_to_float(amax_bits), signs, g, packed);
}

// Quantizes one block of 16; packed[0] holds elements 0..7 (element 0 in the low nibble).
template <int DIVISION = DIVIDE_EITHER>
NVFP4_HD unsigned char quantize_block16(const float (&x)[16], GlobalScale g, unsigned (&packed)[2]) {
  unsigned amax_bits = 0;
  for (int i = 0; i < 16; ++i) {
    const unsigned b = float_to_bits(x[i]) & 0x7FFFFFFFu;
    amax_bits = b > amax_bits ? b : amax_bits;
  }
  return quantize_fp32_words<DIVISION, 2>(x, amax_bits, g, packed);
}

// The bits of +Inf in a 16-bit dtype (magnitudes at or above them are Inf or NaN), and a
// magnitude's bits as a float.
template <int DTYPE>
NVFP4_HD constexpr unsigned inf_bits_16() { return DTYPE == DTYPE_BF16 ? 0x7F80u : 0x7C00u; }
template <int DTYPE>
NVFP4_HD float widen_16(unsigned h) { return DTYPE == DTYPE_BF16 ? bits_to_float(h << 16) : fp16_bits_to_float(h); }

// The 16-bit values of WORDS words without their signs (as bits, their order kept).
template <int WORDS>
NVFP4_HD void magnitudes_16bit(const unsigned (&w)[WORDS], unsigned (&m)[WORDS]) {
  for (int i = 0; i < WORDS; ++i) m[i] = w[i] & 0x7FFF7FFFu;
}

// The largest magnitude among the 16-bit values of WORDS words (4 or 8) as its bits, from
// three-way 16-bit maximums; m[i] is w[i] without its signs.
template <int WORDS>
NVFP4_HD unsigned amax_16bit(const unsigned (&m)[WORDS]) {
  static_assert(WORDS == 4 || WORDS == 8, "a block or half of one");
  unsigned m2;
  if constexpr (WORDS == 8)
    m2 = umax3_u16x2(umax3_u16x2(m[0], m[1], m[2]), umax3_u16x2(m[3], m[4], m[5]), umax3_u16x2(m[6], m[7], 0u));
  else
    m2 = umax3_u16x2(umax3_u16x2(m[0], m[1], m[2]), m[3], 0u);
  return (m2 & 0xFFFFu) > (m2 >> 16) ? m2 & 0xFFFFu : m2 >> 16;
}

// A block's scale, from the 16-bit bits amax16 of its largest magnitude, and the nibbles of WORDS
// words of its values w (m: w without signs): all 8 words of a block, or the 4 of half of one.
template <int DTYPE, int WORDS, int DIVISION>
NVFP4_HD unsigned char quantize_16bit_words(const unsigned (&w)[WORDS], const unsigned (&m)[WORDS], unsigned amax16,
                                            GlobalScale g, unsigned (&packed)[WORDS / 4]) {
  static_assert(DTYPE == DTYPE_BF16 || DTYPE == DTYPE_FP16, "16-bit inputs");
  if (amax16 >= inf_bits_16<DTYPE>()) {  // Inf or NaN
    for (int i = 0; i < WORDS / 4; ++i) packed[i] = 0u;
    return E4M3_NAN;
  }
  float a[2 * WORDS];
  for (int i = 0; i < WORDS; ++i) {
    a[2 * i] = DTYPE == DTYPE_BF16 ? bits_to_float(m[i] << 16) : fp16_bits_to_float(m[i] & 0xFFFFu);
    a[2 * i + 1] = DTYPE == DTYPE_BF16 ? bits_to_float(m[i] & 0xFFFF0000u) : fp16_bits_to_float(m[i] >> 16);
  }
  unsigned signs[WORDS / 4];
  for (int i = 0; i < WORDS / 4; ++i) signs[i] = sign_nibbles(w[4 * i], w[4 * i + 1], w[4 * i + 2], w[4 * i + 3]);
  const float amax = widen_16<DTYPE>(amax16);
  return quantize_magnitudes<true, WORDS / 4, DIVISION>(a, amax, signs, g, packed);
}

// The same for 16 BF16 or FP16 values as loaded, two per word (element 2j in word j's low
// half): the largest magnitude from three-way 16-bit maximums, the signs by byte permutes, and
// one FMA correction per quotient. The same bits as quantize_block16 on the widened values.
template <int DTYPE, int DIVISION = DIVIDE_EITHER>
NVFP4_HD unsigned char quantize_block16_16bit(const unsigned (&w)[8], GlobalScale g, unsigned (&packed)[2]) {
  unsigned m[8];
  magnitudes_16bit(w, m);
  return quantize_16bit_words<DTYPE, 8, DIVISION>(w, m, amax_16bit(m), g, packed);
}

#if defined(__CUDA_ARCH__)
// quantize_block16_16bit of a block two lanes hold, values 0..7 in the even lane's w and 8..15
// in its partner's (lane ^ 1): the block's largest magnitude by one shuffle, so both make its
// scale (returned to both) and each its own half's nibbles. Every lane of the warp calls it.
template <int DTYPE, int DIVISION = DIVIDE_EITHER>
__device__ __forceinline__ unsigned char quantize_half_block16_16bit(const unsigned (&w)[4], GlobalScale g, unsigned& packed) {
  unsigned m[4];
  magnitudes_16bit(w, m);
  const unsigned own = amax_16bit(m), other = __shfl_xor_sync(0xFFFFFFFFu, own, 1);
  unsigned word[1];
  const unsigned char scale = quantize_16bit_words<DTYPE, 4, DIVISION>(w, m, own > other ? own : other, g, word);
  packed = word[0];
  return scale;
}
#endif

NVFP4_HD unsigned char quantize_block16(const float (&x)[16], float gscale, unsigned (&packed)[2]) {
  return quantize_block16(x, GlobalScale(gscale), packed);
}
template <int DTYPE>
NVFP4_HD unsigned char quantize_block16_16bit(const unsigned (&w)[8], float gscale, unsigned (&packed)[2]) {
  return quantize_block16_16bit<DTYPE>(w, GlobalScale(gscale), packed);
}

}  // namespace nvfp4k
