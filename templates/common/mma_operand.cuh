// NVFP4 weights as 16-bit tensor-core operands: two E2M1 values (one packed byte) times
// their E4M3 block scale, exact, as a BF16x2 or FP16x2 register.
//
// The nibble's bits are moved into place so the 16-bit float reads as e2m1 * 2^-BIAS (the
// E2M1 subnormal 0.5 lands on the 16-bit subnormal), and the scale register carries
// scale * 2^(BIAS - SHIFT). Their product, e2m1 * scale * 2^-SHIFT, is exact (at most 5
// significant bits, well inside the range), and the GEMM epilogue multiplies by 2^SHIFT.
// The split keeps scale * 2^(BIAS - SHIFT) below the 16-bit maximum for every E4M3 scale.
#pragma once
#include "common/params.cuh"
#include "common/portable.cuh"

namespace nvfp4k {

template <int DTYPE>
struct Fp4Operand {
  static_assert(DTYPE == DTYPE_BF16 || DTYPE == DTYPE_FP16, "tensor-core operands are BF16 or FP16");
  // bit of the 16-bit float where the 3 magnitude bits (2 exponent, 1 mantissa) of E2M1 go
  static constexpr int MAG_AT = DTYPE == DTYPE_BF16 ? 6 : 9;
  // the value a placed nibble has: e2m1 * 2^-BIAS
  static constexpr int BIAS = DTYPE == DTYPE_BF16 ? 126 : 14;
  // operands are e2m1 * scale * 2^-SHIFT; the accumulator is multiplied back by 2^SHIFT
  static constexpr int SHIFT = DTYPE == DTYPE_BF16 ? 8 : 7;

  // Byte (low nibble = element 2i, high = 2i+1) in bits 0..7 of `b`, zeros above.
  NVFP4_HD static unsigned place(unsigned b) {
    const unsigned mag = b * ((1u << MAG_AT) | (1u << (MAG_AT + 12)));  // nibble 0 at MAG_AT, nibble 1 at +16
    const unsigned sign = mag << (12 - MAG_AT);                          // sign bits 3, 7 -> 15, 31
    return (mag & ((7u << MAG_AT) | (7u << (MAG_AT + 16)))) | (sign & 0x80008000u);
  }

  // Block scales as 16-bit pairs. E4M3 bits moved into a 16-bit float's exponent and
  // mantissa read as scale * 2^-SCALE_UNIT, subnormal scales included (both formats' subnormals
  // line up); multiplying by 2^(SCALE_UNIT + BIAS - SHIFT) in FIXUPS exact steps gives the factor
  // scale * 2^(BIAS - SHIFT) the placed nibbles need. The sign bit is ignored (scales are
  // magnitudes); the NaN scale 0x7F is not a NaN here, so callers check it with has_nan_scale.
  static constexpr int SCALE_AT = DTYPE == DTYPE_BF16 ? 4 : 7;      // where E4M3 bit 0 lands
  static constexpr int SCALE_UNIT = DTYPE == DTYPE_BF16 ? 120 : 8;  // 16-bit bias - E4M3 bias
  static constexpr int FIXUPS = DTYPE == DTYPE_BF16 ? 2 : 1;        // 2^238 needs two BF16 steps
  static constexpr int FIXUP_EXP = (SCALE_UNIT + BIAS - SHIFT) / FIXUPS;
  static constexpr unsigned FIXUP_BITS =  // 2^FIXUP_EXP in the 16-bit type
      DTYPE == DTYPE_BF16 ? unsigned(127 + FIXUP_EXP) << 7 : unsigned(15 + FIXUP_EXP) << 10;
  static_assert(FIXUPS * FIXUP_EXP == SCALE_UNIT + BIAS - SHIFT);

  // Scale bytes 0 and 2 (odd = false) or 1 and 3 (odd = true) of a word of four, as the lanes
  // of a pair reading scale * 2^-SCALE_UNIT.
  NVFP4_HD static unsigned scale_bits(unsigned word, bool odd) {
    const unsigned x = odd ? word >> (8 - SCALE_AT) : word << SCALE_AT;
    return x & (0x7Fu << SCALE_AT) * 0x10001u;
  }

  // Whether any of a word's four scale bytes is the E4M3 NaN (magnitude 0x7F).
  NVFP4_HD static bool has_nan_scale(unsigned word) {
    const unsigned t = ~word & 0x7F7F7F7Fu;  // a NaN byte is 0 here, every other one is not
    return ((t - 0x01010101u) & 0x80808080u) != 0;
  }

#if defined(__CUDA_ARCH__)
  // scale_bits(word, odd) times the fixup: lanes read scale * 2^(BIAS - SHIFT), exactly.
  __device__ __forceinline__ static unsigned scale_pairs(unsigned word, bool odd) {
    unsigned d = scale_bits(word, odd);
#pragma unroll
    for (int i = 0; i < FIXUPS; ++i) d = mul2(d, FIXUP_BITS * 0x10001u);
    return d;
  }
  // placed pair * lane HALF of `scales` (the operand selector broadcasts it), both lanes exact
  template <int HALF>
  __device__ __forceinline__ static unsigned scaled(unsigned placed, unsigned scales) {
#define NVFP4_SCALED(TYPE, LANES)                                                                     \
  asm("{\n.reg .b16 l, h;\n.reg .b32 s;\nmov.b32 {l, h}, %2;\nmov.b32 s, " LANES ";\nmul.rn." TYPE \
      " %0, %1, s;\n}"                                                                                \
      : "=r"(d)                                                                                       \
      : "r"(placed), "r"(scales))
    unsigned d;
    if constexpr (DTYPE == DTYPE_BF16 && HALF == 0) NVFP4_SCALED("bf16x2", "{l, l}");
    if constexpr (DTYPE == DTYPE_BF16 && HALF == 1) NVFP4_SCALED("bf16x2", "{h, h}");
    if constexpr (DTYPE == DTYPE_FP16 && HALF == 0) NVFP4_SCALED("f16x2", "{l, l}");
    if constexpr (DTYPE == DTYPE_FP16 && HALF == 1) NVFP4_SCALED("f16x2", "{h, h}");
#undef NVFP4_SCALED
    return d;
  }

 private:
  __device__ __forceinline__ static unsigned mul2(unsigned a, unsigned b) {
    unsigned d;
    if constexpr (DTYPE == DTYPE_BF16)
      asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    else
      asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    return d;
  }
#endif
};

}  // namespace nvfp4k
