// silu(g) * u rounded to FP16 on the GPU: the bits of round_to<FP16>(silu_mul(g, u)) (the CPU
// reference's definition, fused_math.cuh), as silu_bf16.cuh does for BF16: an estimate from the
// hardware's exp2 and reciprocal approximations decides the FP16 value wherever a small bracket
// around it rounds to one FP16 value; values whose bracket straddles a rounding midpoint, and
// gates near -88 (where the estimate's reciprocal is flushed), take the exact path.
// tests/gpu/test_gpu_silu_fp16.cpp compares the two on every pair of FP16 values.
#pragma once
#include "common/silu_estimate.cuh"

namespace nvfp4k {

// The bracket's half-width relative to the estimate: 8 to 16 units of its last place, where
// the estimate lies within kSiluFp16MaxUlps of the exact value on every FP16 pair (the test
// measures the largest distance on the device).
constexpr float kSiluFp16Bracket = 0x1p-20f;
constexpr unsigned kSiluFp16MaxUlps = 7;

#if defined(__CUDA_ARCH__)
// Per 16-bit half of two FP16 gates: 25 if the gate is outside [-88.75, -87.25] (FP16 bits
// 0xD574 to 0xD58C), less if inside, where the reciprocal is flushed while g sigmoid(g) is not.
__device__ __forceinline__ unsigned silu_fp16_gate_flush(unsigned gates) {
  return __viaddmin_u16x2(gates, 0x2A8C2A8Cu, 0x00190019u);  // (h - 0xD574) mod 2^16, at most 25
}

// The FP16 roundings of y0 and y1 shrunk and grown by the bracket, two per word as pack_fp16x2:
// where a value's two agree, every value between rounds to them, the exact one included. The
// bracket never collapses where FP16 could tell its ends apart: y below 2^-126 rounds to a
// signed zero whatever its neighbours. Products, not y +- y * eps: those make -0 + 0 = +0 out
// of y = -0 (a tenth of the values where gates reach -512), and two different ends.
__device__ __forceinline__ void silu_fp16_bracket(float y0, float y1, unsigned& low, unsigned& high) {
  constexpr float kShrink = 1.0f - kSiluFp16Bracket, kGrow = 1.0f + kSiluFp16Bracket;
  low = pack_fp16x2(__fmul_rn(y0, kShrink), __fmul_rn(y1, kShrink));
  high = pack_fp16x2(__fmul_rn(y0, kGrow), __fmul_rn(y1, kGrow));
}

__device__ __forceinline__ bool silu_fp16_in_range(float g) {
  return (silu_fp16_gate_flush(float_to_fp16_bits(g)) & 0xFFFFu) == 25u;
}

// Whether the estimate y of silu_mul(g, u) may round to another FP16 than the exact value.
__device__ __forceinline__ bool silu_fp16_needs_exact(float g, float y) {
  unsigned low, high;
  silu_fp16_bracket(y, y, low, high);
  return !silu_fp16_in_range(g) || low != high;
}

// The 2 WORDS values round_to<FP16>(silu_mul(gate, up)) of one output block or half of one, from
// the FP16 inputs a | b (laid out as for silu_mul_bf16), as FP16 bits two per word. The agreeing brackets are
// the results; the values that need it are recomputed exactly and put in their halves.
template <long long INTERLEAVE, int WORDS = 8>
__device__ __forceinline__ void silu_mul_fp16(const unsigned (&a)[WORDS], const unsigned (&b)[WORDS], unsigned (&w)[WORDS]) {
  static_assert(WORDS == 8 || (WORDS == 4 && INTERLEAVE >= 16), "half a block takes its gates and ups from blocks of their own");
  constexpr int N = 2 * WORDS;  // values a holds
  auto index = [](int i, bool is_up) {  // of gate or up value i in a | b
    return INTERLEAVE >= 16 ? i + (is_up ? N : 0) : int(i / INTERLEAVE * 2 * INTERLEAVE + i % INTERLEAVE + (is_up ? INTERLEAVE : 0));
  };
  auto half = [&](int k) { return (k < N ? a[k / 2] : b[k / 2 - WORDS]) >> (k % 2 * 16) & 0xFFFFu; };
  auto gate = [&](int i) { return fp16_bits_to_float(half(index(i, false))); };
  auto up = [&](int i) { return fp16_bits_to_float(half(index(i, true))); };
  unsigned exact = 0;  // bit WORDS - 1 - j for value 2j, 16 + WORDS - 1 - j for value 2j + 1 (silu_put_exact)
#pragma unroll
  for (int i = 0; i < N; i += 2) {
    const float y0 = silu_mul_estimate<DTYPE_FP16>(gate(i), up(i)), y1 = silu_mul_estimate<DTYPE_FP16>(gate(i + 1), up(i + 1));
    const unsigned gates = INTERLEAVE >= 16 ? a[i / 2] : half(index(i, false)) | half(index(i + 1, false)) << 16;
    unsigned low, high, bad;
    silu_fp16_bracket(y0, y1, low, high);
    // per half: (low ^ high) | (flush ^ 25), nonzero where the exact path decides
    asm("lop3.b32 %0, %1, %2, %3, 0xBE;" : "=r"(bad) : "r"(low), "r"(high), "r"(silu_fp16_gate_flush(gates) ^ 0x00190019u));
    asm("min.u16x2 %0, %0, %1;" : "+r"(bad) : "r"(0x00010001u));
    exact = exact * 2 + bad;
    w[i / 2] = low;
  }
  silu_put_exact<DTYPE_FP16, WORDS>(exact, gate, up, w);
}
#endif

}  // namespace nvfp4k
