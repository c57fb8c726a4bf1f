// The block-scaled FP4 MMA of sm_120a / sm_121a, one warp's m16n8k64:
//   mma.sync.aligned.kind::mxf4nvf4.block_scale.scale_vec::4X.m16n8k64.row.col.f32.e2m1.e2m1.f32.ue4m3
// D[16 x 8] = (A[16 x 64] * SF_A) . (B[64 x 8] * SF_B) + C, one E4M3 scale per 16 k of a row of A
// and of a column of B. And its exact emulation, with the same register interface, for running
// the sm_120a kernels on an sm_90a device (the GEMM's test facility NVFP4_JIT_EMULATE_ARCH).
//
// Register interface (PTX ISA 9.2, 9.7.14.5 "Matrix Fragments for mma.m16n8k64" (.e2m1) and
// 9.7.14.3 "Block Scaling for mma.sync"; the same layouts as CUTLASS's
// cute/atom/mma_traits_sm120.hpp, SM120_16x8x64_TN_VS). g = lane / 4, t = lane % 4:
//   a[r]  eight E2M1, nibble j (low first): A[g + 8 (r % 2)][8 t + j + 32 (r / 2)]
//   b[r]  eight E2M1, nibble j:             B[8 t + j + 32 r][g]
//   c/d[i]                                   C[g + 8 (i / 2)][2 t + i % 2]
//   sfa   byte j: SF_A[row][j] (k 16 j .. 16 j + 15) of row g + 8 (lane % 2), read from the
//         lanes with lane % 4 / 2 == thread-id-a (0 or 1); byte-id-a is 0 (4X uses all 4 bytes)
//   sfb   byte j: SF_B[j][col] of column g, read from the lane with lane % 4 == thread-id-b (0..3)
#pragma once
#include "common/nvfp4_format.cuh"

// Loops over registers unrolled on the device, so every index into a fragment is a constant;
// the loop over a register's eight values kept rolled (the emulation compiles in seconds).
#if defined(__CUDA_ARCH__)
#define NVFP4_SM120_UNROLL _Pragma("unroll")
#define NVFP4_SM120_ROLLED _Pragma("unroll 1")
#else
#define NVFP4_SM120_UNROLL
#define NVFP4_SM120_ROLLED
#endif

namespace nvfp4k::sm120 {

// Which operand the emulation fetches from another lane.
enum MmaOperand { OPERAND_A = 0, OPERAND_B = 1, OPERAND_SFA = 2, OPERAND_SFB = 3 };

// The lane holding row `row` of SF_A (0..15), and column `col` of SF_B (0..7).
NVFP4_HD int sfa_lane(int row, int thread_id_a) { return 4 * (row % 8) + 2 * thread_id_a + row / 8; }
NVFP4_HD int sfb_lane(int col, int thread_id_b) { return 4 * col + thread_id_b; }

NVFP4_HD unsigned nibble(unsigned word, int j) { return (word >> (4 * j)) & 15u; }

// The emulation of one MMA for lane `lane`: fetch(operand, reg, src) is register `reg` of
// `operand` as lane `src` holds it (on the device a shuffle, which every lane executes with the
// same operand and reg). It gathers this lane's two rows of A, its two columns of B and their
// scales where the layouts above put them, decodes them exactly (an E2M1 x E4M3 product has at
// most 6 significant bits, a product of two such at most 12: exact in fp32) and adds the
// products to C in fp32 in k order 0..63, one rounding each. The instruction's own order and
// rounding are unspecified; this order is the emulation's.
template <class Fetch>
NVFP4_HD void mxf4nvf4_m16n8k64_emulated(float (&d)[4], const float (&c)[4], int lane, int thread_id_a, int thread_id_b,
                                         Fetch&& fetch) {
  const int g = lane / 4, t = lane % 4;
  // rows g and g + 8 of A: lane 4 g + q holds k 8q .. 8q + 7 (regs 0 / 1) and 32 + 8q .. (regs 2 / 3)
  unsigned a[4][4];
  NVFP4_SM120_UNROLL
  for (int q = 0; q < 4; ++q) {
    NVFP4_SM120_UNROLL
    for (int r = 0; r < 4; ++r) a[q][r] = fetch(OPERAND_A, r, 4 * g + q);
  }
  // columns 2t and 2t + 1 of B: lane 4 col + q holds k 8q .. (b0) and 32 + 8q .. (b1)
  unsigned b[2][4][2];
  NVFP4_SM120_UNROLL
  for (int e = 0; e < 2; ++e) {
    NVFP4_SM120_UNROLL
    for (int q = 0; q < 4; ++q) {
      NVFP4_SM120_UNROLL
      for (int r = 0; r < 2; ++r) b[e][q][r] = fetch(OPERAND_B, r, 4 * (2 * t + e) + q);
    }
  }
  unsigned sfa[2], sfb[2];
  NVFP4_SM120_UNROLL
  for (int h = 0; h < 2; ++h) sfa[h] = fetch(OPERAND_SFA, 0, sfa_lane(g + 8 * h, thread_id_a));
  NVFP4_SM120_UNROLL
  for (int e = 0; e < 2; ++e) sfb[e] = fetch(OPERAND_SFB, 0, sfb_lane(2 * t + e, thread_id_b));
  NVFP4_SM120_UNROLL
  for (int i = 0; i < 4; ++i) {
    const int h = i / 2, e = i % 2;
    float acc = c[i];
    // k = 32 half + 8 q + j, in increasing order
    NVFP4_SM120_UNROLL
    for (int half = 0; half < 2; ++half) {
      NVFP4_SM120_UNROLL
      for (int q = 0; q < 4; ++q) {
        const unsigned aw = a[q][h + 2 * half], bw = b[e][q][half];
        const int block = 2 * half + q / 2;  // k / 16: the scales' byte
        const float sa = e4m3_to_float((sfa[h] >> (8 * block)) & 0xFFu), sb = e4m3_to_float((sfb[e] >> (8 * block)) & 0xFFu);
        NVFP4_SM120_ROLLED
        for (int j = 0; j < 8; ++j) {
          const float av = e2m1_to_float(nibble(aw, j)) * sa, bv = e2m1_to_float(nibble(bw, j)) * sb;
          acc = acc + av * bv;  // av * bv is exact: contraction into an FMA gives the same bits
        }
      }
    }
    d[i] = acc;
  }
}

#if defined(__CUDACC__)
// The emulation on the device: one function a kernel calls (inlined at each of a large tile's
// MMAs it took NVRTC a minute to compile). The fetches are shuffles, which all 32 lanes execute.
__device__ __noinline__ float4 mma_m16n8k64_emulated(unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0,
                                                     unsigned b1, unsigned sfa, unsigned sfb, float4 c_in) {
  const unsigned a[4] = {a0, a1, a2, a3}, b[2] = {b0, b1};
  const float c[4] = {c_in.x, c_in.y, c_in.z, c_in.w};
  float d[4];
  mxf4nvf4_m16n8k64_emulated(d, c, int(threadIdx.x % 32), 0, 0, [&](int operand, int reg, int src) {
    const unsigned v = operand == OPERAND_A ? a[reg] : operand == OPERAND_B ? b[reg] : operand == OPERAND_SFA ? sfa : sfb;
    return __shfl_sync(0xFFFFFFFFu, v, src);
  });
  return make_float4(d[0], d[1], d[2], d[3]);
}

// The MMA with thread-id-a = thread-id-b = 0 (byte ids 0): the instruction where EMULATE is
// false (sm_120a / sm_121a), its emulation through shuffles where it is true (sm_90a).
template <bool EMULATE>
__device__ __forceinline__ void mma_m16n8k64(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2], unsigned sfa,
                                             unsigned sfb) {
  if constexpr (EMULATE) {
    const float4 r = mma_m16n8k64_emulated(a[0], a[1], a[2], a[3], b[0], b[1], sfa, sfb, make_float4(d[0], d[1], d[2], d[3]));
    d[0] = r.x, d[1] = r.y, d[2] = r.z, d[3] = r.w;
  } else {
    const unsigned short id = 0;
    asm volatile(
        "mma.sync.aligned.kind::mxf4nvf4.block_scale.scale_vec::4X.m16n8k64.row.col.f32.e2m1.e2m1.f32.ue4m3 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3}, {%10}, {%11, %12}, {%13}, {%14, %15};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(sfa), "h"(id), "h"(id), "r"(sfb), "h"(id),
          "h"(id));
  }
}
#endif

}  // namespace nvfp4k::sm120
