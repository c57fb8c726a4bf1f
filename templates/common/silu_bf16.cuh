// silu(g) * u rounded to BF16 on the GPU: the bits of round_to<BF16>(silu_mul(g, u)) (the CPU
// reference's definition, fused_math.cuh) at a fraction of its cost. An estimate from the
// hardware's exp2 and reciprocal approximations decides the BF16 value wherever it lies far
// enough from a rounding midpoint; the few values near one, and gates outside the range where
// the estimate's error is bounded (tiny, or
// near -88), take the exact path.
// tests/gpu/test_gpu_silu_bf16.cpp compares the two on every pair of BF16 values.
#pragma once
#include "common/fused_math.cuh"

namespace nvfp4k {

// Units of the last place between silu_mul_estimate and a BF16 rounding midpoint below which
// the exact path decides (twice the estimate's error bound): a 2^-10 chance per value.
constexpr unsigned kSiluBf16Window = 32;

#if defined(__CUDA_ARCH__)
// The estimate, from s = e^-|g| (never past 1, so nothing overflows): sigmoid(g) is 1 / (1 + s)
// for g >= 0 and s / (1 + s) below. s is 2^t (ex2.approx, 2 ulp) with t = RN(-|g| log2 e) and
// the argument's rounding error d put back as 2^t (1 + d ln 2) (d^2 is below 2^-34); the
// reciprocal is rcp.approx (1 ulp) of a value in [1, 2]. Against the exact value (exp_fp32
// within 2 ulp, then three rounded operations) that is a relative difference below 2^-19.8, 18
// units of the estimate's last place; the test measures the largest on every BF16 pair.
__device__ __forceinline__ float silu_mul_estimate(float g, float u) {
  constexpr float kLog2e = 1.44269502162933349609375f, kLog2eLow = 1.925963033500011e-08f, kLn2 = 0.693147182464599609375f;
  const float a = fminf(fabsf(g), 128.0f);  // past 128, s is 0 either way and t stays finite
  const float t = __fmul_rn(a, -kLog2e);
  const float d = __fmaf_rn(-a, kLog2eLow, __fmaf_rn(-a, kLog2e, -t));  // the product's error, exactly
  float s, r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(s) : "f"(t));
  s = __fmaf_rn(s, __fmul_rn(d, kLn2), s);
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(__fadd_rn(1.0f, s)));
  const float q = __fmul_rn(g, r);
  return __fmul_rn(g < 0.0f ? __fmul_rn(q, s) : q, u);
}

// Gates whose estimate has that bound: zero or at least 2^-100 in magnitude (below, g sigmoid(g)
// is subnormal and loses its relative accuracy), and outside [-88.75, -87.25], where s is
// flushed to zero while e^-g still fits in fp32 (from -88.72 on both give -0). NaN and
// infinite gates give NaN or the exact value on both paths.
__device__ __forceinline__ bool silu_bf16_in_range(float g) {
  const unsigned bits = __float_as_uint(g);
  const bool tiny = (bits << 1) - 1u < (0x0D800000u << 1) - 1u;  // 0 < |g| < 2^-100
  const bool near_flush = bits - 0xC2AE8000u <= 0xC2B18000u - 0xC2AE8000u;  // -87.25 down to -88.75
  return !tiny && !near_flush;
}

// Whether the estimate y of silu_mul(g, u) may round to another BF16 than the exact value: a
// gate out of range, or y's low 16 bits within kSiluBf16Window of the midpoint 0x8000. Bits are
// monotonic in the magnitude, and a BF16 midpoint never sits at a change of exponent, so a
// distance in bits is one in units of the last place.
__device__ __forceinline__ bool silu_bf16_needs_exact(float g, float y) {
  const bool near_midpoint =
      ((__float_as_uint(y) - (0x8000u - kSiluBf16Window)) << 16) <= (2 * kSiluBf16Window) << 16;
  return !silu_bf16_in_range(g) || near_midpoint;
}

// Value i (0..31) of the 32 BF16 values two blocks of 16 hold, two per word.
__device__ __forceinline__ float bf16_of(const unsigned (&a)[8], const unsigned (&b)[8], int i) {
  const unsigned word = i < 16 ? a[i % 16 / 2] : b[i % 16 / 2];
  return __uint_as_float(i % 2 ? word & 0xFFFF0000u : word << 16);
}

// The 16 values round_to<BF16>(silu_mul(gate, up)) of one output block, from the 32 BF16
// inputs a | b (gates and ups interleaved in groups of GROUP, or a the gates and b the ups),
// as BF16 bits two per word (value 2j in word j's low half). The inputs stay packed and the
// estimates are packed at once, which holds the kernel to few registers; the values that need
// it are then recomputed exactly and put in their halves.
template <long long GROUP>
__device__ __forceinline__ void silu_mul_bf16(const unsigned (&a)[8], const unsigned (&b)[8], unsigned (&w)[8]) {
  auto gate = [&](int i) { return bf16_of(a, b, GROUP >= 16 ? i : int(i / GROUP * 2 * GROUP + i % GROUP)); };
  auto up = [&](int i) { return bf16_of(a, b, GROUP >= 16 ? i + 16 : int(i / GROUP * 2 * GROUP + i % GROUP + GROUP)); };
  unsigned exact = 0;
#pragma unroll
  for (int i = 0; i < 16; i += 2) {
    const float y0 = silu_mul_estimate(gate(i), up(i)), y1 = silu_mul_estimate(gate(i + 1), up(i + 1));
    exact |= unsigned(silu_bf16_needs_exact(gate(i), y0)) << i | unsigned(silu_bf16_needs_exact(gate(i + 1), y1)) << (i + 1);
    w[i / 2] = pack_bf16x2(y0, y1);
  }
  if (exact) {
#pragma unroll
    for (int i = 0; i < 16; ++i)
      if (exact >> i & 1u) {
        const unsigned h = float_to_bf16_bits(silu_mul(gate(i), up(i)));
        w[i / 2] = i % 2 ? (w[i / 2] & 0xFFFFu) | h << 16 : (w[i / 2] & 0xFFFF0000u) | h;
      }
  }
}
#endif

}  // namespace nvfp4k
