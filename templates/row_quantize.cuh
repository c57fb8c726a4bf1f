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

// The row's blocks of 16 a thread holds: 16-bit values two per word, as loaded or as the
// prologue rounded them (every value is one the input dtype represents, so packing is exact),
// fp32 values as floats; quantized as quantize does from either.
template <int DTYPE, int BLOCKS>
struct HeldBlocks {
  static constexpr bool WORDS = DTYPE != DTYPE_FP32;
  float x[WORDS ? 1 : BLOCKS][16];
  unsigned w[WORDS ? BLOCKS : 1][8];

  __device__ __forceinline__ void load(int j, const char* src) {
    if constexpr (WORDS) load_words<8>(src, w[j]);
    else load_as_float<DTYPE, 16>(src, x[j]);
  }
  __device__ __forceinline__ void put(int j, const float (&v)[16]) {
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      if constexpr (WORDS) {
        if (i % 2 == 0) w[j][i / 2] = DTYPE == DTYPE_BF16 ? pack_bf16x2(v[i], v[i + 1]) : pack_fp16x2(v[i], v[i + 1]);
      } else {
        x[j][i] = v[i];
      }
    }
  }
  __device__ __forceinline__ void get(int j, float (&v)[16]) const {
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      if constexpr (WORDS) {
        const unsigned h = i % 2 ? w[j][i / 2] >> 16 : w[j][i / 2] & 0xFFFFu;
        v[i] = DTYPE == DTYPE_BF16 ? bf16_bits_to_float(h) : fp16_bits_to_float(h);
      } else {
        v[i] = x[j][i];
      }
    }
  }
  __device__ __forceinline__ unsigned char quantize(int j, float gscale, unsigned (&packed)[2]) const {
    if constexpr (WORDS) return quantize_block16_16bit<DTYPE>(w[j], gscale, packed);
    else return quantize_block16(x[j], gscale, packed);
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
    if constexpr (PROLOGUE == ROW_SWIGLU) {
      float gate[16], up[16], v[16];
      load_gate_up<IN_DTYPE, K, GROUP>(row, kb, gate, up);
#pragma unroll
      for (int i = 0; i < 16; ++i) v[i] = round_to<IN_DTYPE>(silu_mul(gate[i], up[i]));
      held.put(j, v);
    } else {
      held.load(j, row + kb * 16 * ESIZE);
    }
  }

  if constexpr (PROLOGUE == ROW_RMSNORM) {
    // Up to two blocks per thread the weights' loads go out before the row's reduction, whose
    // latency then hides them; more would spill at 1024 threads.
    constexpr bool EARLY_WEIGHTS = PER_THREAD <= 2;
    const char* weight = static_cast<const char*>(p.norm_weight);
    HeldBlocks<IN_DTYPE, EARLY_WEIGHTS ? PER_THREAD : 1> weights;
    if constexpr (EARLY_WEIGHTS) {
#pragma unroll
      for (int j = 0; j < PER_THREAD; ++j)
        if (t + (long long)j * THREADS < KBLOCKS) weights.load(j, weight + (t + (long long)j * THREADS) * 16 * ESIZE);
    }
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
      const int wj = EARLY_WEIGHTS ? j : 0;
      if constexpr (!EARLY_WEIGHTS) weights.load(0, weight + kb * 16 * ESIZE);
      float v[16];
      held.get(j, v);
      if constexpr (HeldBlocks<IN_DTYPE, PER_THREAD>::WORDS) {
#pragma unroll
        for (int i = 0; i < 8; ++i) held.w[j][i] = rmsnorm_pair<IN_DTYPE>(v[2 * i], v[2 * i + 1], inv, weights.w[wj][i]);
        if (p.normed) store_words<8>(static_cast<char*>(p.normed) + (r * p.normed_stride + kb * 16) * ESIZE, held.w[j]);
      } else {
#pragma unroll
        for (int i = 0; i < 16; ++i) v[i] = rmsnorm_value<IN_DTYPE>(v[i], inv, weights.x[wj][i]);
        if (p.normed) store_converted<IN_DTYPE, 16>(static_cast<char*>(p.normed) + (r * p.normed_stride + kb * 16) * ESIZE, v);
        held.put(j, v);
      }
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
    unsigned packed[2];
    p.scales[scale_offset<SCALE_LAYOUT>(r, kb, KBLOCKS)] = held.quantize(j, gscale, packed);
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
