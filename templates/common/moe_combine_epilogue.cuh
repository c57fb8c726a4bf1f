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
// Every arch's grouped GEMM calls it the same way: count_tile after a tile's stores, then
// finish_counts on the counts of an earlier tile (or of this one, where the CTA has no next).
//
// Ordering: the tile's threads meet at a barrier after their stores, and each row's
// count is a fence and an atomic add (a release, cumulative: the whole tile's stores); the
// last count's lane fences again after reading it (an acquire: every other tile's stores). The
// warp that sums reads D past L1 (.cg): rows stored by other SMs are in L2. A tile's counts
// are read back only when the CTA stores its next tile (or after its last), so no consumer
// waits for an atomic's round trip before its next products.
#pragma once
#include "common/gemm_epilogue.cuh"
#include "common/params.cuh"
#include "common/portable.cuh"
#include "common/tile_scheduler.cuh"

namespace nvfp4k {

// D as the combine reads it back: its rows, d_stride elements apart, of n columns.
struct CombineD {
  const void* d;
  long long d_stride, n;
};

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
// (Unrolled: the loads go out together, not one latency after another.)
__device__ __forceinline__ int held_slots(const MoeCombineEpilogueParams& c, long long t) {
  int held = 0;
#pragma unroll 8
  for (long long j = 0; j < c.topk; ++j) {
    const int pos = c.positions[t * c.topk + j];
    held += pos >= 0 && pos < c.d_rows;
  }
  return held;
}

// One warp: token t's output columns [n0, n0 + BN) (those below N), lane + 32 q each. The
// slots' rows and weights come one a lane in one load; D's rows UNROLL slots at a time (their
// loads in flight together), then added in slot order.
template <int ODT, int BN>
__device__ __forceinline__ void combine_token(const MoeCombineEpilogueParams& c, CombineD p, long long t, long long n0,
                                              int lane) {
  constexpr int COLS = BN / 32, UNROLL = 4;
  float acc[COLS];
#pragma unroll
  for (int q = 0; q < COLS; ++q) acc[q] = 0.0f;
  for (long long j0 = 0; j0 < c.topk; j0 += 32) {
    int pos = -1;  // lane s: slot j0 + s's row (-1: skipped by the routing, adds nothing)
    float w = 0.0f;
    if (j0 + lane < c.topk) {
      pos = c.positions[t * c.topk + j0 + lane];
      if (pos < 0 || pos >= c.d_rows) pos = -1;
      else w = load_router_weight(c.weights, t * c.topk + j0 + lane, c.weights_dtype);
    }
    const int slots = int(min(32LL, c.topk - j0));
    for (int s0 = 0; s0 < slots; s0 += UNROLL) {
      int ps[UNROLL];
      float ws[UNROLL], v[UNROLL][COLS];
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        ps[u] = __shfl_sync(0xFFFFFFFFu, pos, (s0 + u) % 32);
        ws[u] = __shfl_sync(0xFFFFFFFFu, w, (s0 + u) % 32);
        if (s0 + u >= slots) ps[u] = -1;
#pragma unroll
        for (int q = 0; q < COLS; ++q) {
          const long long col = n0 + lane + 32 * q;
          v[u][q] = ps[u] >= 0 && col < p.n ? load_d_from_l2<ODT>(p.d, ps[u] * p.d_stride + col) : 0.0f;
        }
      }
#pragma unroll
      for (int u = 0; u < UNROLL; ++u)
        if (ps[u] >= 0) {
#pragma unroll
          for (int q = 0; q < COLS; ++q) acc[q] = fma_rn(ws[u], v[u][q], acc[q]);
        }
    }
  }
#pragma unroll
  for (int q = 0; q < COLS; ++q) {
    const long long col = n0 + lane + 32 * q;
    if (col < p.n) store_combined(c.out, t * c.out_stride + col, acc[q], c.out_dtype);
  }
}

// A tile's counts in flight, per lane of the THREADS threads that store D: its rows' tokens
// (-1: none), their held slots and each counter's value before the count. They are read when
// the CTA's next tile is stored (or after its last): by then the atomics have returned, and the
// consumers started the next tile's products without waiting for them.
template <int BM, int THREADS>
struct PendingCounts {
  static constexpr int BATCHES = (BM + THREADS - 1) / THREADS;
  long long token[BATCHES];
  int held[BATCHES], before[BATCHES];
  int n_tile;
  __device__ __forceinline__ void clear() {
#pragma unroll
    for (int b = 0; b < BATCHES; ++b) token[b] = -1, held[b] = 0, before[b] = 0;
  }
};

// After a tile's D (its rows [m0, m_end), columns tile n_tile of D's n) is stored by THREADS
// threads (thread index `ctid` among them), which `stored()` brings together (a barrier of
// them): each of its rows counted on its token's counter. Row i of the tile goes to lane
// i / WARPS of warp i % WARPS, so a decode tile's few rows (and the tokens they complete)
// spread over the warps. The rows' tokens are loaded before the barrier (they do not depend on
// D); the barrier orders the tile's stores before the counts, and each counting lane fences
// and then adds (a release cumulative over what the barrier ordered before it, as CUTLASS's
// generic barrier does). Nothing here waits for the atomics' results.
template <int BN, int BM, int THREADS, class Stored>
__device__ __forceinline__ void count_tile(const MoeCombineEpilogueParams& c, long long m0, long long m_end, int n_tile,
                                           long long n, int ctid, PendingCounts<BM, THREADS>& counts, Stored stored) {
  static_assert(BN % 32 == 0 && THREADS % 32 == 0);
  constexpr int WARPS = THREADS / 32;
  const int lane = ctid % 32, warp = ctid / 32;
  const int rows = int(m_end - m0);
#pragma unroll
  for (int b = 0; b < counts.BATCHES; ++b) {
    const int i = b * THREADS + lane * WARPS + warp;
    const long long t = i < rows ? c.row_token[m0 + i] : -1;
    counts.token[b] = t < c.tokens ? t : -1;
  }
  counts.n_tile = n_tile;
  stored();  // every thread of the tile has stored its part of D
  const long long n_tiles = (n + BN - 1) / BN;
#pragma unroll
  for (int b = 0; b < counts.BATCHES; ++b)
    if (counts.token[b] >= 0) {
      __threadfence();
      counts.before[b] = atomicAdd(c.counters + counts.token[b] * n_tiles + n_tile, 1);
      counts.held[b] = held_slots(c, counts.token[b]);
    }
}

// The counts of a tile (count_tile's, read now): each token they completed is combined over the
// tile's columns by the warp of its lane, which first acquires (a fence after the atomic's
// read) and resets the counter to zero for the next call.
template <int ODT, int BN, int BM, int THREADS>
__device__ __forceinline__ void finish_counts(const MoeCombineEpilogueParams& c, CombineD p,
                                              const PendingCounts<BM, THREADS>& counts, int ctid) {
  const int lane = ctid % 32;
  const long long n_tiles = (p.n + BN - 1) / BN;
#pragma unroll
  for (int b = 0; b < counts.BATCHES; ++b) {
    const long long t = counts.token[b];
    const bool done = t >= 0 && counts.before[b] + 1 == counts.held[b];
    if (done) {
      __threadfence();                                   // acquire: every other tile's rows of D
      c.counters[t * n_tiles + counts.n_tile] = 0;       // every count of this call is in
    }
    __syncwarp();  // the completing lanes' acquires, before their warp reads D
    for (unsigned left = __ballot_sync(0xFFFFFFFFu, done); left; left &= left - 1)
      combine_token<ODT, BN>(c, p, __shfl_sync(0xFFFFFFFFu, t, __ffs(left) - 1), (long long)counts.n_tile * BN, lane);
  }
}

}  // namespace nvfp4k
