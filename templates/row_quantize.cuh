// Fused quantizers, one CTA per row: a prologue reads the row once into registers (plain
// tokens, RMSNorm, or SwiGLU of gate and up), the row's values are rounded to the input's
// dtype as the unfused op would store them, and each thread quantizes its 16-element blocks
// t, t + THREADS, ... exactly as quantize does. Reductions over the row (sum of squares, amax)
// use a fixed order that the CPU reference repeats (see row_quantize_op.cpp). For the
// swizzled layout the grid covers the padding rows, and every row its padding blocks.
#pragma once
#include "common/fused_math.cuh"
#include "common/global_scale.cuh"
#include "common/nvfp4_quantize.cuh"
#include "common/params.cuh"
#include "common/scale_layout.cuh"
#include "common/vector_io.cuh"

namespace nvfp4k {

// A reduction over the CTA whose result is the same in every thread, in a fixed order: an
// xor butterfly in each warp, then the warps' results in warp order (the CPU reference
// repeats it for the sum). `scratch` holds THREADS / 32 floats.
struct SumRn {
  __device__ __forceinline__ float operator()(float a, float b) const { return __fadd_rn(a, b); }
};
struct Max {
  __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

template <int THREADS, class Op>
__device__ __forceinline__ float cta_reduce(float v, float* scratch, Op op) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) v = op(v, __shfl_xor_sync(0xFFFFFFFFu, v, offset));
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
  __syncthreads();
  float r = 0.0f;  // the identity of both (amaxes are >= 0)
#pragma unroll
  for (int w = 0; w < THREADS / 32; ++w) r = op(r, scratch[w]);
  __syncthreads();  // scratch is reused
  return r;
}

// The 16 gate and up values of output block kb, from a row laid out in groups of GROUP gate
// values followed by GROUP up values (GROUP = K: the two halves).
template <int IN_DTYPE, long long K, long long GROUP>
__device__ __forceinline__ void load_gate_up(const char* row, long long kb, float (&gate)[16], float (&up)[16]) {
  constexpr int ESIZE = dtype_bytes<IN_DTYPE>();
  if constexpr (GROUP >= 16) {
    const long long e = kb * 16, at = e / GROUP * 2 * GROUP + e % GROUP;
    load_as_float<IN_DTYPE, 16>(row + at * ESIZE, gate);
    load_as_float<IN_DTYPE, 16>(row + (at + GROUP) * ESIZE, up);
  } else {  // GROUP divides 16: the block's inputs are 32 contiguous values
    float both[32];
    load_as_float<IN_DTYPE, 32>(row + kb * 32 * ESIZE, both);
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      gate[i] = both[i / GROUP * 2 * GROUP + i % GROUP];
      up[i] = both[i / GROUP * 2 * GROUP + GROUP + i % GROUP];
    }
  }
}

// The row's blocks of 16 a thread holds. Beyond two blocks, 16-bit inputs stay packed two
// per register (every value is one the input dtype represents: loaded, or rounded to it by
// the prologue, so packing is exact), which keeps 4 blocks in 32 registers at 1024 threads.
template <int DTYPE, int BLOCKS>
struct HeldBlocks {
  static constexpr bool PACKED = DTYPE != DTYPE_FP32 && BLOCKS > 2;
  float x[PACKED ? 1 : BLOCKS][16];
  unsigned bits[PACKED ? BLOCKS : 1][8];

  __device__ __forceinline__ void put(int j, const float (&v)[16]) {
    if constexpr (PACKED) {
#pragma unroll
      for (int i = 0; i < 8; ++i)
        bits[j][i] = DTYPE == DTYPE_BF16 ? pack_bf16x2(v[2 * i], v[2 * i + 1]) : pack_fp16x2(v[2 * i], v[2 * i + 1]);
    } else {
#pragma unroll
      for (int i = 0; i < 16; ++i) x[j][i] = v[i];
    }
  }
  __device__ __forceinline__ void get(int j, float (&v)[16]) const {
    if constexpr (PACKED) {
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        v[2 * i] = DTYPE == DTYPE_BF16 ? bf16_bits_to_float(bits[j][i] & 0xFFFFu) : fp16_bits_to_float(bits[j][i] & 0xFFFFu);
        v[2 * i + 1] = DTYPE == DTYPE_BF16 ? bf16_bits_to_float(bits[j][i] >> 16) : fp16_bits_to_float(bits[j][i] >> 16);
      }
    } else {
#pragma unroll
      for (int i = 0; i < 16; ++i) v[i] = x[j][i];
    }
  }
};

template <int PROLOGUE, int IN_DTYPE, long long K, long long GROUP, int SCALE_LAYOUT, int THREADS>
__device__ __forceinline__ void row_quantize(const RowQuantizeParams& p) {
  static_assert(K % 16 == 0 && THREADS % 32 == 0, "K must be a multiple of 16, THREADS of 32");
  constexpr long long KBLOCKS = K / 16;
  constexpr long long KBLOCKS_PADDED = SCALE_LAYOUT == SCALES_LINEAR ? KBLOCKS : (KBLOCKS + 3) / 4 * 4;
  constexpr int PER_THREAD = int((KBLOCKS + THREADS - 1) / THREADS);
  constexpr int ESIZE = dtype_bytes<IN_DTYPE>();
  __shared__ float scratch[THREADS / 32];
  const long long r = blockIdx.x;
  const int t = threadIdx.x;
  for (long long kb = KBLOCKS + t; kb < KBLOCKS_PADDED; kb += THREADS) p.scales[scale_offset<SCALE_LAYOUT>(r, kb, KBLOCKS)] = 0;
  if (r >= p.rows) {  // a padding row of the swizzled layout
    for (long long kb = t; kb < KBLOCKS; kb += THREADS) p.scales[scale_offset<SCALE_LAYOUT>(r, kb, KBLOCKS)] = 0;
    return;
  }

  const char* row = static_cast<const char*>(p.in) + r * p.in_stride * ESIZE;
  HeldBlocks<IN_DTYPE, PER_THREAD> held;
#pragma unroll
  for (int j = 0; j < PER_THREAD; ++j) {
    const long long kb = t + (long long)j * THREADS;
    if (kb >= KBLOCKS) break;
    float v[16];
    if constexpr (PROLOGUE == ROW_SWIGLU) {
      float gate[16], up[16];
      load_gate_up<IN_DTYPE, K, GROUP>(row, kb, gate, up);
#pragma unroll
      for (int i = 0; i < 16; ++i) v[i] = round_to<IN_DTYPE>(silu_mul(gate[i], up[i]));
    } else {
      load_as_float<IN_DTYPE, 16>(row + kb * 16 * ESIZE, v);
    }
    held.put(j, v);
  }

  if constexpr (PROLOGUE == ROW_RMSNORM) {
    float sum_sq = 0.0f;
#pragma unroll
    for (int j = 0; j < PER_THREAD; ++j) {
      if (t + (long long)j * THREADS >= KBLOCKS) break;
      float v[16];
      held.get(j, v);
#pragma unroll
      for (int i = 0; i < 16; ++i) sum_sq = __fmaf_rn(v[i], v[i], sum_sq);
    }
    const float inv = inv_rms(cta_reduce<THREADS>(sum_sq, scratch, SumRn{}), float(K), p.eps);
    if (p.inv_rms && t == 0) p.inv_rms[r] = inv;
#pragma unroll
    for (int j = 0; j < PER_THREAD; ++j) {
      const long long kb = t + (long long)j * THREADS;
      if (kb >= KBLOCKS) break;
      float v[16], w[16];
      held.get(j, v);
      load_as_float<IN_DTYPE, 16>(static_cast<const char*>(p.norm_weight) + kb * 16 * ESIZE, w);
#pragma unroll
      for (int i = 0; i < 16; ++i) v[i] = rmsnorm_value<IN_DTYPE>(v[i], inv, w[i]);
      if (p.normed) store_converted<IN_DTYPE, 16>(static_cast<char*>(p.normed) + (r * p.normed_stride + kb * 16) * ESIZE, v);
      held.put(j, v);
    }
  }

  float gscale;
  if (p.gscale_mode == GSCALE_COMPUTE_PER_ROW) {
    float amax = 0.0f;
#pragma unroll
    for (int j = 0; j < PER_THREAD; ++j) {
      if (t + (long long)j * THREADS >= KBLOCKS) break;
      float v[16];
      held.get(j, v);
      amax = fmaxf(amax, finite_amax(v));
    }
    gscale = global_scale_from_amax(cta_reduce<THREADS>(amax, scratch, Max{}));
    if (t == 0) p.gscale_out[r] = gscale;
  } else {
    gscale = global_scale(p.gscale_mode, p.gscale_value, p.gscale_ptr, r);
  }

#pragma unroll
  for (int j = 0; j < PER_THREAD; ++j) {
    const long long kb = t + (long long)j * THREADS;
    if (kb >= KBLOCKS) break;
    float v[16];
    held.get(j, v);
    unsigned packed[2];
    p.scales[scale_offset<SCALE_LAYOUT>(r, kb, KBLOCKS)] = quantize_block16(v, gscale, packed);
    *reinterpret_cast<uint2*>(p.packed + r * p.packed_stride + kb * 8) = make_uint2(packed[0], packed[1]);
  }

  if constexpr (PROLOGUE == ROW_PLAIN) {
    for (long long i = t; i < p.topk; i += THREADS) {
      p.topk_ids_out[r * p.topk + i] = p.topk_ids[r * p.topk + i];
      if (p.topk_weights) p.topk_weights_out[r * p.topk + i] = p.topk_weights[r * p.topk + i];
    }
  }
}

}  // namespace nvfp4k
