// NVFP4 weights as the E4M3 A operand of the W4A8 mode's k32 wgmma (sm90/gemm_w4a16.cuh),
// decoded in registers from a prepacked weight (sm90/prepacked_weight.cuh).
//
// A k32 step's A fragment (PTX ISA, wgmma register fragment of an 8-bit A): thread tid's
// register 0 holds row r0's values at k positions 4t..4t+3, register 1 row r1's, registers 2
// and 3 the same at 16 + 4t.. (r0, r1, t as in prepacked_weight.cuh). The prepacked weight gives
// a thread columns 2t, 2t+1, 2t+8, 2t+9 of every k16 step (the 16-bit fragment's), so the
// activations' columns are stored permuted within every 16 to match (fp8_activations.cuh:
// position 4t + i holds column 2t + i % 2 + 8 (i / 2)); the sum over k is the same. Register 0
// of k32 step S is then pairs f0 and f2 of k16 step 2S, register 1 its pairs f1 and f3, and
// registers 2 and 3 those of step 2S + 1: one block scale a register.
//
// Each pair: placed as FP16 (e2m1 * 2^-14), times its block scale * 2^(7 + c) (the FP16 scale
// pair with c added to its exponents), times 2^(7 - c - e), then rounded to E4M3 once
// (cvt.rn.satfinite): e2m1 * scale * 2^-e, common/fp8_fold.cuh's fold. Both products are
// exact in FP16 (at most 6 significant bits, none below 2^-20; a value that lands below FP16's
// normals is below 2^-10 and rounds to zero in E4M3 either way). c = max(0, -8 - e) keeps both
// factors inside FP16's range for every row exponent e in [-15, 3] (fold_exponent's range).
#pragma once
#include "common/mma_operand.cuh"
#include "common/portable.cuh"
#include "sm90/prepacked_weight.cuh"

namespace nvfp4k::sm90 {

// A weight row's fold constants: `bias` adds c to both exponents of its FP16 scale pairs,
// `factor` is 2^(7 - c - e) in both FP16 lanes.
struct FoldRow {
  unsigned bias, factor;
};

NVFP4_HD FoldRow fold_row(int e) {
  const int c = e < -8 ? -8 - e : 0;
  return {unsigned(c << 10) * 0x10001u, (unsigned(15 + 7 - c - e) << 10) * 0x10001u};
}

#if defined(__CUDA_ARCH__)
// Two FP16 lanes to two E4M3 bytes (lane 0 in the low byte), rounded to nearest even, saturating.
__device__ __forceinline__ unsigned e4m3x2_of_f16x2(unsigned x) {
  unsigned short d;
  asm("cvt.rn.satfinite.e4m3x2.f16x2 %0, %1;" : "=h"(d) : "r"(x));
  return d;
}

__device__ __forceinline__ unsigned mul_f16x2(unsigned a, unsigned b) {
  unsigned d;
  asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}

// One warpgroup's STEPS k32 steps from a prepacked weight (STEPS / 2 chunks from `chunks`):
// local step j's fragment into a[j % FRAGS], then issue(j). `rows`: the fold constants of the
// thread's rows r0 and r1.
template <int STEPS, int FRAGS, class Issue>
__device__ __forceinline__ void decode_prepacked_fp8(const unsigned char* chunks, int tid, const FoldRow (&rows)[2],
                                                     unsigned (&a)[FRAGS][4], Issue&& issue) {
  static_assert(STEPS % 2 == 0, "two k32 steps a prepacked chunk");
  prepacked::decode_chunks<DTYPE_FP16, STEPS / 2>(chunks, tid, [&](int h) { return rows[h].bias; }, [&](int q, const prepacked::ChunkPairs<DTYPE_FP16>& pairs) {
#pragma unroll
    for (int S = 0; S < 2; ++S) {
      const int j = 2 * q + S;
#pragma unroll
      for (int r = 0; r < 4; ++r) {  // register r: row r % 2 of k16 step 2S + r / 2
        const int s = 2 * S + r / 2, h = r % 2;
        unsigned bytes[2];
#pragma unroll
        for (int half = 0; half < 2; ++half)  // pair f = h + 2 half: columns 2t (+ 8)
          bytes[half] = e4m3x2_of_f16x2(mul_f16x2(pairs.pair(s, h + 2 * half), rows[h].factor));
        a[j % FRAGS][r] = bytes[0] | (bytes[1] << 16);
      }
      issue(j);
    }
  });
}
#endif

}  // namespace nvfp4k::sm90
