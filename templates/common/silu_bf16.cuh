// silu(g) * u rounded to BF16 on the GPU: the bits of round_to<BF16>(silu_mul(g, u)) (the CPU
// reference's definition, fused_math.cuh) at a fraction of its cost. An estimate from the
// hardware's exp2 and reciprocal approximations decides the BF16 value wherever it lies far
// enough from a rounding midpoint; the few values near one, and gates near -88 (where the
// estimate's reciprocal is flushed), take the exact path.
// tests/gpu/test_gpu_silu_bf16.cpp compares the two on every pair of BF16 values.
#pragma once
#include "common/silu_estimate.cuh"

namespace nvfp4k {

// Units of the last place between silu_mul_estimate<BF16> and a BF16 rounding midpoint below
// which the exact path decides: the estimate lies within 4 of the exact value on every BF16
// pair (tests/gpu/test_gpu_silu_bf16.cpp measures it on the device), so 8 leaves a margin of
// two; a 2^-12 chance per value.
constexpr unsigned kSiluBf16Window = 8;

#if defined(__CUDA_ARCH__)
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

// Value i (0..4 WORDS - 1) of the BF16 values a | b hold, two per word.
template <int WORDS>
__device__ __forceinline__ float bf16_of(const unsigned (&a)[WORDS], const unsigned (&b)[WORDS], int i) {
  const unsigned word = i < 2 * WORDS ? a[i / 2] : b[i / 2 - WORDS];
  return __uint_as_float(i % 2 ? word & 0xFFFF0000u : word << 16);
}

// The 2 WORDS values round_to<BF16>(silu_mul(gate, up)) of one output block (WORDS = 8) or half
// of one (WORDS = 4, its gates and ups from blocks of their own), from the 4 WORDS BF16 inputs
// a | b (INTERLEAVE gates then their INTERLEAVE ups, in turn; or a the gates and b the ups), as BF16
// bits two per word (value 2j in word j's low half). The inputs stay packed and the estimates
// are packed at once, which holds the kernel to few registers. The checks run on two values at
// a time in 16-bit halves (DPX add-and-minimum), and the values that need it are then
// recomputed exactly and put in their halves.
template <long long INTERLEAVE, int WORDS = 8>
__device__ __forceinline__ void silu_mul_bf16(const unsigned (&a)[WORDS], const unsigned (&b)[WORDS], unsigned (&w)[WORDS]) {
  static_assert(WORDS == 8 || (WORDS == 4 && INTERLEAVE >= 16), "half a block takes its gates and ups from blocks of their own");
  auto gate = [&](int i) { return bf16_of(a, b, INTERLEAVE >= 16 ? i : int(i / INTERLEAVE * 2 * INTERLEAVE + i % INTERLEAVE)); };
  auto up = [&](int i) { return bf16_of(a, b, INTERLEAVE >= 16 ? i + 2 * WORDS : int(i / INTERLEAVE * 2 * INTERLEAVE + i % INTERLEAVE + INTERLEAVE)); };
  unsigned exact = 0;  // bit WORDS - 1 - j for value 2j, 16 + WORDS - 1 - j for value 2j + 1 (silu_put_exact)
#pragma unroll
  for (int i = 0; i < 2 * WORDS; i += 2) {
    const float y0 = silu_mul_estimate<DTYPE_BF16>(gate(i), up(i)), y1 = silu_mul_estimate<DTYPE_BF16>(gate(i + 1), up(i + 1));
    const unsigned gates = INTERLEAVE >= 16 ? a[i / 2] : __byte_perm(__float_as_uint(gate(i)), __float_as_uint(gate(i + 1)), 0x7632);
    const unsigned far = silu_bf16_near_midpoint(__byte_perm(__float_as_uint(y0), __float_as_uint(y1), 0x5410));
    unsigned bad;  // per half: (far ^ 2W) | (flush ^ 3), nonzero where the exact path decides
    asm("lop3.b32 %0, %1, %2, %3, 0xF6;"
        : "=r"(bad)
        : "r"(far ^ 2 * kSiluBf16Window * 0x10001u), "r"(silu_bf16_gate_flush(gates)), "r"(0x00030003u));
    asm("min.u16x2 %0, %0, %1;" : "+r"(bad) : "r"(0x00010001u));  // 1 per half that needs it
    exact = exact * 2 + bad;
    w[i / 2] = pack_bf16x2(y0, y1);
  }
  silu_put_exact<DTYPE_BF16, WORDS>(exact, gate, up, w);
}
#endif

}  // namespace nvfp4k
