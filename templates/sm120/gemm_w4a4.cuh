// NVFP4 x NVFP4 GEMM for sm_120a / sm_121a (RTX 50, RTX PRO 6000, DGX Spark):
// D[M, N] = alpha * ga[m] * gw * A[M, K] . W[N, K]^T (+ bias[N]), A the activations as our
// quantizers write them, W the weight as ModelOpt stores it, either scale layout for each.
//
// The block-scaled MMA (sm120/mma_mxf4nvf4.cuh) takes both operands' E2M1 values and E4M3
// block scales as they are stored: nothing is decoded. Every thread loads: a STAGES-deep ring
// of cp.async groups (16-byte copies of packed rows, 4-byte words of four block scales)
// guarded by one CTA barrier per k-tile; then each warp reads its fragments straight from
// shared memory (rows 80 bytes apart: conflict-free) and issues MT x NT MMAs per k64 step.
// No clusters, no TMA multicast, at most 99 KB of shared memory: what these GPUs have.
//
// With KSPLIT > 1 the grid is of clusters of KSPLIT CTAs (sm_120 has clusters and distributed
// shared memory, only no TMA multicast): the first clusters take KSPLIT whole tiles, one a CTA,
// the later ones split one tile's K among their CTAs, whose partial tiles rank 0 adds in rank
// order through distributed shared memory (deterministic, no workspace) before the epilogue.
//
// Grouped (mixture of experts): the tile scheduler places a CTA's row tile in its group, whose
// weight and global scales it then reads; CTAs past the groups' rows exit at once, and A's
// rows may be gathered through row_index (an index outside [0, a_rows) reads a NaN row).
//
// With EPILOGUE == EPILOGUE_SWIGLU, W is a gate_up weight as stored (N = 2I rows: gate rows
// [0, I), up rows [I, 2I) as ModelOpt stores it, or interleaved in groups of 2^swiglu_shift
// rows) and D [M, I] = silu(gate) * up (common/swiglu_tile.cuh):
// the rows a tile loads are, for each warp's NT x 8 weight rows, the gate rows of its NT x 4
// outputs then their up rows, so a thread's accumulators j and NT / 2 + j are gate and up of
// the same outputs. With ODT DTYPE_NVFP4 D is that quantized (store_swiglu_fp4 below).
//
// With EPILOGUE == EPILOGUE_MOE_COMBINE (contiguous groups, a down weight) D is stored as always,
// then each token whose rows are all stored is combined into its output row
// (common/moe_combine_epilogue.cuh).
//
// With EMULATE the same kernel runs on sm_90a with the MMA replaced by its exact emulation:
// the test facility that checks everything but the one instruction on Hopper.
#pragma once
#include "common/gemm_epilogue.cuh"
#include "common/fp4_output.cuh"
#include "common/global_scale.cuh"
#include "common/moe_combine_epilogue.cuh"
#include "common/ptx/cluster.cuh"
#include "common/ptx/copy.cuh"
#include "common/scale_layout.cuh"
#include "common/swiglu_tile.cuh"
#include "common/tile_scheduler.cuh"
#include "sm120/gemm_params.cuh"
#include "sm120/gemm_tile.cuh"
#include "sm120/mma_mxf4nvf4.cuh"

namespace nvfp4k::sm120 {

template <int ODT_, int BIAS_, long long N_, long long K_, int A_LAYOUT_, int W_LAYOUT_, int BM_, int BN_, int STAGES_,
          bool EMULATE_, int KSPLIT_ = 1, int GROUPED_ = GROUPED_NONE, int GROUPS_ = 0, int EPILOGUE_ = EPILOGUE_NONE>
struct GemmConfig {
  static constexpr int ODT = ODT_, BIAS = BIAS_, A_LAYOUT = A_LAYOUT_, W_LAYOUT = W_LAYOUT_;
  static constexpr int KSPLIT = KSPLIT_;
  static constexpr int GROUPED = GROUPED_, GROUPS = GROUPS_;  // a GroupedLayoutCode of GROUPS groups
  static constexpr int EPILOGUE = EPILOGUE_;                  // a GemmEpilogueCode
  static constexpr bool SWIGLU = EPILOGUE == EPILOGUE_SWIGLU;
  static constexpr long long N = N_, K = K_;
  static constexpr int BM = BM_, BN = BN_, STAGES = STAGES_;
  static constexpr bool EMULATE = EMULATE_;
  static constexpr int BK = GEMM_BK, PITCH = GEMM_ROW_PITCH, SPITCH = GEMM_SCALE_PITCH;
  static constexpr int KTILES = int((K + BK - 1) / BK);
  static constexpr long long KB = K / 16, KB_PADDED = (KB + 3) / 4 * 4;
  static constexpr int WARPS_M = gemm_warps_m(BM), WARPS_N = gemm_warps_n(BM, BN);
  static constexpr int THREADS = gemm_threads(BM, BN);
  static constexpr int MT = gemm_warp_mmas_m(BM), NT = gemm_warp_mmas_n(BM, BN);
  static constexpr int SWIGLU_G = NT * 4;  // SwiGLU: outputs a warp computes (common/swiglu_tile.cuh's G)
  static constexpr int A_AT = 0, W_AT = BM * PITCH, SA_AT = (BM + BN) * PITCH, SW_AT = SA_AT + BM * SPITCH;
  static constexpr int STAGE_BYTES = gemm_stage_bytes(BM, BN);
  // The word of a k-tile's block scales that holds block KB - 1 when K is 32 mod 64: its upper
  // two bytes lie past K (padding, whatever a swizzled buffer holds there) and are masked to 0,
  // so they cannot turn the zero-filled values past K into NaN.
  static constexpr bool K_HALF_STEP = K % 64 != 0;
  static constexpr int HALF_STEP = int((K % BK) / 64);  // the k64 step of the last k-tile holding it
  static constexpr bool W_SCALE_WORDS = W_LAYOUT == SCALES_SWIZZLED128X4 || KB % 4 == 0;
  static_assert(K % 32 == 0 && BM % 16 == 0 && BN % 8 == 0 && MT >= 1 && NT >= 1);
  static_assert(BM % (16 * WARPS_M) == 0 && BN % (8 * WARPS_N) == 0, "warps tile the CTA");
  static_assert(W_LAYOUT != SCALES_PREPACKED && A_LAYOUT != SCALES_PREPACKED, "the ModelOpt / quantizer layouts");
  static_assert(GROUPED == GROUPED_NONE || (GROUPS > 0 && KSPLIT == 1), "grouped layouts run unsplit");
  static_assert(KSPLIT == 1 || (KTILES >= 2 * KSPLIT && BM * BN * 4 <= STAGES * STAGE_BYTES),
                "a split of 2 k-tiles or more; the partial tile fits in the stages");
  static_assert(EMULATE || STAGES * STAGE_BYTES <= int(GEMM_MAX_SHARED), "99 KB of shared memory on sm_120");
  static_assert(EPILOGUE == EPILOGUE_NONE || (SWIGLU && N % 2 == 0 && NT % 2 == 0) ||
                    (EPILOGUE == EPILOGUE_MOE_COMBINE && GROUPED == GROUPED_CONTIGUOUS),
                "SwiGLU: gate and up halves of each warp's MMAs; the MoE combine: contiguous groups");
  static constexpr bool D_FP4 = ODT == DTYPE_NVFP4;  // the SwiGLU epilogue's NVFP4 D
  static_assert(!D_FP4 || (SWIGLU && (N / 2) % 16 == 0 && SWIGLU_G % 16 == 0), "NVFP4 D: SwiGLU's, whole blocks in each warp");
};

// The word of blocks kb .. kb + 3 of row `row` (kb a multiple of 4) into shared memory at
// `dst`: one 4-byte cp.async where the scales come as aligned words, else byte by byte (a
// linear layout whose rows are not a multiple of 4 blocks). Blocks past K and rows out of
// range are 0.
template <int LAYOUT, long long KB>
__device__ __forceinline__ void stage_scale_word(unsigned* dst, const unsigned char* scales, long long row, bool in_rows,
                                                 long long kb, bool words) {
  if (words) {
    constexpr long long KB_PADDED = (KB + 3) / 4 * 4;
    const bool in = in_rows && kb < (LAYOUT == SCALES_SWIZZLED128X4 ? KB_PADDED : KB);
    const long long at = !in ? 0 : LAYOUT == SCALES_SWIZZLED128X4 ? scale_offset_swizzled128x4(row, kb, KB) : row * KB + kb;
    cp_async<4>(dst, scales + at, in ? 4u : 0u);
  } else {
    unsigned word = 0;
#pragma unroll
    for (int j = 0; j < 4; ++j)
      if (in_rows && kb + j < KB) word |= unsigned(scales[scale_offset<LAYOUT>(row, kb + j, KB)]) << (8 * j);
    *dst = word;
  }
}

// Packed rows 0 .. ROWS - 1 of a k-tile, 64 bytes each, into shared memory (PITCH apart):
// 16-byte copies, or 4-byte ones where the rows are not 16-byte aligned. Tile row r is row
// source(r) of src, none where that is negative: zero-filled, as are bytes past K.
template <class C, int ROWS, class Source>
__device__ __forceinline__ void stage_rows(unsigned char* dst, const unsigned char* src, long long stride, Source source,
                                           int kt, bool rows_16b) {
#pragma unroll 1
  for (int c = threadIdx.x; c < ROWS * 4; c += C::THREADS) {
    const int r = c / 4, q = c % 4;
    const long long row = (long long)kt * C::BK + 32 * q < C::K ? source(r) : -1;
    const bool in = row >= 0;
    const unsigned char* from = in ? src + row * stride + kt * GEMM_ROW_BYTES + 16 * q : src;
    unsigned char* to = dst + r * C::PITCH + 16 * q;
    if (rows_16b) {
      cp_async_16(to, from, in ? 16u : 0u);
    } else {
#pragma unroll
      for (int i = 0; i < 4; ++i) cp_async<4>(to + 4 * i, from + (in ? 4 * i : 0), in ? 4u : 0u);
    }
  }
}

// The SwiGLU epilogue's NVFP4 D of a warp: acc[i][j] gate, acc[i][NT / 2 + j] up sums as the
// SwiGLU epilogue reads them, the warp's outputs from D's column `out0` (SWIGLU_G of them, whole
// blocks). A block of a row is acc[i][2b], acc[i][2b + 1] of the 4 lanes of one g: 4 values a
// lane, columns 2t, 2t + 1 and 8 + 2t, 9 + 2t. Its largest magnitude comes by two shuffles; the
// lanes' nibble bytes are gathered into the block's two words, stored by lane t = 0 with the scale.
// Every lane of the warp calls it (rows from m_end on store nothing).
template <class C, int DIVISION>
__device__ __forceinline__ void store_swiglu_fp4(const GemmW4A4Params& p, const float (&acc)[C::MT][C::NT][4], long long m0,
                                                 long long m_end, long long out0, float scale, bool a_per_row,
                                                 GlobalScale d_tensor_scale) {
  const int lane = int(threadIdx.x % 32), g = lane / 4, t = lane % 4;
  const int row_a = int(threadIdx.x / 32) / C::WARPS_N * C::MT * 16 + g;
#pragma unroll
  for (int i = 0; i < C::MT; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const long long m = m0 + row_a + 16 * i + 8 * h;
      const bool stored = m < m_end;
      const float row_scale = a_per_row && stored ? scale * p.a_gscale_ptr[m] : scale;
      const GlobalScale gscale = fp4_output_row_scale(p.d_fp4, d_tensor_scale, stored ? m : m0);
#pragma unroll
      for (int b = 0; b < C::NT / 4; ++b) {
        const long long column = out0 + 16 * b;
        if (column >= C::N / 2) break;  // (uniform over the warp)
        float x[4];
        unsigned amax = 0u, nibbles[4];
#pragma unroll
        for (int v = 0; v < 4; ++v) {
          const int j = 2 * b + v / 2, e = v % 2;
          x[v] = swiglu_output_value<C::BIAS, C::N / 2>(acc[i][j][2 * h + e], acc[i][C::NT / 2 + j][2 * h + e], row_scale, p.bias,
                                                        column + 8 * (v / 2) + 2 * t + e);
          amax = max(amax, magnitude_bits(x[v]));
        }
        amax = max(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, 1));
        amax = max(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, 2));
        const unsigned char s = quantize_block_share<DIVISION, 4>(x, amax, gscale, nibbles);
        unsigned lo = (nibbles[0] | nibbles[1] << 4) << (8 * t), hi = (nibbles[2] | nibbles[3] << 4) << (8 * t);
#pragma unroll
        for (int mask = 1; mask < 4; mask *= 2) {
          lo |= __shfl_xor_sync(0xFFFFFFFFu, lo, mask);
          hi |= __shfl_xor_sync(0xFFFFFFFFu, hi, mask);
        }
        if (t == 0 && stored) {
          unsigned* to = reinterpret_cast<unsigned*>(static_cast<unsigned char*>(p.d) + m * p.d_stride + column / 2);
          to[0] = lo;
          to[1] = hi;
          store_fp4_scale(p.d_fp4, m, column, C::N / 2, s);
        }
      }
    }
}

template <class C>
__device__ __forceinline__ void gemm_w4a4(const GemmW4A4Params& p) {
  extern __shared__ __align__(16) unsigned char smem[];
  constexpr int N_TILES = int((C::N + C::BN - 1) / C::BN);
  ScheduledTile tile;
  const unsigned rank = C::KSPLIT > 1 ? cluster_ctarank() : 0u;
  if constexpr (C::GROUPED == GROUPED_NONE) {
    tile = schedule_tile<N_TILES, C::KSPLIT, C::KTILES>(p.schedule, int(blockIdx.x), rank);
  } else {
    tile = schedule_grouped_tile_warp<N_TILES, C::GROUPED, C::GROUPS, C::KTILES>(p.schedule, int(blockIdx.x));
    if (tile.m0 >= tile.m_end) return;  // past the groups' row tiles: the whole CTA
  }
  const long long m0 = tile.m0, m_end = tile.m_end;
  // the tile's first column of D (SwiGLU's tile computes BN / 2 of them)
  const long long n0 = (long long)tile.n_tile * (C::SWIGLU ? C::BN / 2 : C::BN);
  // the tile's weight: its group's
  const unsigned char* w = p.w + tile.group * C::N * p.w_stride;
  const unsigned char* w_scales = p.w_scales + tile.group * p.w_group_bytes;
  auto stage = [&](int s) { return smem + s * C::STAGE_BYTES; };
  // A's row of tile row r: m0 + r, or gathered through row_index (-1 where it reads nothing:
  // past the tile's rows, or an index outside A, whose row then is NaN)
  const bool gathered = C::GROUPED == GROUPED_CONTIGUOUS && p.row_index;
  auto a_row = [&](int r) -> long long {
    if (m0 + r >= m_end) return -1;
    if (!gathered) return m0 + r;
    const long long i = p.row_index[m0 + r];
    return i >= 0 && i < p.a_rows ? i : -1;
  };
  auto w_row = [&](int r) -> long long {
    if constexpr (C::SWIGLU)
      return swiglu_tile_output<C::SWIGLU_G>(n0, r) < C::N / 2 ? swiglu_tile_row<C::SWIGLU_G, C::N / 2>(n0, r, p.swiglu_shift) : -1;
    else
      return n0 + r < C::N ? n0 + r : -1;
  };

  auto load = [&](int s, int kt) {
    unsigned char* st = stage(s);
    stage_rows<C, C::BM>(st + C::A_AT, p.a, p.a_stride, a_row, kt, p.a_rows_16b != 0);
    stage_rows<C, C::BN>(st + C::W_AT, w, p.w_stride, w_row, kt, true);
    unsigned* sa = reinterpret_cast<unsigned*>(st + C::SA_AT);
    unsigned* sw = reinterpret_cast<unsigned*>(st + C::SW_AT);
#pragma unroll 1
    for (int c = threadIdx.x; c < 2 * (C::BM + C::BN); c += C::THREADS) {
      const int r = c / 2, half = c % 2;
      const long long kb = (long long)kt * (C::BK / 16) + 4 * half;
      if (r < C::BM) {
        const long long row = a_row(r);
        if (gathered && row < 0 && m0 + r < m_end)
          sa[c] = 0x7F7F7F7Fu;  // an index outside A: NaN block scales, a NaN row of D
        else
          stage_scale_word<C::A_LAYOUT, C::KB>(sa + c, p.a_scales, row, row >= 0, kb, p.a_scale_words != 0);
      } else {
        const long long row = w_row(r - C::BM);
        stage_scale_word<C::W_LAYOUT, C::KB>(sw + (c - 2 * C::BM), w_scales, row, row >= 0, kb, C::W_SCALE_WORDS);
      }
    }
  };

  const int warp = int(threadIdx.x / 32), lane = int(threadIdx.x % 32), g = lane / 4, t = lane % 4;
  const int wm = warp / C::WARPS_N, wn = warp % C::WARPS_N;
  const int row_a = wm * C::MT * 16 + g, row_w = wn * C::NT * 8 + g;  // this lane's first rows in the tile

  float acc[C::MT][C::NT][4];
#pragma unroll
  for (int i = 0; i < C::MT; ++i)
#pragma unroll
    for (int j = 0; j < C::NT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

  // this CTA's k-tiles [kt0, kt0 + ktiles): all, or its split's
  const int kt0 = tile.kt_begin, ktiles = tile.kt_end - tile.kt_begin;
#pragma unroll
  for (int i = 0; i < C::STAGES - 1; ++i) {
    if (i < ktiles) load(i, kt0 + i);
    cp_async_commit();
  }
#pragma unroll 1
  for (int x = 0; x < ktiles; ++x) {
    cp_async_wait<C::STAGES - 2>();
    __syncthreads();  // this CTA's k-tile x has landed for every thread's copies; stage (x - 1) is free
    if (x + C::STAGES - 1 < ktiles) load((x + C::STAGES - 1) % C::STAGES, kt0 + x + C::STAGES - 1);
    cp_async_commit();
    const unsigned char* st = stage(x % C::STAGES);
    const int kt = kt0 + x;
#pragma unroll
    for (int s = 0; s < 2; ++s) {
      // fragments of the sm120/mma_mxf4nvf4.cuh layouts: b[r] is W's row, bytes 16 r + 4 t of the
      // step's 32; a[r] A's row + 8 (r % 2), bytes 16 (r / 2) + 4 t; scale words: row g of W,
      // row g + 8 (lane % 2) of A. A's fragments one MMA row at a time: fewer live registers.
      unsigned b[C::NT][2], sfb[C::NT];
#pragma unroll
      for (int j = 0; j < C::NT; ++j) {
#pragma unroll
        for (int r = 0; r < 2; ++r)
          b[j][r] = *reinterpret_cast<const unsigned*>(st + C::W_AT + (row_w + 8 * j) * C::PITCH + 32 * s + 16 * r + 4 * t);
        sfb[j] = *reinterpret_cast<const unsigned*>(st + C::SW_AT + (row_w + 8 * j) * C::SPITCH + 4 * s);
        if (C::K_HALF_STEP && s == C::HALF_STEP && kt == C::KTILES - 1) sfb[j] &= 0xFFFFu;
      }
#pragma unroll
      for (int i = 0; i < C::MT; ++i) {
        unsigned a[4];
#pragma unroll
        for (int r = 0; r < 4; ++r)
          a[r] = *reinterpret_cast<const unsigned*>(st + C::A_AT + (row_a + 16 * i + 8 * (r % 2)) * C::PITCH + 32 * s +
                                                    16 * (r / 2) + 4 * t);
        unsigned sfa = *reinterpret_cast<const unsigned*>(st + C::SA_AT + (row_a + 16 * i + 8 * (lane % 2)) * C::SPITCH + 4 * s);
        if (C::K_HALF_STEP && s == C::HALF_STEP && kt == C::KTILES - 1) sfa &= 0xFFFFu;
#pragma unroll
        for (int j = 0; j < C::NT; ++j) mma_m16n8k64<C::EMULATE>(acc[i][j], a, b[j], sfa, sfb[j]);
      }
    }
  }
  cp_async_wait<0>();

  if (C::KSPLIT > 1 && tile.split) {  // uniform over the cluster
    // the partial tiles in the (now idle) stages, one float per thread and accumulator, which
    // the same thread of rank 0 adds in rank order
    float* partial = reinterpret_cast<float*>(smem);
    __syncthreads();  // every warp is done reading the stages
    if (rank != 0) {
#pragma unroll
      for (int i = 0; i < C::MT; ++i)
#pragma unroll
        for (int j = 0; j < C::NT; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) partial[((i * C::NT + j) * 4 + e) * C::THREADS + threadIdx.x] = acc[i][j][e];
    }
    cluster_sync();
    if (rank == 0) {
      for (unsigned r = 1; r < unsigned(C::KSPLIT); ++r)
#pragma unroll
        for (int i = 0; i < C::MT; ++i)
#pragma unroll
          for (int j = 0; j < C::NT; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e)
              acc[i][j][e] += ld_shared_cluster(&partial[((i * C::NT + j) * 4 + e) * C::THREADS + threadIdx.x], r);
    }
    cluster_sync<false>();  // peers keep their shared memory until rank 0 has read it
    if (rank != 0) return;
  }

  // acc[i][j][e] is D[m0 + row_a + 16 i + 8 (e / 2), n0 + row_w - g + 8 j + 2 t + e % 2]
  // (a per-group scale, W's or A's, is the tile's group's: the one-per-row read at its group)
  const bool a_per_row = p.a_gscale_mode == GSCALE_DEVICE_PER_ROW;
  const float scale = p.alpha * global_scale(p.w_gscale_mode, p.w_gscale_value, p.w_gscale_ptr, tile.group) *
                      (a_per_row ? 1.0f : global_scale(p.a_gscale_mode, p.a_gscale_value, p.a_gscale_ptr, tile.group));
  if constexpr (C::D_FP4) {
    // one uniform branch a warp to a copy without IEEE divisions where its rows' global scales
    // allow (fp4_output_row_reciprocal)
    const GlobalScale d_tensor_scale = fp4_output_tensor_scale(p.d_fp4);
    bool reciprocal = true;
#pragma unroll
    for (int i = 0; i < C::MT; ++i)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const long long m = m0 + row_a + 16 * i + 8 * h;
        if (m < m_end) reciprocal = reciprocal && fp4_output_row_reciprocal(p.d_fp4, d_tensor_scale, m);
      }
    const long long out0 = n0 + wn * C::SWIGLU_G;
    if (__all_sync(0xFFFFFFFFu, reciprocal))
      store_swiglu_fp4<C, DIVIDE_RECIPROCAL>(p, acc, m0, m_end, out0, scale, a_per_row, d_tensor_scale);
    else
      store_swiglu_fp4<C, DIVIDE_EITHER>(p, acc, m0, m_end, out0, scale, a_per_row, d_tensor_scale);
  } else {
#pragma unroll
    for (int i = 0; i < C::MT; ++i)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const long long m = m0 + row_a + 16 * i + 8 * h;
        if (m >= m_end) continue;
        const float row_scale = a_per_row ? scale * p.a_gscale_ptr[m] : scale;
        if constexpr (C::SWIGLU) {
          // acc[i][j] gate, acc[i][NT / 2 + j] up of D's columns n0 + wn G + 8 j + 2 t + e
#pragma unroll
          for (int j = 0; j < C::NT / 2; ++j)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              const long long n = n0 + wn * C::SWIGLU_G + 8 * j + 2 * t + e;
              if (n < C::N / 2)
                store_element<C::ODT>(p.d, m * p.d_stride + n,
                                      swiglu_output_value<C::BIAS, C::N / 2>(acc[i][j][2 * h + e], acc[i][C::NT / 2 + j][2 * h + e],
                                                                             row_scale, p.bias, n));
            }
          continue;
        }
#pragma unroll
        for (int j = 0; j < C::NT; ++j)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const long long n = n0 + row_w - g + 8 * j + 2 * t + e;
            if (n < C::N)
              store_element<C::ODT>(p.d, m * p.d_stride + n, acc[i][j][2 * h + e] * row_scale + load_bias<C::BIAS>(p.bias, n));
          }
      }
    if constexpr (C::EPILOGUE == EPILOGUE_MOE_COMBINE) {
      // the tile's rows counted, and the tokens they complete combined (a CTA has one tile)
      PendingCounts<C::BM, C::THREADS> counts;
      count_tile<C::BN>(p.combine, m0, m_end, tile.n_tile, C::N, int(threadIdx.x), counts, [] { __syncthreads(); });
      finish_counts<C::ODT, C::BN>(p.combine, {p.d, p.d_stride, C::N}, counts, int(threadIdx.x));
    }
  }
}

}  // namespace nvfp4k::sm120
