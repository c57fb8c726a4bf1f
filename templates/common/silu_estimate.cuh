// silu(g) * u for a 16-bit gate and up from the hardware's exp2 and reciprocal approximations:
// the estimate that silu_bf16.cuh and silu_fp16.cuh round, and check against the rounding
// midpoints of their dtype, before the exact definition (fused_math.cuh) decides the rest.
#pragma once
#include "common/fused_math.cuh"

namespace nvfp4k {

#if defined(__CUDA_ARCH__)
// sigmoid(g) = 1 / (1 + e^-g), e^-g = 2^t e^x with t = -c log2e_hi exact: c = min(g, 128) has
// 8 (BF16) or 11 (FP16) significant bits and log2e_hi 15 or 13, so their product fits fp32;
// x = -c (log2e - log2e_hi) ln 2. Where e^-g is finite and not 0, |x| < 2^-11.2 for BF16, and
// e^x is taken as 1 + x (the omitted x^2 / 2 is below 2^-23.3); |x| < 2^-7.9 for FP16, and e^x
// is 1 + x + x^2 / 2 (x^3 / 6 is below 2^-26). ex2.approx (2 ulp), rcp.approx (1 ulp). From
// g = 128 up e^-g is 0 (the clamp keeps +Inf from making 0 * Inf), below -88.8 it is +Inf, and
// 1 + Inf gives the exact path's -0 * u (NaN for g = -Inf, as there). The reciprocal of
// 1 + e^-g past 2^126 (g below -87.3) is flushed to zero where the exact value is not: the
// callers send those gates to the exact path. Tiny gates give the exact path's own roundings:
// e^-g and 1 + e^-g round to 1 and 2 on both, so g / 2 and its product with u round the same.
template <int DTYPE>
__device__ __forceinline__ float silu_mul_estimate(float g, float u) {
  static_assert(DTYPE == DTYPE_BF16 || DTYPE == DTYPE_FP16, "16-bit gates");
  constexpr bool FP16 = DTYPE == DTYPE_FP16;
  constexpr float kLog2eHi = FP16 ? 0x1.715p+0f : 0x1.7154p+0f;
  constexpr float kLog2eLoLn2 = FP16 ? 0x1.8be626p-15f : 0x1.480fb6p-18f;
  const float c = fminf(g, 128.0f);
  float s, r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(s) : "f"(__fmul_rn(c, -kLog2eHi)));
  const float x = __fmul_rn(c, -kLog2eLoLn2);
  s = __fmaf_rn(s, FP16 ? __fmaf_rn(x, __fmul_rn(c, -0.5f * kLog2eLoLn2), x) : x, s);
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(__fadd_rn(1.0f, s)));
  return __fmul_rn(__fmul_rn(g, r), u);
}

// round_to<DTYPE>(silu_mul(g, u)) as bits, out of line: the rare values that need it call one
// copy instead of sixteen inlined ones between a block's estimates and its quantizer.
template <int DTYPE>
__device__ __noinline__ unsigned silu_mul_exact_bits(float g, float u) {
  return DTYPE == DTYPE_BF16 ? float_to_bf16_bits(silu_mul(g, u)) : float_to_fp16_bits(silu_mul(g, u));
}

// Puts the exact values of WORDS words of (gate(i), up(i)) pairs into their halves of w (value
// 2j in word j's low half) where `exact` has their bit: WORDS - 1 - j for value 2j, 16 + WORDS -
// 1 - j for value 2j + 1. A warp runs a value's test and call wherever any lane needs it, so the
// values are tested four at a time first: a warp whose lanes need one or two passes the other
// fours with one test each.
template <int DTYPE, int WORDS, class Gate, class Up>
__device__ __forceinline__ void silu_put_exact(unsigned exact, Gate gate, Up up, unsigned (&w)[WORDS]) {
  if (!exact) return;
#pragma unroll
  for (int q = 0; q < WORDS / 2; ++q) {
    if (!(exact & ((3u << (WORDS - 2 - 2 * q)) * 0x10001u))) continue;  // values 4q..4q+3: words 2q, 2q + 1
#pragma unroll
    for (int i = 4 * q; i < 4 * q + 4; ++i)
      if (exact >> (i % 2 * 16 + WORDS - 1 - i / 2) & 1u) {
        const unsigned h = silu_mul_exact_bits<DTYPE>(gate(i), up(i));
        w[i / 2] = i % 2 ? (w[i / 2] & 0xFFFFu) | h << 16 : (w[i / 2] & 0xFFFF0000u) | h;
      }
  }
}
#endif

}  // namespace nvfp4k
