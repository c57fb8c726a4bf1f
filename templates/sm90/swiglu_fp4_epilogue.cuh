// The SwiGLU epilogue's NVFP4 output (EPILOGUE_SWIGLU with ODT DTYPE_NVFP4): D [M, I] =
// silu(gate) * up quantized as quantize() quantizes it (common/nvfp4_quantize.cuh), straight
// from the fp32 values, with the global scale given (one, or one per row of D), E4M3 scales in
// the layout GemmParams::d_scale_layout names: the input of a W4A4 down projection.
//
// A consumer thread holds one output column (its gate row's and up row's sums) for each of its
// BM / 4 rows of D: a warp's 16 weight rows are 8 columns, and a 16-column block of D is the
// columns of two warps of one warpgroup (w and w ^ 1, a pair). The consumers stage their values
// in shared memory (kFp4ChunkRows rows at a time), a pair's columns as one block a row, and then
// share the chunk's half blocks out among themselves: two adjacent threads take a block's halves
// and meet its largest magnitude by one shuffle. Only the rows D holds are shared out, so a
// chunk of few rows (a decode tile's) keeps few warps busy: the decode tiles are bound by their
// instruction issue, and a warp with nothing to store issues nothing. The consumer warpgroups
// synchronize by a barrier of their own (a CTA of one tile waits once for all its consumers,
// store_tile, to stage in its stages).
#pragma once
#include "common/fp4_output.cuh"
#include "common/ptx/barrier.cuh"
#include "sm90/gemm_params.cuh"

namespace nvfp4k::sm90 {

// The named barrier of the consumers' staging (after the split-K (1), D-from-shared-memory (2),
// MoE combine (3) and RMSNorm (4) ones).
constexpr unsigned kFp4StagingBarrier = 5;

// Rows of D the consumers stage at a time: the whole tile in the stage memory of a CTA of one
// tile, 32 in a persistent CTA's region of its own (its stages hold its next tile); 16 floats
// a row of a pair (a warp's writes, rows 2t + e by columns lane / 4, meet two to a bank: padding
// the rows would cost some tiles a stage).
template <int BM, bool PERSISTENT>
constexpr int kFp4ChunkRows = PERSISTENT && BM > 32 ? 32 : BM;
constexpr int kFp4StagedRowFloats = 16;
// A consumer warpgroup's staging (its two pairs'), in floats.
template <int BM, bool PERSISTENT>
constexpr int kFp4StagingFloats = 2 * kFp4ChunkRows<BM, PERSISTENT> * kFp4StagedRowFloats;

// Where a pair's row r is staged: odd pairs swap rows 2i and 2i + 1, so that the same row of
// two pairs, which the quantizing loop reads together, falls on other banks.
__device__ __forceinline__ int staged_row(int pair, int r) { return r ^ (pair & 1); }

// A consumer thread's share: acc[4j + e] (SwiGLU's values, in place of the gate sums) is D's
// (row m0 + 8j + 2t + e, column (n0 + 32 pair) / 2 + 8 (w % 2) + lane / 4), where t = lane % 4,
// w is the thread's warp in its warpgroup cw, pair = 2 cw + w / 2, and n0 is the tile's first
// weight row. Every consumer thread of the tile calls it, its pair in D's columns or not (N is a
// multiple of 32: a pair is in or out whole); rows from m_end on store nothing. `staging`: the
// WG consumer warpgroups' kFp4StagingFloats each, free to write (a CTA of one tile: every
// consumer is done with its stages).
template <int BM, int WG, bool PERSISTENT>
__device__ __forceinline__ void store_swiglu_fp4(const GemmParams& p, long long m0, long long m_end, long long n0,
                                                 const float (&acc)[BM / 2], float* staging, int cw) {
  constexpr int ROWS = kFp4ChunkRows<BM, PERSISTENT>, STEPS = ROWS / 8;  // a chunk's rows, its j steps
  constexpr int PAIRS = 2 * WG, THREADS = 128 * WG;
  const int tid = threadIdx.x % 128, warp = tid / 32, lane = tid % 32, t = lane % 4;
  const int ctid = cw * 128 + tid;  // among the consumers
  // the staged rows this thread writes: its pair's, column `written`
  const int own_pair = 2 * cw + warp / 2;
  float* const written_rows = staging + own_pair * ROWS * kFp4StagedRowFloats;
  const int written = 8 * (warp % 2) + lane / 4;
  unsigned char* const d = static_cast<unsigned char*>(p.d);
  const GlobalScale tensor_scale = fp4_output_tensor_scale(p.d_fp4);
#pragma unroll
  for (int j0 = 0; j0 < BM / 8; j0 += STEPS) {
    const long long chunk_m0 = m0 + 8 * j0;
    if (chunk_m0 >= m_end) break;  // (uniform over the consumers)
    if (j0 > 0 || PERSISTENT) named_barrier(kFp4StagingBarrier, THREADS);  // all are done reading the last chunk
#pragma unroll
    for (int j = j0; j < j0 + STEPS && j < BM / 8; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e)
        written_rows[staged_row(own_pair, 8 * (j - j0) + 2 * t + e) * kFp4StagedRowFloats + written] = acc[4 * j + e];
    named_barrier(kFp4StagingBarrier, THREADS);
    // The chunk's live rows (those D holds), each PAIRS blocks of two halves, are its items: item
    // i is half i % 2 of pair i / 2 % PAIRS's block of row i / (2 PAIRS), and consumer thread ctid
    // takes items ctid, ctid + THREADS, ... (a block's halves on adjacent lanes).
    const int chunk_rows = 8 * (BM / 8 - j0 < STEPS ? BM / 8 - j0 : STEPS);
    const int items = 2 * PAIRS * int(m_end - chunk_m0 < chunk_rows ? m_end - chunk_m0 : chunk_rows);
#pragma unroll 1
    for (int first = ctid - lane; first < items; first += THREADS) {  // (warp-uniform: every lane takes part in the shuffles)
      const int item = first + lane, half = item % 2, pair = item / 2 % PAIRS, r = item / (2 * PAIRS);
      const long long m = chunk_m0 + r, gate_row = n0 + 32 * pair;  // the pair's first gate row
      // items past the last and pairs past N quantize a staged row and store nothing
      const bool stored = item < items && gate_row < p.n;
      const float* staged = staging + (stored ? pair * ROWS + staged_row(pair, r) : 0) * kFp4StagedRowFloats + 8 * half;
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
        const long long column = gate_row / 2 + 8 * half;
        *reinterpret_cast<unsigned*>(d + m * p.d_stride + column / 2) = word[0];
        if (half == 0) store_fp4_scale(p.d_fp4, m, column, p.n / 2, scale);
      }
    }
  }
}

}  // namespace nvfp4k::sm90
