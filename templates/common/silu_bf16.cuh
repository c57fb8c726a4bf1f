// silu(g) * u rounded to BF16 on the GPU: the bits of round_to<BF16>(silu_mul(g, u)) (the CPU
// reference's definition, fused_math.cuh) at a fraction of its cost. An estimate from the
// hardware's exp2 and reciprocal approximations decides the BF16 value wherever it lies far
// enough from a rounding midpoint; the few values near one, and gates near -88 (where the
// estimate's reciprocal is flushed), take the exact path.
// tests/gpu/test_gpu_silu_bf16.cpp compares the two on every pair of BF16 values.
#pragma once
#include "common/fused_math.cuh"

namespace nvfp4k {

// Units of the last place between silu_mul_estimate and a BF16 rounding midpoint below which
// the exact path decides: the estimate lies within 4 of the exact value on every BF16 pair
// (tests/gpu/test_gpu_silu_bf16.cpp measures it on the device), so 8 leaves a margin of two; a
// 2^-12 chance per value.
constexpr unsigned kSiluBf16Window = 8;

#if defined(__CUDA_ARCH__)
// The estimate for a BF16 gate g: sigmoid(g) = 1 / (1 + e^-g), e^-g = 2^t (1 + x) with
// t = -c log2e_hi exact (c = min(g, 128) has 8 significant bits and log2e_hi 15) and
// x = -c (log2e - log2e_hi) ln 2 (|x| < 2^-11.2 where e^-g is finite and not 0: the omitted
// x^2 / 2 is below 2^-23.3); ex2.approx (2 ulp), rcp.approx (1 ulp). From g = 128 up e^-g is 0
// (the clamp keeps +Inf from making 0 * Inf), below -88.8 it is +Inf, and 1 + Inf gives the
// exact path's -0 * u (NaN for g = -Inf, as there). The reciprocal of 1 + e^-g past
// 2^126 (g below -87.3) is flushed to zero where the exact value is not: those gates take the
// exact path (silu_bf16_gate_flush). Tiny gates give the exact path's own roundings: e^-g and
// 1 + e^-g round to 1 and 2 on both, so g / 2 and its product with u round the same.
__device__ __forceinline__ float silu_mul_estimate(float g, float u) {
  constexpr float kLog2eHi = 0x1.7154p+0f, kLog2eLoLn2 = 0x1.480fb6p-18f;
  const float c = fminf(g, 128.0f);
  float s, r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(s) : "f"(__fmul_rn(c, -kLog2eHi)));
  s = __fmaf_rn(s, __fmul_rn(c, -kLog2eLoLn2), s);
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(__fadd_rn(1.0f, s)));
  return __fmul_rn(__fmul_rn(g, r), u);
}

// Per 16-bit half of two BF16 gates: 3 if the gate is outside [-88.75, -87.25] (BF16 -87.5,
// -88 and -88.5 lie inside), less if inside: where e^-g is past 2^126 and its reciprocal
// flushed while g sigmoid(g) still is a normal fp32 value (from -88.72 on both give -0).
__device__ __forceinline__ unsigned silu_bf16_gate_flush(unsigned gates) {
  return __viaddmin_u16x2(gates, 0x3D513D51u, 0x00030003u);  // (h - 0xC2AF) mod 2^16, at most 3
}

// Per 16-bit half of the low halves of two estimates' fp32 bits: 2W if farther than W units of
// the last place from the BF16 rounding midpoint 0x8000, less if nearer (the exact path
// decides). Bits are monotonic in the magnitude, and a BF16 midpoint never sits at a change of
// exponent, so a distance in bits is one in units of the last place.
__device__ __forceinline__ unsigned silu_bf16_near_midpoint(unsigned low_halves) {
  constexpr unsigned kShift = (0x8000u + kSiluBf16Window) * 0x10001u;  // h - (0x8000 - W) mod 2^16
  return __viaddmin_u16x2(low_halves, kShift, 2 * kSiluBf16Window * 0x10001u);
}

// Whether the estimate's error is bounded for the BF16 gate g (outside the flush band).
__device__ __forceinline__ bool silu_bf16_in_range(float g) { return (silu_bf16_gate_flush(__float_as_uint(g) >> 16) & 0xFFFFu) == 3u; }

// Whether the estimate y of silu_mul(g, u) may round to another BF16 than the exact value.
__device__ __forceinline__ bool silu_bf16_needs_exact(float g, float y) {
  return !silu_bf16_in_range(g) || (silu_bf16_near_midpoint(__float_as_uint(y) & 0xFFFFu) & 0xFFFFu) != 2 * kSiluBf16Window;
}

// round_to<BF16>(silu_mul(g, u)) as bits, out of line: the rare values that need it call one
// copy instead of sixteen inlined ones between the block's estimates and its quantizer.
__device__ __noinline__ unsigned silu_mul_bf16_exact(float g, float u) { return float_to_bf16_bits(silu_mul(g, u)); }

// Value i (0..31) of the 32 BF16 values two blocks of 16 hold, two per word.
__device__ __forceinline__ float bf16_of(const unsigned (&a)[8], const unsigned (&b)[8], int i) {
  const unsigned word = i < 16 ? a[i % 16 / 2] : b[i % 16 / 2];
  return __uint_as_float(i % 2 ? word & 0xFFFF0000u : word << 16);
}

// The 16 values round_to<BF16>(silu_mul(gate, up)) of one output block, from the 32 BF16
// inputs a | b (gates and ups interleaved in groups of GROUP, or a the gates and b the ups),
// as BF16 bits two per word (value 2j in word j's low half). The inputs stay packed and the
// estimates are packed at once, which holds the kernel to few registers. The checks run on
// two values at a time in 16-bit halves (DPX add-and-minimum), and the values that need it
// are then recomputed exactly and put in their halves.
template <long long GROUP>
__device__ __forceinline__ void silu_mul_bf16(const unsigned (&a)[8], const unsigned (&b)[8], unsigned (&w)[8]) {
  auto gate = [&](int i) { return bf16_of(a, b, GROUP >= 16 ? i : int(i / GROUP * 2 * GROUP + i % GROUP)); };
  auto up = [&](int i) { return bf16_of(a, b, GROUP >= 16 ? i + 16 : int(i / GROUP * 2 * GROUP + i % GROUP + GROUP)); };
  // bit 7 - j of `exact` for value 2j, bit 23 - j for value 2j + 1
  unsigned exact = 0;
#pragma unroll
  for (int i = 0; i < 16; i += 2) {
    const float y0 = silu_mul_estimate(gate(i), up(i)), y1 = silu_mul_estimate(gate(i + 1), up(i + 1));
    const unsigned gates = GROUP >= 16 ? a[i / 2] : __byte_perm(__float_as_uint(gate(i)), __float_as_uint(gate(i + 1)), 0x7632);
    const unsigned far = silu_bf16_near_midpoint(__byte_perm(__float_as_uint(y0), __float_as_uint(y1), 0x5410));
    unsigned bad;  // per half: (far ^ 2W) | (flush ^ 3), nonzero where the exact path decides
    asm("lop3.b32 %0, %1, %2, %3, 0xF6;" : "=r"(bad) : "r"(far ^ 2 * kSiluBf16Window * 0x10001u), "r"(silu_bf16_gate_flush(gates)), "r"(0x00030003u));
    asm("min.u16x2 %0, %0, %1;" : "+r"(bad) : "r"(0x00010001u));  // 1 per half that needs it
    exact = exact * 2 + bad;
    w[i / 2] = pack_bf16x2(y0, y1);
  }
  if (exact) {
#pragma unroll
    for (int i = 0; i < 16; ++i)
      if (exact >> (i % 2 * 16 + 7 - i / 2) & 1u) {
        const unsigned h = silu_mul_bf16_exact(gate(i), up(i));
        w[i / 2] = i % 2 ? (w[i / 2] & 0xFFFFu) | h << 16 : (w[i / 2] & 0xFFFF0000u) | h;
      }
  }
}
#endif

}  // namespace nvfp4k
