// Mixture-of-experts routing and combine, on the device, deterministic (no result depends on
// timing: counts and ranks come from warp votes in a fixed order, never from atomics' order).
//
// moe_route: a stable counting sort of the flattened ids (token-major, so the order is token
// then slot). Each CTA of 32 warps owns `cta_entries` consecutive entries; warp w of it owns an
// equal run of those, 32 at a time (loaded ROUTE_BATCH steps ahead). Pass 1 counts each warp's
// entries per expert (__match_any_sync: one lane per expert adds its peers). A row's place is
// then: its expert's first row + the expert's rows in earlier CTAs + in earlier warps of its
// CTA + its rank among its peers below it (pass 2 walks the same entries again). With one CTA
// (no workspace) everything but the first term comes from shared memory; with several, a first
// launch (moe_route_count) leaves each CTA's counts per expert in the workspace, [GROUPS][ctas],
// and every CTA of the second launch (started early, as a programmatic dependent) runs its pass 1,
// waits for the first, and sums the column it needs. The CPU reference
// (moe_route_op.cpp) is the same sort written sequentially; both give the same rows.
//
// moe_combine: one thread per VEC columns of one token; the terms in slot order, one fused
// multiply-add each, in fp32; rounded once to the output type.
#pragma once
#include "common/nvfp4_format.cuh"
#include "common/params.cuh"
#include "common/portable.cuh"
#include "common/ptx/dependent_launch.cuh"
#include "common/vector_io.cuh"

namespace nvfp4k {

constexpr int ROUTE_WARPS = MOE_ROUTE_WARPS;
constexpr int ROUTE_THREADS = ROUTE_WARPS * 32;

// Entry i's expert relative to this rank's experts, or -1 when not one of them (skipped).
template <bool IDS64, int GROUPS>
__device__ __forceinline__ int local_expert(const MoeRouteParams& p, long long i) {
  const long long id = IDS64 ? static_cast<const long long*>(p.ids)[i] : (long long)static_cast<const int*>(p.ids)[i];
  const long long e = id - p.first_expert;
  return e >= 0 && e < GROUPS ? int(e) : -1;
}

// A pass reads ROUTE_BATCH steps of ids before it uses the first: one step's load at a time
// leaves each warp waiting on memory latency.
constexpr int ROUTE_BATCH = 8;

// Lane's entries i, i + 32, ... of ROUTE_BATCH steps; -1 past `end`.
template <bool IDS64, int GROUPS>
__device__ __forceinline__ void load_experts(const MoeRouteParams& p, long long i, long long end, int (&e)[ROUTE_BATCH]) {
#pragma unroll
  for (int u = 0; u < ROUTE_BATCH; ++u) e[u] = i + 32 * u < end ? local_expert<IDS64, GROUPS>(p, i + 32 * u) : -1;
}

// This warp's run of this CTA's entries.
struct WarpRun {
  long long begin, end;
};

__device__ __forceinline__ WarpRun warp_run(const MoeRouteParams& p) {
  const long long entries = p.tokens * p.topk;
  const long long cta_begin = min(entries, (long long)blockIdx.x * p.cta_entries);
  const long long cta_end = min(entries, cta_begin + p.cta_entries);
  const long long chunk = (cta_end - cta_begin + ROUTE_THREADS - 1) / ROUTE_THREADS * 32;
  const long long begin = min(cta_end, cta_begin + int(threadIdx.x) / 32 * chunk);
  return {begin, min(cta_end, begin + chunk)};
}

// Pass 1: mine[e] = this warp's entries of expert e.
template <bool IDS64, int GROUPS>
__device__ __forceinline__ void count_warp_entries(const MoeRouteParams& p, WarpRun run, int* mine) {
  const int lane = int(threadIdx.x) % 32;
  const unsigned below = (1u << lane) - 1u;
  for (int g = lane; g < GROUPS; g += 32) mine[g] = 0;
  __syncwarp();
  for (long long base = run.begin; base < run.end; base += 32 * ROUTE_BATCH) {
    int e[ROUTE_BATCH];
    load_experts<IDS64, GROUPS>(p, base + lane, run.end, e);
#pragma unroll
    for (int u = 0; u < ROUTE_BATCH; ++u) {
      const unsigned peers = __match_any_sync(0xFFFFFFFFu, e[u]);
      if (e[u] >= 0 && (peers & below) == 0) mine[e[u]] += __popc(peers);
      __syncwarp();
    }
  }
}

// The first launch of a routing over several CTAs: this CTA's count per expert to the workspace.
template <bool IDS64, int GROUPS>
__device__ __forceinline__ void moe_route_count(const MoeRouteParams& p) {
  extern __shared__ int route_smem[];
  griddep_launch_dependents();  // the placement's pass 1 needs nothing from here: it may start
  count_warp_entries<IDS64, GROUPS>(p, warp_run(p), route_smem + int(threadIdx.x) / 32 * GROUPS);
  __syncthreads();
  for (int g = int(threadIdx.x); g < GROUPS; g += ROUTE_THREADS) {
    int total = 0;
    for (int w = 0; w < ROUTE_WARPS; ++w) total += route_smem[w * GROUPS + g];
    p.workspace[(long long)g * gridDim.x + blockIdx.x] = total;
  }
}

// Lanes per expert when the workspace's columns are summed: a power of two, within a warp.
template <int GROUPS>
__host__ __device__ constexpr int lanes_per_expert() {
  int l = 1;
  while (l < 32 && 2 * l * GROUPS <= ROUTE_THREADS) l *= 2;
  return l;
}

// Per expert, the rows of CTAs before this one (before[g]) and of all of them (totals[g]),
// from the workspace; several lanes an expert, each summing every L-th CTA, then a butterfly.
template <int GROUPS>
__device__ __forceinline__ void sum_cta_counts(const MoeRouteParams& p, int* totals, int* before) {
  constexpr int L = lanes_per_expert<GROUPS>();
  for (int first = 0; first < GROUPS; first += ROUTE_THREADS / L) {
    const int g = first + int(threadIdx.x) / L, j = int(threadIdx.x) % L;
    int all = 0, earlier = 0;
    if (g < GROUPS) {
      const int* column = p.workspace + (long long)g * gridDim.x;
#pragma unroll 8
      for (int b = j; b < int(gridDim.x); b += L) {
        const int c = column[b];
        all += c;
        earlier += b < int(blockIdx.x) ? c : 0;
      }
    }
#pragma unroll
    for (int o = 1; o < L; o *= 2) {
      all += __shfl_xor_sync(0xFFFFFFFFu, all, o);
      earlier += __shfl_xor_sync(0xFFFFFFFFu, earlier, o);
    }
    if (g < GROUPS && j == 0) {
      totals[g] = all;
      before[g] = earlier;
    }
  }
}

// The whole routing (one CTA, no workspace) or its second launch (every CTA, after
// moe_route_count filled the workspace).
template <bool IDS64, int GROUPS>
__device__ __forceinline__ void moe_route(const MoeRouteParams& p) {
  static_assert(GROUPS > 0 && GROUPS <= ROUTE_THREADS, "the experts' scan holds one expert a thread");
  extern __shared__ int route_smem[];
  int* slots = route_smem;                            // [ROUTE_WARPS][GROUPS]: counts, then next rows
  int* totals = route_smem + ROUTE_WARPS * GROUPS;    // [GROUPS]
  int* before = totals + GROUPS;                      // [GROUPS] rows of earlier CTAs
  int* warp_sums = before + GROUPS;                   // [32]
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  const unsigned below = (1u << lane) - 1u;
  const long long entries = p.tokens * p.topk;
  const WarpRun run = warp_run(p);
  int* mine = slots + warp * GROUPS;
  count_warp_entries<IDS64, GROUPS>(p, run, mine);
  if (p.workspace) {
    griddep_wait();  // moe_route_count's workspace is complete
    sum_cta_counts<GROUPS>(p, totals, before);
  }
  __syncthreads();

  // per expert, the warps' counts become their offsets within the expert (warp order)
  for (int g = int(threadIdx.x); g < GROUPS; g += ROUTE_THREADS) {
    int rows = 0;
    for (int w = 0; w < ROUTE_WARPS; ++w) {
      const int c = slots[w * GROUPS + g];
      slots[w * GROUPS + g] = rows;
      rows += c;
    }
    if (!p.workspace) {
      totals[g] = rows;
      before[g] = 0;
    }
  }
  __syncthreads();

  // the experts' ends: an inclusive scan of their totals, one expert a thread
  const int g = int(threadIdx.x);
  const int count = g < GROUPS ? totals[g] : 0;
  int inclusive = count;
#pragma unroll
  for (int o = 1; o < 32; o *= 2) {
    const int x = __shfl_up_sync(0xFFFFFFFFu, inclusive, o);
    if (lane >= o) inclusive += x;
  }
  if (lane == 31) warp_sums[warp] = inclusive;
  __syncthreads();
  if (warp == 0) {
    int s = warp_sums[lane];
#pragma unroll
    for (int o = 1; o < 32; o *= 2) {
      const int x = __shfl_up_sync(0xFFFFFFFFu, s, o);
      if (lane >= o) s += x;
    }
    warp_sums[lane] = s;
  }
  __syncthreads();
  const int routed = warp_sums[31];
  if (g < GROUPS) {
    const int group_end = inclusive + (warp > 0 ? warp_sums[warp - 1] : 0);
    if (blockIdx.x == 0) {
      p.group_ends[g] = group_end;
      if (p.counts) p.counts[g] = count;
    }
    const int first_row = group_end - count + before[g];
    for (int w = 0; w < ROUTE_WARPS; ++w) slots[w * GROUPS + g] += first_row;
  }
  __syncthreads();

  // pass 2: each entry to its warp's next row of its expert, plus its rank among its peers
  for (long long base = run.begin; base < run.end; base += 32 * ROUTE_BATCH) {
    int e[ROUTE_BATCH];
    load_experts<IDS64, GROUPS>(p, base + lane, run.end, e);
#pragma unroll
    for (int u = 0; u < ROUTE_BATCH; ++u) {
      const long long i = base + 32 * u + lane;
      const unsigned peers = __match_any_sync(0xFFFFFFFFu, e[u]);
      int row = -1;
      if (e[u] >= 0) {
        row = mine[e[u]] + __popc(peers & below);
        p.row_index[row] = int(i / p.topk);
      }
      if (i < run.end && p.positions) p.positions[i] = row;
      __syncwarp();  // every lane has read mine[e] before its first peer moves it on
      if (e[u] >= 0 && (peers & below) == 0) mine[e[u]] += __popc(peers);
      __syncwarp();
    }
  }
  // rows past the routed ones (skipped entries) name no token
  const long long stride = (long long)gridDim.x * ROUTE_THREADS;
  for (long long r = routed + (long long)blockIdx.x * ROUTE_THREADS + threadIdx.x; r < entries; r += stride)
    p.row_index[r] = -1;
}

template <int DTYPE>
__device__ __forceinline__ float load_one(const void* base, long long index) {
  if constexpr (DTYPE == DTYPE_FP32) return static_cast<const float*>(base)[index];
  const unsigned h = static_cast<const unsigned short*>(base)[index];
  return DTYPE == DTYPE_BF16 ? bf16_bits_to_float(h) : fp16_bits_to_float(h);
}

template <int DTYPE>
__device__ __forceinline__ void store_one(void* base, long long index, float v) {
  if constexpr (DTYPE == DTYPE_FP32) static_cast<float*>(base)[index] = v;
  else static_cast<unsigned short*>(base)[index] = DTYPE == DTYPE_BF16 ? float_to_bf16_bits(v) : float_to_fp16_bits(v);
}

// VEC 8: columns in 16-byte vectors (n, strides and pointers aligned to them); VEC 1: one a thread.
template <int D_DTYPE, int W_DTYPE, int OUT_DTYPE, int VEC, int THREADS>
__device__ __forceinline__ void moe_combine(const MoeCombineParams& p) {
  static_assert(VEC == 1 || VEC == 8, "8 columns a thread (16-byte vectors) or one");
  const long long t = blockIdx.x;
  const long long c0 = ((long long)blockIdx.y * THREADS + threadIdx.x) * VEC;
  if (c0 >= p.n) return;
  float acc[VEC];
#pragma unroll
  for (int i = 0; i < VEC; ++i) acc[i] = 0.0f;
  for (long long j = 0; j < p.topk; ++j) {
    const int pos = p.positions[t * p.topk + j];
    if (pos < 0 || pos >= p.d_rows) continue;  // skipped by the routing (or out of d): adds nothing
    const float w = load_one<W_DTYPE>(p.weights, t * p.topk + j);
    float v[VEC];
    if constexpr (VEC == 8) {
      load_as_float<D_DTYPE, 8>(static_cast<const char*>(p.d) + (pos * p.d_stride + c0) * dtype_bytes<D_DTYPE>(), v);
    } else {
      v[0] = load_one<D_DTYPE>(p.d, pos * p.d_stride + c0);
    }
#pragma unroll
    for (int i = 0; i < VEC; ++i) acc[i] = fma_rn(w, v[i], acc[i]);
  }
  if constexpr (VEC == 8) {
    store_converted<OUT_DTYPE, 8>(static_cast<char*>(p.out) + (t * p.out_stride + c0) * dtype_bytes<OUT_DTYPE>(), acc);
  } else {
    store_one<OUT_DTYPE>(p.out, t * p.out_stride + c0, acc[0]);
  }
}

}  // namespace nvfp4k
