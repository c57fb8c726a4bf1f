// RMSNorm of the sm_90a W4A16 GEMM's activations inside the GEMM (GemmConfig::RMSNORM):
//   D[m, n] = (sum_k A[m, k] * RN16(Wd[n, k] * g[k])) * inv_rms[m] * (scales),
//   inv_rms[m] = 1 / sqrt(sum_k A[m, k]^2 / K + eps)   (fp32, correctly rounded steps),
// where Wd is the decoded weight (value * block scale * 2^-SHIFT, exact in A's 16-bit type) and
// RN16 rounds to that type (an fp32 g is rounded to it first). So A's rows enter the MMA as they are, the norm weight g goes into
// the weight's register fragments as they are decoded (one packed multiply a pair), and each
// row's 1 / rms multiplies its row of D in the epilogue. The norm-then-GEMM chain rounds
// A * inv_rms and then * g to the 16-bit type instead: both lie within that rounding (unit
// roundoff 2^-8 for BF16, 2^-11 for FP16; FP16 products below 2^-14 are subnormal) of the exact
// (A * g / rms) . W.
// The rows' 1 / rms are the producer warpgroup's: its threads with no copies to issue compute
// them while the consumers run the k loop, write them after the stages (GemmConfig::RMS_AT) and
// arrive on a named barrier the consumers wait on before their epilogue. One tile a CTA (dense,
// not persistent). Tall tiles of a prepacked weight, unsplit (GemmConfig::RMS_FROM_STAGES), add
// up their rows' squares from the stages as they land, a thread a row (one more arrival on each
// stage's empty barrier): the rows' bytes come into shared memory once, as the MMA's operand.
// The others (decode's few rows, split K, the ModelOpt layout) read the tile's rows of A from
// global memory (after griddepcontrol.wait), which at a few rows costs nothing the k loop does
// not hide.
#pragma once
#include "common/fused_math.cuh"
#include "common/nvfp4_format.cuh"
#include "common/params.cuh"
#include "common/ptx/barrier.cuh"
#include "common/ptx/dependent_launch.cuh"
#include "sm90/gemm_params.cuh"

namespace nvfp4k::sm90 {

// The named barrier the producers' 1 / rms arrive on (1, 2: the epilogue's; 3: the MoE combine's)
constexpr unsigned kRmsBarrier = 4;

// g[k], g[k + 1] as a pair of the operand's 16-bit type (element k in the low half); zeros at and
// past K (where the decoded weight and A are zero too).
template <int ADT, int RMSNORM, long long K>
__device__ __forceinline__ unsigned a_rmsnorm_pair(const void* g, long long k) {
  if (k >= K) return 0u;
  if constexpr (RMSNORM == A_RMSNORM_FP32) {
    const float2 v = *reinterpret_cast<const float2*>(static_cast<const float*>(g) + k);
    return ADT == DTYPE_BF16 ? pack_bf16x2(v.x, v.y) : pack_fp16x2(v.x, v.y);
  } else {
    return *reinterpret_cast<const unsigned*>(static_cast<const unsigned short*>(g) + k);
  }
}

// A k-tile's norm weight pairs for a consumer thread's STEPS k16 steps from k0: step j's
// fragment holds k0 + 16 j + 2t (+1) in registers 0, 1 and k0 + 16 j + 8 + 2t (+1) in 2, 3.
template <int ADT, int RMSNORM, long long K, int STEPS>
__device__ __forceinline__ void load_a_rmsnorm_pairs(const void* g, long long k0, int t, unsigned (&pairs)[STEPS][2]) {
#pragma unroll
  for (int j = 0; j < STEPS; ++j)
#pragma unroll
    for (int h = 0; h < 2; ++h) pairs[j][h] = a_rmsnorm_pair<ADT, RMSNORM, K>(g, k0 + 16 * j + 8 * h + 2 * t);
}

// A decoded weight fragment times the norm weight's pairs, rounded to the 16-bit type.
template <int ADT>
__device__ __forceinline__ void apply_a_rmsnorm(unsigned (&frag)[4], const unsigned (&pairs)[2]) {
#pragma unroll
  for (int f = 0; f < 4; ++f) {
    if constexpr (ADT == DTYPE_BF16)
      asm("mul.rn.bf16x2 %0, %0, %1;" : "+r"(frag[f]) : "r"(pairs[f / 2]));
    else
      asm("mul.rn.f16x2 %0, %0, %1;" : "+r"(frag[f]) : "r"(pairs[f / 2]));
  }
}

// 1 / rms of the tile's rows m0 + r (r < BM; 0 at and past m_end) into row_inv_rms[r]: warp `warp`
// of `warps` takes rows warp, warp + warps, ..., a lane 8 values (16 bytes) at a time; the sum
// of squares in fp32, lanes added by a shuffle tree (deterministic).
template <int ADT, long long K, int BM>
__device__ __forceinline__ void a_rmsnorm_rows(const GemmParams& p, long long m0, long long m_end, int warp, int warps,
                                               float* row_inv_rms) {
  const int lane = threadIdx.x % 32;
  for (int r = warp; r < BM; r += warps) {
    float sum = 0.0f;
    const bool in = m0 + r < m_end;
    if (in) {
      const uint4* row = reinterpret_cast<const uint4*>(p.a + (m0 + r) * p.a_stride);
#pragma unroll 4
      for (int i = lane; i < int(K / 8); i += 32) {
        const uint4 v = row[i];
        const unsigned w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float lo = ADT == DTYPE_BF16 ? bf16_bits_to_float(w[e] & 0xFFFFu) : fp16_bits_to_float(w[e] & 0xFFFFu);
          const float hi = ADT == DTYPE_BF16 ? bf16_bits_to_float(w[e] >> 16) : fp16_bits_to_float(w[e] >> 16);
          sum = __fmaf_rn(lo, lo, sum);
          sum = __fmaf_rn(hi, hi, sum);
        }
      }
    }
#pragma unroll
    for (int o = 16; o > 0; o /= 2) sum = __fadd_rn(sum, __shfl_xor_sync(0xFFFFFFFFu, sum, o));
    if (lane == 0) row_inv_rms[r] = in ? inv_rms(sum, float(K), p.a_rmsnorm_eps) : 0.0f;
  }
}

// RMS_FROM_STAGES: thread `thread` of `threads` adds up the squares of the tile's rows thread,
// thread + threads, ... (ROWS of them at most) from each of the CTA's k-tiles' stages, from
// stage `ring` of the ring on, and releases each stage after reading it; then their 1 / rms
// (0 at and past m_end) into row_inv_rms. A row's 16-byte pieces are read at their logical
// place in the 128-byte swizzle, so 8 rows' reads of a piece fall in distinct banks.
template <int ADT, long long K, int BM, int STAGES, int STAGE_BYTES, int A_BOXES, int ROWS>
__device__ __forceinline__ void a_rmsnorm_rows_from_stages(const GemmParams& p, const unsigned char* smem,
                                                           unsigned long long* full, unsigned long long* empty, int ring,
                                                           int kt_begin, int kt_end, long long m0, long long m_end,
                                                           int thread, int threads, float* row_inv_rms) {
  float sum[ROWS];
#pragma unroll
  for (int q = 0; q < ROWS; ++q) sum[q] = 0.0f;
  for (int kt = kt_begin, i = ring; kt < kt_end; ++kt, ++i) {
    const int s = i % STAGES;
    mbar_wait(&full[s], (i / STAGES) & 1);
#pragma unroll
    for (int q = 0; q < ROWS; ++q) {
      const int r = thread + q * threads;
      if (r >= BM) break;
#pragma unroll
      for (int b = 0; b < A_BOXES; ++b)
#pragma unroll
        for (int c = 0; c < 8; ++c) {
          const uint4 v = *reinterpret_cast<const uint4*>(smem + s * STAGE_BYTES + b * BM * 128 + r * 128 + 16 * (c ^ (r % 8)));
          const unsigned w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const float lo = ADT == DTYPE_BF16 ? bf16_bits_to_float(w[e] & 0xFFFFu) : fp16_bits_to_float(w[e] & 0xFFFFu);
            const float hi = ADT == DTYPE_BF16 ? bf16_bits_to_float(w[e] >> 16) : fp16_bits_to_float(w[e] >> 16);
            sum[q] = __fmaf_rn(lo, lo, sum[q]);
            sum[q] = __fmaf_rn(hi, hi, sum[q]);
          }
        }
    }
    mbar_arrive(&empty[s]);  // this thread's reads of the stage are done
  }
#pragma unroll
  for (int q = 0; q < ROWS; ++q) {
    const int r = thread + q * threads;
    if (r < BM) row_inv_rms[r] = m0 + r < m_end ? inv_rms(sum[q], float(K), p.a_rmsnorm_eps) : 0.0f;
  }
}

}  // namespace nvfp4k::sm90
