// Fused quantizers: a prologue makes a row's values from its inputs (plain tokens, RMSNorm,
// SwiGLU of gate and up, the mHC mix of n_hc streams then RMSNorm), the values are rounded to
// the input's dtype as the unfused op would store them, and each thread quantizes its
// 16-element blocks exactly as quantize does.
// Work items are whole rows, or the PARTS of a row, BLOCKS_PER_CTA blocks each, where nothing
// needs the whole row (no RMSNorm, no computed global scale), so that a few rows still spread
// over the GPU. For mHC a CTA works on rows gridDim.x apart (the host launches about as many
// CTAs as fit at once) and loads the RMSNorm weights once, not per row (common/row_plan.cuh).
// Reductions over a row (sum of squares, amax) use a fixed order that the CPU reference repeats
// (row_quantize_run.cpp).
// For the swizzled layout the items cover the padding rows, and every row its padding blocks.
// With SPREAD = 2 (RMSNorm and mHC on few rows: a warp's serial chain is most of their time) a
// CTA has twice the threads: thread t keeps the reduction order of thread t % THREADS, whose
// blocks the first THREADS threads load and fold as before; after the sum every thread
// normalizes and quantizes one of them (block j = t / THREADS, held in slot 0: an index chosen
// at run time would put the held values in local memory). The same bits, half the chain. SwiGLU
// on few rows spreads the same way, a block's 16 values to two threads.
#pragma once
#include "common/fused_math.cuh"
#include "common/global_scale.cuh"
#include "common/held_blocks.cuh"
#include "common/nvfp4_quantize.cuh"
#include "common/params.cuh"
#include "common/router_ids.cuh"
#include "common/row_plan.cuh"
#include "common/scale_layout.cuh"
#include "common/silu_bf16.cuh"
#include "common/silu_fp16.cuh"
#include "common/vector_io.cuh"

namespace nvfp4k {

// A reduction over the CTA whose result is the same in every thread, in a fixed order: an
// xor butterfly in each warp, then the first WARPS warps' results in warp order (the CPU
// reference repeats it for the sum). `scratch` holds WARPS floats.
struct SumRn {
  __device__ __forceinline__ float operator()(float a, float b) const { return __fadd_rn(a, b); }
};
struct Max {
  __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

template <int WARPS, class Op>
__device__ __forceinline__ float cta_reduce(float v, float* scratch, Op op) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) v = op(v, __shfl_xor_sync(0xFFFFFFFFu, v, offset));
  if (threadIdx.x % 32 == 0 && threadIdx.x / 32 < WARPS) scratch[threadIdx.x / 32] = v;
  __syncthreads();
  float r = 0.0f;  // the identity of both (amaxes are >= 0)
#pragma unroll
  for (int w = 0; w < WARPS; ++w) r = op(r, scratch[w]);
  __syncthreads();  // scratch is reused
  return r;
}

template <int PROLOGUE, int IN_DTYPE, int WEIGHT_DTYPE, long long K, long long INTERLEAVE, int N_HC, int SCALE_LAYOUT,
          int THREADS, long long BLOCKS_PER_CTA, int SPREAD>
struct RowQuantizer {
  static_assert(K % 16 == 0 && THREADS % 32 == 0, "K must be a multiple of 16, THREADS of 32");
  static constexpr long long KBLOCKS = K / 16;
  static constexpr long long KBLOCKS_PADDED = SCALE_LAYOUT == SCALES_LINEAR ? KBLOCKS : (KBLOCKS + 3) / 4 * 4;
  static constexpr long long PARTS = (KBLOCKS + BLOCKS_PER_CTA - 1) / BLOCKS_PER_CTA;
  static constexpr int PER_THREAD = row_per_thread(BLOCKS_PER_CTA, THREADS);
  static constexpr int ESIZE = dtype_bytes<IN_DTYPE>();
  static constexpr bool NORM = PROLOGUE == ROW_RMSNORM || PROLOGUE == ROW_MHC;
  static_assert(!NORM || PARTS == 1, "RMSNorm needs whole rows");
  // The input blocks one output block is made of: gate and up, or the n_hc streams.
  static constexpr int CHUNKS = row_chunks(PROLOGUE, N_HC);
  static constexpr bool HOLD_WEIGHTS = row_hold_weights(NORM, PER_THREAD);
  static constexpr bool PERSISTENT = row_persistent(CHUNKS, HOLD_WEIGHTS);
  // SPREAD = 2 without RMSNorm: 16-bit tokens (MoE staging) or SwiGLU of 16-bit gates and ups
  // in blocks of their own, each block's values shared by two threads (process_halves).
  static constexpr bool HALVES = SPREAD == 2 && !NORM;
  static_assert(SPREAD == 1 || (SPREAD == 2 && NORM && PER_THREAD == 2) ||
                    (HALVES && (PROLOGUE == ROW_PLAIN || (PROLOGUE == ROW_SWIGLU && INTERLEAVE >= 16)) &&
                     IN_DTYPE != DTYPE_FP32 && PER_THREAD == 1),
                "spread: two blocks a thread of a normalizing op, or one block of 16-bit tokens or SwiGLU gates and ups");

  // What an item needs before its blocks are loaded: the mixing weights of its row.
  struct Item {
    float mix[PROLOGUE == ROW_MHC ? N_HC : 1];
  };
  using Chunks = HeldBlocks<IN_DTYPE, CHUNKS>;
  using Values = HeldBlocks<IN_DTYPE, PER_THREAD>;
  using Weights = HeldBlocks<WEIGHT_DTYPE, NORM ? (HOLD_WEIGHTS ? PER_THREAD : 1) : 1>;

  // Block j of this thread in part s (where has_block says it is one), and whether it is: inside
  // the part and the row. (A -1 for "none" cost each use a select and a compare: the kernel is
  // bound by instruction issue.)
  static __device__ __forceinline__ int local_block(int j) {
    return (SPREAD == 1 ? int(threadIdx.x) : int(threadIdx.x) % THREADS) + j * THREADS;
  }
  static __device__ __forceinline__ long long block_of(long long s, int j) { return s * BLOCKS_PER_CTA + local_block(j); }
  static __device__ __forceinline__ bool has_block(long long s, int j) {
    if constexpr (PARTS == 1) return local_block(j) < KBLOCKS;
    return local_block(j) < BLOCKS_PER_CTA && block_of(s, j) < KBLOCKS;
  }
  // Whether this thread loads and folds all of its order thread's blocks (block j in slot j),
  // and the blocks it normalizes and quantizes: OWNED slots from 0, slot o holding block
  // owned_block(o).
  static constexpr int OWNED = SPREAD == 1 ? PER_THREAD : 1;
  static __device__ __forceinline__ bool folds() { return SPREAD == 1 || threadIdx.x < THREADS; }
  static __device__ __forceinline__ int owned_block(int o) { return SPREAD == 1 ? o : int(threadIdx.x) / THREADS; }

  // Where chunk c of output block kb starts in its row.
  static __device__ __forceinline__ long long chunk_offset(const RowQuantizeParams& p, long long kb, int c) {
    if constexpr (PROLOGUE == ROW_SWIGLU) {
      if constexpr (INTERLEAVE >= 16) {
        const unsigned long long e = kb * 16, il = INTERLEAVE;  // kb >= 0: unsigned / and % are shifts for a power of two
        return (long long)(e / il * 2 * il + e % il) + c * INTERLEAVE;
      } else {
        return kb * 32 + c * 16;  // INTERLEAVE divides 16: the block's inputs are 32 contiguous values
      }
    } else if constexpr (PROLOGUE == ROW_MHC) {
      return c * p.hc_stride + kb * 16;
    } else {
      return kb * 16;
    }
  }

  template <int B>
  static __device__ __forceinline__ void load_chunks(const RowQuantizeParams& p, const char* row, long long kb,
                                                     HeldBlocks<IN_DTYPE, B>& in, int at) {
#pragma unroll
    for (int c = 0; c < CHUNKS; ++c) in.load(at + c, row + chunk_offset(p, kb, c) * ESIZE);
  }

  static __device__ __forceinline__ const char* row_of(const RowQuantizeParams& p, long long r) {
    return static_cast<const char*>(p.in) + r * p.in_stride * ESIZE;
  }

  static __device__ __forceinline__ void load(const RowQuantizeParams& p, Item& it, long long item) {
    const long long r = item / PARTS;
    if (r >= p.rows) return;
    if constexpr (PROLOGUE == ROW_MHC) {
#pragma unroll
      for (int i = 0; i < N_HC; ++i) it.mix[i] = p.mix[r * p.mix_stride + i];
    }
  }

  static __device__ __forceinline__ void load_weights(const RowQuantizeParams& p, Weights& w, int j, long long kb) {
    w.load(j, static_cast<const char*>(p.norm_weight) + kb * 16 * dtype_bytes<WEIGHT_DTYPE>());
  }

  // The row's values of block j, rounded to the input dtype, from its inputs (chunk c at in[at + c]).
  template <int B>
  static __device__ __forceinline__ void prologue(const RowQuantizeParams& p, const HeldBlocks<IN_DTYPE, B>& in, int at,
                                                  const Item& it, int j, long long r, long long kb, Values& v) {
    if constexpr (PROLOGUE == ROW_SWIGLU && IN_DTYPE == DTYPE_BF16) {
      silu_mul_bf16<INTERLEAVE>(in.w[at], in.w[at + 1], v.w[j]);
    } else if constexpr (PROLOGUE == ROW_SWIGLU && IN_DTYPE == DTYPE_FP16) {
      silu_mul_fp16<INTERLEAVE>(in.w[at], in.w[at + 1], v.w[j]);
    } else if constexpr (PROLOGUE == ROW_SWIGLU) {
      float a[16], b[16], gate[16], up[16], h[16];
      in.get(at, a);
      in.get(at + 1, b);
#pragma unroll
      for (int i = 0; i < 16; ++i) {
        if constexpr (INTERLEAVE >= 16) {
          gate[i] = a[i], up[i] = b[i];
        } else {
          const int g = i / INTERLEAVE * 2 * INTERLEAVE + i % INTERLEAVE, u = g + INTERLEAVE;
          gate[i] = g < 16 ? a[g] : b[g - 16];
          up[i] = u < 16 ? a[u] : b[u - 16];
        }
      }
#pragma unroll
      for (int i = 0; i < 16; ++i) h[i] = round_to<IN_DTYPE>(silu_mul(gate[i], up[i]));
      v.put(j, h);
    } else if constexpr (PROLOGUE == ROW_MHC) {
      // h = sum_i A[r, i] * X[r, i, :]: products and sums rounded in fp32, streams in order
      float acc[16], x[16];
      in.get(at, x);
#pragma unroll
      for (int e = 0; e < 16; ++e) acc[e] = mul_rn(it.mix[0], x[e]);
#pragma unroll
      for (int c = 1; c < N_HC; ++c) {
        in.get(at + c, x);
#pragma unroll
        for (int e = 0; e < 16; ++e) acc[e] = add_rn(acc[e], mul_rn(it.mix[c], x[e]));
      }
#pragma unroll
      for (int e = 0; e < 16; ++e) acc[e] = round_to<IN_DTYPE>(acc[e]);
      v.put(j, acc);
      if (p.h && j < OWNED) v.store(j, static_cast<char*>(p.h) + (r * p.h_stride + kb * 16) * ESIZE);  // an owned slot
    } else {
      v.copy(j, in, at);
    }
  }

  // y = RN(RN(x * inv_rms) * weight) in place.
  static __device__ __forceinline__ void normalize(const RowQuantizeParams& p, Values& v, int j, long long r,
                                                   long long kb, const Weights& w, int wj, float inv) {
    if constexpr (Values::WORDS && WEIGHT_DTYPE == IN_DTYPE) {
      float x[16];
      v.get(j, x);
#pragma unroll
      for (int i = 0; i < 8; ++i) v.w[j][i] = rmsnorm_pair<IN_DTYPE>(x[2 * i], x[2 * i + 1], inv, w.w[wj][i]);
    } else if constexpr (Values::WORDS && WEIGHT_DTYPE == DTYPE_FP32) {
      float x[16];
      v.get(j, x);
#pragma unroll
      for (int i = 0; i < 8; ++i)
        v.w[j][i] = rmsnorm_pair_fp32_weight<IN_DTYPE>(x[2 * i], x[2 * i + 1], inv, w.x[wj][2 * i], w.x[wj][2 * i + 1]);
    } else {
      float x[16], wv[16];
      v.get(j, x);
      w.get(wj, wv);
#pragma unroll
      for (int i = 0; i < 16; ++i) x[i] = rmsnorm_value<IN_DTYPE>(x[i], inv, wv[i]);
      v.put(j, x);
    }
    if (p.normed) v.store(j, static_cast<char*>(p.normed) + (r * p.normed_stride + kb * 16) * ESIZE);
  }

  // f(acc, block) over a folding thread's blocks in order, from 0.
  template <class F>
  static __device__ __forceinline__ float fold(const Values& v, long long s, F f) {
    float acc = 0.0f;
#pragma unroll
    for (int j = 0; j < PER_THREAD; ++j) {
      if (!has_block(s, j)) break;
      float x[16];
      v.get(j, x);
      acc = f(acc, x);
    }
    return acc;
  }

  // The largest finite magnitude among the blocks this thread owns (0 if none).
  static __device__ __forceinline__ float owned_finite_amax(const Values& v, long long s) {
    float amax = 0.0f;
#pragma unroll
    for (int o = 0; o < OWNED; ++o) {
      if (!has_block(s, owned_block(o))) break;
      amax = fmaxf(amax, v.finite_amax(o));
    }
    return amax;
  }

  // The swizzled layout's padding blocks of row r, zeroed by its last part's threads.
  static __device__ __forceinline__ void zero_padding_scales(const RowQuantizeParams& p, long long r, long long s) {
    if (s == PARTS - 1)
      for (long long kb = KBLOCKS + threadIdx.x; kb < KBLOCKS_PADDED; kb += THREADS * SPREAD)
        p.scales[scale_offset<SCALE_LAYOUT>(r, kb, KBLOCKS)] = 0;
  }

  // Few rows of MoE staging or SwiGLU (HALVES): thread t makes values 8 (t % 2)..+7 of block t / 2
  // of the part, which halves a warp's serial chain of instructions; the block's largest
  // magnitude comes by one shuffle, so the bits are those of the whole block's quantizer.
  static __device__ __forceinline__ void process_halves(const RowQuantizeParams& p, long long item) {
    const int t = threadIdx.x, half = t % 2, local = t / 2;
    const long long r = item / PARTS, s = item % PARTS, kb = s * BLOCKS_PER_CTA + local;
    zero_padding_scales(p, r, s);
    const bool has = local < BLOCKS_PER_CTA && kb < KBLOCKS;
    if (r >= p.rows) {  // a padding row of the swizzled layout
      if (has && half == 0) p.scales[scale_offset<SCALE_LAYOUT>(r, kb, KBLOCKS)] = 0;
      return;
    }
    // every lane runs the quantizer (its shuffle); one without a block, on zeros
    unsigned in[CHUNKS][4] = {}, h[4];
    if (has) {
#pragma unroll
      for (int c = 0; c < CHUNKS; ++c) load_words<4>(row_of(p, r) + (chunk_offset(p, kb, c) + 8 * half) * ESIZE, in[c]);
    }
    if constexpr (PROLOGUE == ROW_PLAIN) {
#pragma unroll
      for (int i = 0; i < 4; ++i) h[i] = in[0][i];
      copy_router_outputs(p, r, s, THREADS * SPREAD);
    } else if constexpr (IN_DTYPE == DTYPE_BF16) {
      silu_mul_bf16<INTERLEAVE, 4>(in[0], in[CHUNKS - 1], h);
    } else {
      silu_mul_fp16<INTERLEAVE, 4>(in[0], in[CHUNKS - 1], h);
    }
    const GlobalScale g(global_scale(p.gscale_mode, p.gscale_value, p.gscale_ptr, r));
    if (g.reciprocal_suffices()) quantize_half<DIVIDE_RECIPROCAL>(p, h, g, r, kb, has);
    else quantize_half<DIVIDE_EITHER>(p, h, g, r, kb, has);
  }

  // The nibbles of this thread's half of block kb (values h) and the scale from its even lane.
  template <int DIVISION>
  static __device__ __forceinline__ void quantize_half(const RowQuantizeParams& p, const unsigned (&h)[4], GlobalScale g,
                                                       long long r, long long kb, bool has) {
    unsigned packed;
    const unsigned char scale = quantize_half_block16_16bit<IN_DTYPE, DIVISION>(h, g, packed);
    if (!has) return;
    const int half = threadIdx.x % 2;
    if (half == 0) p.scales[scale_offset<SCALE_LAYOUT>(r, kb, KBLOCKS)] = scale;
    *reinterpret_cast<unsigned*>(p.packed + r * p.packed_stride + kb * 8 + 4 * half) = packed;
  }

  static __device__ __forceinline__ void process(const RowQuantizeParams& p, const Item& it, long long item,
                                                 const Weights& held_weights, float* scratch) {
    const int t = threadIdx.x;
    const long long r = item / PARTS, s = item % PARTS;
    zero_padding_scales(p, r, s);
    if (r >= p.rows) {  // a padding row of the swizzled layout
#pragma unroll
      for (int o = 0; o < OWNED; ++o)
        if (has_block(s, owned_block(o))) p.scales[scale_offset<SCALE_LAYOUT>(r, block_of(s, owned_block(o)), KBLOCKS)] = 0;
      return;
    }

    // Block j into slot j; a thread that does not fold, its own block into slot 0.
    Values v;
    auto load_block = [&](int j, int slot) {
      const long long kb = block_of(s, j);
      Chunks in;
      load_chunks(p, row_of(p, r), kb, in, 0);
      prologue(p, in, 0, it, slot, r, kb, v);
    };
    if (folds()) {
#pragma unroll
      for (int j = 0; j < PER_THREAD; ++j) {
        if (!has_block(s, j)) break;
        load_block(j, j);
      }
    } else if (has_block(s, owned_block(0))) {
      load_block(owned_block(0), 0);
    }

    if constexpr (NORM) {
      // One row per CTA: the weights' loads go out after the row's, whose reduction then hides them.
      Weights early;
      if constexpr (HOLD_WEIGHTS && !PERSISTENT) {
#pragma unroll
        for (int o = 0; o < OWNED; ++o)
          if (has_block(s, owned_block(o))) load_weights(p, early, o, block_of(s, owned_block(o)));
      }
      const Weights& weights = PERSISTENT ? held_weights : early;
      const float sum_sq = !folds() ? 0.0f : fold(v, s, [](float acc, const float (&x)[16]) {
#pragma unroll
        for (int i = 0; i < 16; ++i) acc = __fmaf_rn(x[i], x[i], acc);
        return acc;
      });
      const float inv = inv_rms(cta_reduce<THREADS / 32>(sum_sq, scratch, SumRn{}), float(K), p.eps);
      if (p.inv_rms && t == 0) p.inv_rms[r] = inv;
#pragma unroll
      for (int o = 0; o < OWNED; ++o) {
        if (!has_block(s, owned_block(o))) break;
        const long long kb = block_of(s, owned_block(o));
        if constexpr (HOLD_WEIGHTS) {
          normalize(p, v, o, r, kb, weights, o, inv);
        } else {
          Weights w;
          load_weights(p, w, 0, kb);
          normalize(p, v, o, r, kb, w, 0, inv);
        }
      }
    }

    float gscale = 0.0f;
    bool computed = false;
    if constexpr (PARTS == 1) {
      if (p.gscale_mode == GSCALE_COMPUTE_PER_ROW) {
        gscale = global_scale_from_amax(cta_reduce<THREADS * SPREAD / 32>(owned_finite_amax(v, s), scratch, Max{}));
        if (t == 0) p.gscale_out[r] = gscale;
        computed = true;
      }
    }
    if (!computed) gscale = global_scale(p.gscale_mode, p.gscale_value, p.gscale_ptr, r);
    const GlobalScale g(gscale);

    if (g.reciprocal_suffices()) quantize_owned<DIVIDE_RECIPROCAL>(p, v, r, s, g);
    else quantize_owned<DIVIDE_EITHER>(p, v, r, s, g);

    if constexpr (PROLOGUE == ROW_PLAIN) copy_router_outputs(p, r, s, THREADS);
  }

  // The blocks this thread owns of row r, part s, quantized and stored.
  template <int DIVISION>
  static __device__ __forceinline__ void quantize_owned(const RowQuantizeParams& p, const Values& v, long long r, long long s,
                                                        GlobalScale g) {
#pragma unroll
    for (int o = 0; o < OWNED; ++o) {
      if (!has_block(s, owned_block(o))) break;
      const long long kb = block_of(s, owned_block(o));
      v.template quantize_store<DIVISION>(o, g, p.packed + r * p.packed_stride + kb * 8,
                                          &p.scales[scale_offset<SCALE_LAYOUT>(r, kb, KBLOCKS)]);
    }
  }

  // MoE staging: row r's top-k ids (and weights) copied by the first part's `threads` threads.
  static __device__ __forceinline__ void copy_router_outputs(const RowQuantizeParams& p, long long r, long long s, int threads) {
    if (s != 0) return;
    for (long long i = threadIdx.x; i < p.topk; i += threads) {
      const long long at = r * p.topk + i;
      store_id(p.topk_ids_out, p.topk_ids_out_64, at, load_id(p.topk_ids, p.topk_ids_64, at));
      if (p.topk_weights) p.topk_weights_out[at] = p.topk_weights[at];
    }
  }
};

template <int PROLOGUE, int IN_DTYPE, int WEIGHT_DTYPE, long long K, long long INTERLEAVE, int N_HC, int SCALE_LAYOUT,
          int THREADS, long long BLOCKS_PER_CTA, int SPREAD = 1>
__device__ __forceinline__ void row_quantize(const RowQuantizeParams& p) {
  using Q = RowQuantizer<PROLOGUE, IN_DTYPE, WEIGHT_DTYPE, K, INTERLEAVE, N_HC, SCALE_LAYOUT, THREADS, BLOCKS_PER_CTA, SPREAD>;
  __shared__ float scratch[THREADS * SPREAD / 32];
  // The host launches THREADS * SPREAD threads: which blocks a thread has is then known at
  // compile time wherever the row divides evenly among them. (Not told to the persistent
  // kernels: ptxas then spills some of the mHC kernels' held weights.)
  if constexpr (!Q::PERSISTENT) __builtin_assume(threadIdx.x < THREADS * SPREAD);
  const long long rows_padded = SCALE_LAYOUT == SCALES_LINEAR ? p.rows : (p.rows + 127) / 128 * 128;
  const long long items = rows_padded * Q::PARTS;
  long long item = blockIdx.x;
  if (item >= items) return;
  typename Q::Weights weights;
  if constexpr (Q::HOLD_WEIGHTS && Q::PERSISTENT) {
#pragma unroll
    for (int o = 0; o < Q::OWNED; ++o)
      if (Q::has_block(0, Q::owned_block(o))) Q::load_weights(p, weights, o, Q::block_of(0, Q::owned_block(o)));
  }
  typename Q::Item cur;
  Q::load(p, cur, item);
  if constexpr (Q::HALVES) {  // one item per CTA
    Q::process_halves(p, item);
  } else if constexpr (!Q::PERSISTENT) {  // one item per CTA (the host launches one CTA per item)
    Q::process(p, cur, item, weights, scratch);
  } else {
    for (;;) {
      Q::process(p, cur, item, weights, scratch);
      item += gridDim.x;
      if (item >= items) break;
      Q::load(p, cur, item);
    }
  }
}

}  // namespace nvfp4k
