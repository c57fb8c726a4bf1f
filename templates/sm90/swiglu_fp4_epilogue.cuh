// The SwiGLU epilogue's NVFP4 output (EPILOGUE_SWIGLU with ODT DTYPE_NVFP4): D [M, I] =
// silu(gate) * up quantized as quantize() quantizes it (common/nvfp4_quantize.cuh), straight
// from the fp32 values, with the global scale given (one, or one per row of D), E4M3 scales in
// the layout GemmParams::d_scale_layout names: the input of a W4A4 down projection.
//
// A consumer thread holds one output column (its gate row's and up row's sums) for each of its
// BM / 4 rows of D: a warp's 16 weight rows are 8 columns, and a 16-column block of D is the
// columns of two warps of one warpgroup (w and w ^ 1). Each block's largest magnitude comes
// from shuffles across the warp's 8 columns, then the two warps' halves meet in shared memory
// (`exchange`, BM words a warp), the pair alone synchronized (a decode tile's warps run free of
// each other); each thread quantizes its own value, and the 8 nibbles of a warp are gathered into
// one word by shuffles, stored by the lanes of column 0 with the block's scale (the even warp's).
#pragma once
#include "common/fp4_output.cuh"
#include "common/ptx/barrier.cuh"
#include "common/tile_scheduler.cuh"
#include "sm90/gemm_params.cuh"

namespace nvfp4k::sm90 {

// Named barriers of the warp pairs' exchanges: kFp4ExchangeBarrier + 2 cw + w / 2, 5 to 10
// (after the split-K (1), D-from-shared-memory (2), MoE combine (3) and RMSNorm (4) ones).
constexpr unsigned kFp4ExchangeBarrier = 5;

// The largest of `v` over the 8 lanes of a warp that share lane % 4 (one row of D, the warp's
// 8 columns).
__device__ __forceinline__ unsigned max_over_columns(unsigned v) {
#pragma unroll
  for (int mask = 4; mask < 32; mask *= 2) {
    const unsigned o = __shfl_xor_sync(0xFFFFFFFFu, v, mask);
    v = o > v ? o : v;
  }
  return v;
}

// The nibble of each of those 8 lanes in one word, column c's at nibble c (lane / 4 = c).
__device__ __forceinline__ unsigned gather_nibbles(unsigned nibble, int column) {
  unsigned word = nibble << (4 * column);
#pragma unroll
  for (int mask = 4; mask < 32; mask *= 2) word |= __shfl_xor_sync(0xFFFFFFFFu, word, mask);
  return word;
}

// The quantized values and scales of a thread's rows m0 + 8j + 2t + e (those below `stored_end`
// stored), their blocks' largest magnitudes in `exchange` (each warp's BM words), each block's
// values divided as DIVISION says, by the tensor's global scale or each row's.
template <int BM, int DIVISION>
__device__ __forceinline__ void quantize_rows(const GemmParams& p, long long m0, long long stored_end, long long column,
                                              const float (&acc)[BM / 2], const unsigned* exchange, GlobalScale tensor_scale) {
  const int tid = threadIdx.x % 128, warp = tid / 32, lane = tid % 32, t = lane % 4, c = lane / 4;
  unsigned char* const d = static_cast<unsigned char*>(p.d);
#pragma unroll
  for (int j = 0; j < BM / 8; ++j) {
    if (m0 + 8 * j >= stored_end) break;  // (uniform: a decode tile's rows past its group's)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int row = 8 * j + 2 * t + e;
      const long long m = m0 + row;
      const bool stored = m < stored_end;
      const unsigned own = exchange[warp * BM + row], other = exchange[(warp ^ 1) * BM + row];
      unsigned nibble;
      const unsigned char scale =
          quantize_block_share<DIVISION, 1>(&acc[4 * j + e], own > other ? own : other,  // the block's, both warps' columns
                                            fp4_output_row_scale(p.d_fp4, tensor_scale, stored ? m : m0), &nibble);
      const unsigned word = gather_nibbles(nibble, c);
      if (c == 0 && stored) {
        *reinterpret_cast<unsigned*>(d + m * p.d_stride + column / 2) = word;
        if (warp % 2 == 0) store_fp4_scale(p.d_fp4, m, column, p.n / 2, scale);
      }
    }
  }
}

// A consumer thread's share: acc[4j + e] (SwiGLU's values, in place of the gate sums) is D's
// (row m0 + 8j + 2t + e, column `column` + c) with c = lane / 4, t = lane % 4, where the
// thread's gate row is weight row `weight_row` (its warp's first column `column` =
// weight_row / 16 * 8). Every thread of warpgroup cw calls it (rows past m_end and columns past
// N / 2 store nothing). `exchange`: the warpgroup's 4 BM words; a persistent CTA's tiles
// alternate between two such (so that a pair's next tile never overwrites words its partner
// still reads: the pair meets once a tile).
template <int BM>
__device__ __forceinline__ void store_swiglu_fp4(const GemmParams& p, long long m0, long long m_end, long long weight_row,
                                                 const float (&acc)[BM / 2], unsigned* exchange, int cw) {
  const int tid = threadIdx.x % 128, warp = tid / 32, lane = tid % 32, t = lane % 4, c = lane / 4;
  // each row's largest magnitude over the warp's 8 columns, as bits (their order is the
  // magnitudes', NaN and Inf at 0x7F800000 and up), to this warp's words of the exchange
#pragma unroll
  for (int j = 0; j < BM / 8; ++j) {
    if (m0 + 8 * j >= m_end) break;
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const unsigned amax = max_over_columns(magnitude_bits(acc[4 * j + e]));
      if (c == 0) exchange[warp * BM + 8 * j + 2 * t + e] = amax;
    }
  }
  named_barrier(kFp4ExchangeBarrier + unsigned(2 * cw + warp / 2), 64);
  // A pair of warps is in or out of D's columns whole (N is a multiple of 32).
  const long long stored_end = weight_row < p.n ? m_end : m0;
  // one uniform branch: a copy without IEEE divisions where every stored row's global scale
  // allows (fp4_output_row_reciprocal)
  const GlobalScale tensor_scale = fp4_output_tensor_scale(p.d_fp4);
  bool reciprocal = true;
#pragma unroll
  for (int j = 0; j < BM / 8; ++j)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const long long m = m0 + 8 * j + 2 * t + e;
      if (m < stored_end) reciprocal = reciprocal && fp4_output_row_reciprocal(p.d_fp4, tensor_scale, m);
    }
  const long long column = weight_row / 16 * 8;
  if (__all_sync(0xFFFFFFFFu, reciprocal))
    quantize_rows<BM, DIVIDE_RECIPROCAL>(p, m0, stored_end, column, acc, exchange, tensor_scale);
  else
    quantize_rows<BM, DIVIDE_EITHER>(p, m0, stored_end, column, acc, exchange, tensor_scale);
}

}  // namespace nvfp4k::sm90
