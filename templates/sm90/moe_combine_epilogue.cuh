// The router-weighted MoE combine in a grouped down GEMM's epilogue (EPILOGUE_MOE_COMBINE):
//   out[t, c] = sum over j = 0..topk-1 of weights[t, j] * D[positions[t * topk + j], c]
// with moe_combine's numerics exactly: fp32, one fused multiply-add per slot in slot order from
// D as stored (rounded to D's dtype), one rounding to the output's dtype.
//
// D is the staging: each tile stores its rows of D as always, then counts them, one per row,
// on a counter per (token, column tile). The count that reaches the token's entries on this
// rank (its slots whose row D holds) finds every row of the token stored; that warp sums the
// token's slots over the tile's columns and resets the counter to zero, so the next call (a
// CUDA graph's next replay) starts from zero without a memset. The order of the sum is the
// slots', never the tiles': the same bits every run and routing order. A token with no entry
// here is never counted and its output row never written.
//
// Ordering: every storing thread fences, the tile's threads meet at a named barrier, and each
// row's count is an acq_rel atomic (cumulative: it releases the whole tile's stores and, for
// the last count, acquires every other tile's). The warp that sums reads D past L1 (.cg): rows
// stored by other SMs are in L2.
#pragma once
#include "common/gemm_epilogue.cuh"
#include "common/portable.cuh"
#include "common/ptx/barrier.cuh"
#include "sm90/gemm_params.cuh"

namespace nvfp4k::sm90 {

__device__ __forceinline__ int atomic_add_acq_rel(int* counter, int v) {
  int old;
  asm volatile("atom.acq_rel.gpu.global.add.s32 %0, [%1], %2;" : "=r"(old) : "l"(counter), "r"(v) : "memory");
  return old;
}

// D's element `at` from L2 (another SM's store is not in this SM's L1).
template <int ODT>
__device__ __forceinline__ float load_d_from_l2(const void* d, long long at) {
  if constexpr (ODT == DTYPE_FP32) {
    return __ldcg(static_cast<const float*>(d) + at);
  } else {
    const unsigned short h = __ldcg(static_cast<const unsigned short*>(d) + at);
    return ODT == DTYPE_BF16 ? bf16_bits_to_float(h) : fp16_bits_to_float(h);
  }
}

// The combine's run-time dtypes (a uniform branch per value, off the GEMM's main loop).
__device__ __forceinline__ float load_router_weight(const void* w, long long at, int dtype) {
  return dtype == DTYPE_FP32 ? static_cast<const float*>(w)[at] : bf16_bits_to_float(static_cast<const unsigned short*>(w)[at]);
}

__device__ __forceinline__ void store_combined(void* out, long long at, float v, int dtype) {
  if (dtype == DTYPE_FP32) store_element<DTYPE_FP32>(out, at, v);
  else if (dtype == DTYPE_BF16) store_element<DTYPE_BF16>(out, at, v);
  else store_element<DTYPE_FP16>(out, at, v);
}

// Token t's slots whose row D holds: the counts its counter reaches once all its rows are stored.
__device__ __forceinline__ int held_slots(const MoeCombineEpilogueParams& c, long long t) {
  int held = 0;
  for (long long j = 0; j < c.topk; ++j) {
    const int pos = c.positions[t * c.topk + j];
    held += pos >= 0 && pos < c.d_rows;
  }
  return held;
}

// One warp: token t's output columns [n0, n0 + BN) (those below N), lane + 32 q each.
template <int ODT, int BN>
__device__ __forceinline__ void combine_token(const GemmParams& p, long long t, long long n0, int lane) {
  const MoeCombineEpilogueParams& c = p.combine;
  constexpr int COLS = BN / 32;
  float acc[COLS];
#pragma unroll
  for (int q = 0; q < COLS; ++q) acc[q] = 0.0f;
  for (long long j = 0; j < c.topk; ++j) {
    const int pos = c.positions[t * c.topk + j];
    if (pos < 0 || pos >= c.d_rows) continue;  // skipped by the routing: adds nothing
    const float w = load_router_weight(c.weights, t * c.topk + j, c.weights_dtype);
#pragma unroll
    for (int q = 0; q < COLS; ++q) {
      const long long col = n0 + lane + 32 * q;
      if (col < p.n) acc[q] = fma_rn(w, load_d_from_l2<ODT>(p.d, pos * p.d_stride + col), acc[q]);
    }
  }
#pragma unroll
  for (int q = 0; q < COLS; ++q) {
    const long long col = n0 + lane + 32 * q;
    if (col < p.n) store_combined(c.out, t * c.out_stride + col, acc[q], c.out_dtype);
  }
}

// After a tile's D is stored by the THREADS threads of k slice 0 (thread index `ctid` among
// them): its rows counted, and each token they complete combined over the tile's columns.
template <int ODT, int BN, int THREADS>
__device__ __forceinline__ void combine_tile(const GemmParams& p, const ScheduledTile& tile, int ctid) {
  static_assert(BN % 32 == 0 && THREADS % 32 == 0);
  const MoeCombineEpilogueParams& c = p.combine;
  const int lane = ctid % 32;
  __threadfence();                 // this thread's stores of D, before any of the tile's counts
  named_barrier(3, THREADS);       // every thread of the tile has stored its part
  const long long n_tiles = (p.n + BN - 1) / BN;
  const int rows = int(tile.m_end - tile.m0);
  for (int base = 0; base < rows; base += THREADS) {  // (uniform bounds: whole warps take part)
    long long done = -1;  // the token this thread's count completed
    if (base + ctid < rows) {
      const long long t = c.row_token[tile.m0 + base + ctid];
      if (t >= 0 && t < c.tokens) {
        int* counter = c.counters + t * n_tiles + tile.n_tile;
        const int held = held_slots(c, t);
        if (atomic_add_acq_rel(counter, 1) + 1 == held) {
          *counter = 0;  // every count of this call is in: ready for the next call
          done = t;
        }
      }
    }
    __syncwarp();  // the completing lanes' acquires, before their warp reads D
    for (unsigned left = __ballot_sync(0xFFFFFFFFu, done >= 0); left; left &= left - 1) {
      const long long t = __shfl_sync(0xFFFFFFFFu, done, __ffs(left) - 1);
      combine_token<ODT, BN>(p, t, (long long)tile.n_tile * BN, lane);
    }
  }
}

}  // namespace nvfp4k::sm90
