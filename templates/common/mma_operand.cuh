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

  NVFP4_HD static float scale_factor_float(unsigned scale_byte) {
    // E4M3 bits in FP32 position read as scale * 2^-120 (subnormal scales included).
    const float s = bits_to_float((scale_byte & 0x7Fu) << 20);
    if ((scale_byte & 0x7Fu) == 0x7Fu) return bits_to_float(0x7FC00000u);  // the NaN scale
    // * 2^(120 + BIAS - SHIFT) in two exact steps (the total is beyond FP32 for BF16)
    constexpr int TOTAL = 120 + BIAS - SHIFT, FIRST = TOTAL / 2;
    return s * bits_to_float(unsigned(127 + FIRST) << 23) * bits_to_float(unsigned(127 + TOTAL - FIRST) << 23);
  }

#if defined(__CUDA_ARCH__)
  // The scale factor in both halves of a 16-bit pair.
  __device__ __forceinline__ static unsigned scale_pair(unsigned scale_byte) {
    const float f = scale_factor_float(scale_byte);
    unsigned d;
    if constexpr (DTYPE == DTYPE_BF16)
      asm("cvt.rn.bf16x2.f32 %0, %1, %1;" : "=r"(d) : "f"(f));
    else
      asm("cvt.rn.f16x2.f32 %0, %1, %1;" : "=r"(d) : "f"(f));
    return d;
  }
  // placed pair * scale pair, both lanes exact
  __device__ __forceinline__ static unsigned scaled(unsigned placed, unsigned scale) {
    unsigned d;
    if constexpr (DTYPE == DTYPE_BF16)
      asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(placed), "r"(scale));
    else
      asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(d) : "r"(placed), "r"(scale));
    return d;
  }
#endif
};

}  // namespace nvfp4k
