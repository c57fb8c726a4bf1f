// How the fused quantizers' kernel (row_quantize.cuh) spreads its work, written once for the
// kernel and for the host that sizes its grid.
#pragma once
#include "common/portable.cuh"

namespace nvfp4k {

// Input blocks of 16 that make one output block: gate and up (SwiGLU), the n_hc streams (mHC).
NVFP4_HD constexpr int row_chunks(int prologue, int n_hc) { return prologue == 2 ? 2 : prologue == 3 ? n_hc : 1; }

// Output blocks a thread makes from a work item of `blocks` blocks (blocks per CTA).
NVFP4_HD constexpr int row_per_thread(long long blocks, int threads) { return int((blocks + threads - 1) / threads); }

// RMSNorm weights are held for every row where they take at most two blocks a thread.
NVFP4_HD constexpr bool row_hold_weights(bool norm, int per_thread) { return norm && per_thread <= 2; }

// A CTA works on several rows (gridDim.x apart) where it holds the weights and reads several
// streams a row (mHC). RMSNorm alone runs no faster so, nor do SwiGLU or MoE staging: their
// registers cost more occupancy than the loop wins (docs/perf-log.md).
NVFP4_HD constexpr bool row_persistent(int chunks, bool hold_weights) { return chunks > 1 && hold_weights; }

}  // namespace nvfp4k
