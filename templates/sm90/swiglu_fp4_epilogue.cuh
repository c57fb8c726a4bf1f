// The SwiGLU epilogue's NVFP4 output (EPILOGUE_SWIGLU with ODT DTYPE_NVFP4): D [M, I] =
// silu(gate) * up quantized as quantize() quantizes it (common/nvfp4_quantize.cuh), straight
// from the fp32 values, with the global scale given (one, or one per row of D), E4M3 scales in
// the layout GemmParams::d_scale_layout names: the input of a W4A4 down projection.
//
// A consumer thread holds one output column (its gate row's and up row's sums) for each of its
// BM / 4 rows of D: a warp's 16 weight rows are 8 columns, and a 16-column block of D is the
// columns of two warps of one warpgroup (w and w ^ 1). Such a pair stages its values in shared
// memory (kFp4ChunkRows rows at a time), and each of its threads then quantizes half blocks:
// the pair's threads 2r and 2r + 1 take the two halves of rows r, r + 32, ..., and meet each
// block's largest magnitude by one shuffle. So a block's scale is made once a half block, where
// quantizing each thread's values in place made it once a value and gathered each row's maximum
// and nibbles by shuffles. The pair alone synchronizes (a persistent CTA's warps run free of each
// other; a CTA of one tile waits once for all its consumers, store_tile, to stage in its stages).
#pragma once
#include "common/fp4_output.cuh"
#include "common/ptx/barrier.cuh"
#include "sm90/gemm_params.cuh"

namespace nvfp4k::sm90 {

// Named barriers of the warp pairs' staging: kFp4StagingBarrier + 2 cw + w / 2, 5 to 10
// (after the split-K (1), D-from-shared-memory (2), MoE combine (3) and RMSNorm (4) ones).
constexpr unsigned kFp4StagingBarrier = 5;

// Rows of D a warp pair stages at a time: the whole tile in the stage memory of a CTA of one
// tile, 32 in a persistent CTA's region of its own (its stages hold its next tile); 16 floats
// a row (a warp's writes, rows 2t + e by columns lane / 4, meet two to a bank: padding the rows
// would cost some tiles a stage).
template <int BM, bool PERSISTENT>
constexpr int kFp4ChunkRows = PERSISTENT && BM > 32 ? 32 : BM;
constexpr int kFp4StagedRowFloats = 16;
// A consumer warpgroup's staging (its two pairs'), in floats.
template <int BM, bool PERSISTENT>
constexpr int kFp4StagingFloats = 2 * kFp4ChunkRows<BM, PERSISTENT> * kFp4StagedRowFloats;

// A consumer thread's share: acc[4j + e] (SwiGLU's values, in place of the gate sums) is D's
// (row m0 + 8j + 2t + e, column weight_row / 16 * 8 + lane / 4) with t = lane % 4, where the
// thread's gate row is weight row `weight_row`, which is below N (a pair of warps is in or out
// of D's columns whole: N is a multiple of 32). Both warps of the pair call it; rows from m_end
// on store nothing. `staging`: the warpgroup's kFp4StagingFloats, free to write (a CTA of one
// tile: every consumer is done with its stages).
template <int BM, bool PERSISTENT>
__device__ __forceinline__ void store_swiglu_fp4(const GemmParams& p, long long m0, long long m_end, long long weight_row,
                                                 const float (&acc)[BM / 2], float* staging, int cw) {
  constexpr int ROWS = kFp4ChunkRows<BM, PERSISTENT>, STEPS = ROWS / 8;  // a chunk's rows, its j steps
  const int tid = threadIdx.x % 128, warp = tid / 32, lane = tid % 32, t = lane % 4;
  float* const rows = staging + (warp / 2) * ROWS * kFp4StagedRowFloats;  // this pair's
  const unsigned barrier = kFp4StagingBarrier + unsigned(2 * cw + warp / 2);
  // the values this thread stages (column `written` of a staged row) and the half blocks it
  // quantizes: rows r0 + `quantized_row` of each chunk, D's columns `column` .. + 7
  const int written = 8 * (warp % 2) + lane / 4;
  const int quantized_row = tid % 64 / 2, half = tid % 2;
  const long long column = (weight_row - weight_row % 32) / 2 + 8 * half;
  unsigned char* const d = static_cast<unsigned char*>(p.d);
  const GlobalScale tensor_scale = fp4_output_tensor_scale(p.d_fp4);
#pragma unroll
  for (int j0 = 0; j0 < BM / 8; j0 += STEPS) {
    if (m0 + 8 * j0 >= m_end) break;  // (uniform over the pair)
    if (j0 > 0 || PERSISTENT) named_barrier(barrier, 64);  // the pair is done reading the last chunk
#pragma unroll
    for (int j = j0; j < j0 + STEPS && j < BM / 8; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) rows[(8 * (j - j0) + 2 * t + e) * kFp4StagedRowFloats + written] = acc[4 * j + e];
    named_barrier(barrier, 64);
    const int chunk_rows = 8 * (BM / 8 - j0 < STEPS ? BM / 8 - j0 : STEPS);
#pragma unroll 1
    for (int r0 = 0; r0 < chunk_rows; r0 += 32) {  // (warp-uniform: every lane takes part in the shuffles)
      const long long m = m0 + 8 * j0 + r0 + quantized_row;
      // a warp whose 16 rows store nothing stops: in a tile of up to 16 rows, or with as few left
      // in D, the pair's second warp (the decode tiles' epilogue is issue, as their k loop is)
      const int warp_row = r0 + 16 * (warp % 2);
      if (warp_row >= chunk_rows || m0 + 8 * j0 + warp_row >= m_end) break;
      // rows past the chunk's or D's end quantize a staged row and store nothing
      const bool stored = r0 + quantized_row < chunk_rows && m < m_end;
      const float* staged = rows + (stored ? r0 + quantized_row : 0) * kFp4StagedRowFloats + 8 * half;
      const float4 lo = *reinterpret_cast<const float4*>(staged), hi = *reinterpret_cast<const float4*>(staged + 4);
      const float x[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
      unsigned amax = 0u;
#pragma unroll
      for (int i = 0; i < 8; ++i) amax = max(amax, magnitude_bits(x[i]));
      amax = max(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, 1));  // the block's, both halves
      const GlobalScale g = fp4_output_row_scale(p.d_fp4, tensor_scale, stored ? m : m0);
      // one warp-uniform branch: a copy without IEEE divisions where every stored row's global
      // scale allows (fp4_output_row_reciprocal)
      unsigned word[1];
      const unsigned char scale = __all_sync(0xFFFFFFFFu, !stored || fp4_output_row_reciprocal(p.d_fp4, tensor_scale, m))
                                      ? quantize_fp32_words<DIVIDE_RECIPROCAL, 1>(x, amax, g, word)
                                      : quantize_fp32_words<DIVIDE_EITHER, 1>(x, amax, g, word);
      if (stored) {
        *reinterpret_cast<unsigned*>(d + m * p.d_stride + column / 2) = word[0];
        if (half == 0) store_fp4_scale(p.d_fp4, m, column, p.n / 2, scale);
      }
    }
  }
}

}  // namespace nvfp4k::sm90
