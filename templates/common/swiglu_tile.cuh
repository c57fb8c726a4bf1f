// The fused SwiGLU epilogue's tile of a gate_up weight as stored, for the GEMMs that read it so
// (sm_100a, sm_120a): each group's N = 2I rows in ModelOpt's halves (gate rows [0, I), up rows
// [I, 2I)) or interleaved (groups of 2^shift gate rows, then as many up rows: GemmArgs::
// b_swiglu_interleave). A tile of BN weight rows computes BN / 2 outputs, its columns in blocks
// of 2G, each block's first G columns the gate rows of G consecutive outputs and its last G
// their up rows. G is the arch's: the columns one thread's (or one warp's) accumulators pair
// up, so that gate and up of an output meet in the same thread.
#pragma once
#include "common/gemm_epilogue.cuh"

namespace nvfp4k {

// The output (D's column) of tile column c of the tile whose outputs start at out0.
template <int G>
__device__ __forceinline__ long long swiglu_tile_output(long long out0, int c) {
  return out0 + (long long)(c / (2 * G)) * G + c % G;
}

// The weight row (in its group) of output o's gate row, or its up row: ModelOpt's halves where
// shift < 0, else groups of 2^shift gate rows, then as many up rows.
template <long long I>
__device__ __forceinline__ long long swiglu_weight_row(long long o, bool up, int shift) {
  if (shift < 0) return up ? o + I : o;
  return ((o >> shift) << (shift + 1)) + (o & ((1ll << shift) - 1)) + (up ? 1ll << shift : 0);
}

// The weight row (in its group) tile column c reads; at or past I's outputs it is a row the
// epilogue never stores (its scales are loaded as 0).
template <int G, long long I>
__device__ __forceinline__ long long swiglu_tile_row(long long out0, int c, int shift) {
  return swiglu_weight_row<I>(swiglu_tile_output<G>(out0, c), c % (2 * G) >= G, shift);
}

// D's value of output o from its gate and up sums: each scaled and biased (bias [2I]: gate's I
// values, then up's), then silu(gate) * up in fp32 (silu_mul_fp32).
template <int BIAS, long long I>
__device__ __forceinline__ float swiglu_output_value(float gate, float up, float scale, const void* bias, long long o) {
  return silu_mul_fp32(gate * scale + load_bias<BIAS>(bias, o), up * scale + load_bias<BIAS>(bias, I + o));
}

}  // namespace nvfp4k
