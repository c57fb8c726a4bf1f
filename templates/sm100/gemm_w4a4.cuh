// NVFP4 x NVFP4 GEMM for sm_100a / sm_103a (B200, GB200, B300):
// D[M, N] = alpha * ga[m] * gw * A[M, K] . W[N, K]^T (+ bias[N]), A the activations as our
// quantizers write them, W the weight as ModelOpt stores it, either scale layout for each.
//
// Persistent and warp-specialized (sm100/gemm_tile.cuh): each CTA walks the tiles
// blockIdx.x, + gridDim.x, ... in the front's tile order (common/tile_scheduler.cuh); with
// CTAS = 2 each CTA pair (a cluster of 2) walks them, a tile of 256 rows (sm100/cta_pair.cuh):
// each CTA loads its 128 rows of A and half of the tile's weight rows, and keeps its rows of D;
// the even CTA's warp 1 issues the pair's MMAs.
//   warp 0     TMA: A's and W's k-tiles into a STAGES-deep ring (full / empty mbarriers);
//   warps 6-7  the k-tiles' block scales into their 128 x 4 atoms (the ring's same stages);
//   warp 1     allocates the tensor memory; per k-tile copies the scales to it (tcgen05.cp),
//              issues 4 block-scaled MMAs of K 64 into an accumulator in tensor memory and
//              commits them to the stage's empty barrier; a tile's last commit fills its
//              accumulator's acc_full (two accumulators, used in turn, where they fit);
//   warps 2-5  the epilogue: the accumulator's rows (tcgen05.ld, a warp its 32 lanes) scaled,
//              biased and stored (16 bytes at a time where D allows); then the accumulator's
//              acc_empty lets a later tile's MMAs in.
// K must be a multiple of 64 (whole MMAs; no block scales past K to mask).
//
// Grouped (mixture of experts, contiguous or masked): the tile scheduler places a tile's rows
// in its group, whose weight rows (group g's are rows [g N, (g + 1) N) of W) and scales it then
// reads; tiles past the groups' rows are skipped by every warp alike. A tile's TMA box may take
// rows past its group's (another group's, or past M: zeros): computed, never stored. A
// contiguous call's row_index gathers A's rows: warp 0 copies them (cp.async, 16 bytes, into
// the places TMA's 128-byte swizzle would) instead of TMA; an index outside [0, a_rows) reads
// zeros under NaN block scales, the NaN row the API promises.
//
// With EPILOGUE == EPILOGUE_SWIGLU, W is a gate_up weight as stored (N = 2I rows: gate rows
// [0, I), up rows [I, 2I) as ModelOpt stores it, or interleaved in groups of 2^swiglu_shift
// rows) and D [M, I] = silu(gate) * up (common/swiglu_tile.cuh): a tile's BN weight rows are
// the gate rows of its BN / 2 outputs, then their up rows, loaded as two TMA boxes of BN / 2
// rows through 3D maps that pick the gate rows and the up rows out of either order (a pair's
// CTAs one each: the even CTA gate's, the odd up's), so accumulator columns j and BN / 2 + j
// of a thread's row are gate and up of one output.
// With ODT DTYPE_NVFP4 D is that quantized (common/fp4_output.cuh): a thread's 32 columns of
// its row are two whole blocks, quantized and stored by the thread.
//
// With EPILOGUE == EPILOGUE_MOE_COMBINE (contiguous groups, a down weight) D is stored as always,
// then each token whose rows are all stored is combined into its output row
// (common/moe_combine_epilogue.cuh): the epilogue warps count a tile's rows after storing it and
// read those counts back after the next tile's.
//
// With EMULATE the same kernel runs on sm_90a with the tcgen05 instructions replaced by their
// exact emulation (sm100/tcgen05_emulated.cuh): the test facility that checks everything but
// those instructions on Hopper.
#pragma once
#include "common/gemm_epilogue.cuh"
#include "common/fp4_output.cuh"
#include "common/global_scale.cuh"
#include "common/moe_combine_epilogue.cuh"
#include "common/ptx/barrier.cuh"
#include "common/ptx/copy.cuh"
#include "common/scale_layout.cuh"
#include "common/swiglu_tile.cuh"
#include "common/tile_scheduler.cuh"
#include "sm100/cta_pair.cuh"
#include "sm100/gemm_params.cuh"
#include "sm100/gemm_tile.cuh"
#include "sm100/tcgen05.cuh"

namespace nvfp4k::sm100 {

constexpr unsigned kCombineBarrier = 1;  // the epilogue warps' named barrier (EPILOGUE_MOE_COMBINE)

template <int ODT_, int BIAS_, long long N_, long long K_, int A_LAYOUT_, int W_LAYOUT_, int BN_, int STAGES_, int CTAS_,
          bool EMULATE_, int GROUPED_ = GROUPED_NONE, int GROUPS_ = 0, int EPILOGUE_ = EPILOGUE_NONE>
struct GemmConfig {
  static constexpr int ODT = ODT_, BIAS = BIAS_, A_LAYOUT = A_LAYOUT_, W_LAYOUT = W_LAYOUT_;
  static constexpr int GROUPED = GROUPED_, GROUPS = GROUPS_;  // a GroupedLayoutCode of GROUPS groups
  static constexpr int EPILOGUE = EPILOGUE_;                  // a GemmEpilogueCode
  static constexpr bool SWIGLU = EPILOGUE == EPILOGUE_SWIGLU;
  static constexpr long long N = N_, K = K_;
  // D's columns, and the weight rows of one TMA box: SwiGLU's tile loads its gate rows and its
  // up rows as a box each (G = BN / 2 of common/swiglu_tile.cuh)
  static constexpr long long D_COLUMNS = SWIGLU ? N / 2 : N;
  static constexpr int BN = BN_, STAGES = STAGES_;
  static constexpr int CTAS = CTAS_;                 // the MMA's .cta_group: 1, or 2 (a pair, M 256)
  static constexpr int W_ROWS = gemm_w_rows(BN, CTAS);  // the weight rows this CTA loads
  static constexpr int W_BOX_ROWS = SWIGLU ? BN / 2 : W_ROWS;
  static constexpr bool EMULATE = EMULATE_;
  static constexpr int KTILES = int((K + GEMM_BK - 1) / GEMM_BK);
  static constexpr long long KB = K / 16;
  static constexpr int N_TILES = int((N + BN - 1) / BN);
  static constexpr int W_ATOMS = gemm_w_scale_atoms(BN);
  static constexpr unsigned STAGE_BYTES = gemm_stage_bytes(BN, CTAS);
  static constexpr unsigned A_AT = 0, W_AT = gemm_a_bytes(), SA_AT = W_AT + gemm_w_bytes(BN, CTAS),
                            SW_AT = SA_AT + GEMM_STEPS * 512u;
  static constexpr unsigned TMEM_COLUMNS = gemm_tmem_allocation(BN, STAGES);
  static constexpr unsigned SCALE_COLUMNS = gemm_scale_columns(BN);
  static constexpr int ACCUMULATORS = gemm_accumulators(BN, STAGES);
  static_assert(K % GEMM_MMA_K == 0, "whole MMAs of K 64");
  static_assert(BN % 32 == 0 && BN >= 32 && BN <= 256, "the MMA's N, read back 32 columns at a time");
  static_assert(CTAS == 1 || (CTAS == 2 && W_ROWS % 8 == 0), "a pair's CTAs each load whole 8-row groups of W");
  static_assert(STAGE_BYTES % 1024 == 0, "stages keep the 128-byte swizzle's 1024-byte alignment");
  static_assert(gemm_tmem_columns_used(BN, STAGES) <= int(GEMM_TMEM_COLUMNS), "512 columns of tensor memory");
  static_assert(gemm_shared_bytes(BN, STAGES, CTAS) <= GEMM_MAX_SHARED, "227 KB of shared memory");
  static_assert(GROUPED == GROUPED_NONE || ((GROUPED == GROUPED_CONTIGUOUS || GROUPED == GROUPED_MASKED) && GROUPS > 0),
                "the contiguous and masked grouped layouts");
  static_assert(EPILOGUE == EPILOGUE_NONE || (SWIGLU && N % 2 == 0 && (BN / 2) % 32 == 0) ||
                    (EPILOGUE == EPILOGUE_MOE_COMBINE && GROUPED == GROUPED_CONTIGUOUS),
                "SwiGLU: gate and up halves, read back 32 columns of each at a time; the MoE combine: contiguous groups");
  static constexpr bool D_FP4 = ODT == DTYPE_NVFP4;  // the SwiGLU epilogue's NVFP4 D
  static_assert(!D_FP4 || (SWIGLU && D_COLUMNS % 16 == 0), "NVFP4 D: SwiGLU's, whole blocks of 16 columns");
};

// Row m's blocks of D at columns column, column + 16 (those before D_COLUMNS), held by this
// thread (x[32]: D's row has one thread), quantized with global scale g and stored: 8 packed
// bytes and a scale each.
template <class C, int DIVISION>
__device__ __forceinline__ void store_fp4_row_blocks(const GemmSm100Params& p, long long m, long long column, const float (&x)[32],
                                                     GlobalScale g) {
#pragma unroll
  for (int b = 0; b < 2; ++b) {
    if (column + 16 * b >= C::D_COLUMNS) break;
    unsigned packed[2];
    const unsigned char scale = quantize_block16<DIVISION>(reinterpret_cast<const float(&)[16]>(x[16 * b]), g, packed);
    unsigned* to = reinterpret_cast<unsigned*>(static_cast<unsigned char*>(p.d) + m * p.d_stride + (column + 16 * b) / 2);
    to[0] = packed[0];
    to[1] = packed[1];
    store_fp4_scale(p.d_fp4, m, column + 16 * b, C::D_COLUMNS, scale);
  }
}

// The weight row (in its group) of tile column c (0 <= c < BN) of output tile n_tile; past W's
// rows (or SwiGLU's I outputs) it is never stored, and its block scales are loaded as 0.
template <class C>
__device__ __forceinline__ long long tile_w_row(const GemmSm100Params& p, int n_tile, int c) {
  if constexpr (C::SWIGLU)
    return swiglu_tile_row<C::BN / 2, C::N / 2>((long long)n_tile * (C::BN / 2), c, p.swiglu_shift);
  else
    return (long long)n_tile * C::BN + c;
}
template <class C>
__device__ __forceinline__ bool tile_w_row_in(int n_tile, int c) {
  if constexpr (C::SWIGLU)
    return swiglu_tile_output<C::BN / 2>((long long)n_tile * (C::BN / 2), c) < C::N / 2;
  else
    return (long long)n_tile * C::BN + c < C::N;
}

// Tile t of the grid's order, t increasing from call to call: every lane of the calling warp
// gets it (a grouped layout's is found by the whole warp, its cursor reading each group's size
// once). No rows (m0 == m_end): past the groups' row tiles, and so is every later one.
template <class C>
__device__ __forceinline__ ScheduledTile gemm_tile(const GemmSm100Params& p, int t, KernelTileCursor<C::GROUPED, C::GROUPS>& cursor) {
  if constexpr (C::GROUPED == GROUPED_NONE)
    return schedule_tile<C::N_TILES, 1, C::KTILES>(p.schedule, t, 0);
  else
    return cursor.place(p.schedule, unplaced_grouped_tile(t, C::N_TILES, C::KTILES));
}

// One word of 4 block scales (kb a multiple of 4) of `row`, or 0 outside the rows.
template <int LAYOUT, long long KB>
__device__ __forceinline__ unsigned scale_word(const unsigned char* scales, long long row, bool in_rows, long long kb,
                                               bool words) {
  if (!in_rows) return 0u;
  if (words)
    return *reinterpret_cast<const unsigned*>(scales + (LAYOUT == SCALES_SWIZZLED128X4 ? scale_offset_swizzled128x4(row, kb, KB)
                                                                                       : row * KB + kb));
  unsigned word = 0;
#pragma unroll
  for (int j = 0; j < 4; ++j) word |= unsigned(scales[scale_offset<LAYOUT>(row, kb + j, KB)]) << (8 * j);
  return word;
}

template <class C>
__device__ __forceinline__ void gemm_w4a4(const GemmSm100Params& p) {
  extern __shared__ unsigned char smem_raw[];
  // the stages 1024-byte aligned in the shared window (the 128-byte swizzle's pattern, base offset 0)
  unsigned char* smem = smem_raw + ((1024u - (smem_u32(smem_raw) & 1023u)) & 1023u);
  unsigned long long* full = reinterpret_cast<unsigned long long*>(smem + C::STAGES * C::STAGE_BYTES);
  unsigned long long* empty = full + C::STAGES;
  unsigned long long* acc_full = empty + C::STAGES;  // [2]
  unsigned long long* acc_empty = acc_full + 2;      // [2]
  unsigned* tmem_slot = reinterpret_cast<unsigned*>(acc_empty + 2);
  const int warp = int(threadIdx.x / 32), lane = int(threadIdx.x % 32);
  const int tiles = p.schedule.m_tiles * C::N_TILES;
  const CtaPair<C::CTAS, C::EMULATE> pair;
  // the tiles this CTA (pair) takes: first, first + stride, ...
  const int first = int(blockIdx.x) / C::CTAS, stride = int(gridDim.x) / C::CTAS;
  const long long a_row0 = (long long)GEMM_BM * pair.rank;  // this CTA's first row in a tile

  if (threadIdx.x == 0) {
    for (int s = 0; s < C::STAGES; ++s) {
      mbar_init(&full[s], pair.full_arrivals(32 + GEMM_SCALE_THREADS));  // warp 0 (TMA bytes, gathered rows), the scale threads
      mbar_init(&empty[s], 1);  // the MMAs' commit
    }
    for (int a = 0; a < 2; ++a) {
      mbar_init(&acc_full[a], 1);
      mbar_init(&acc_empty[a], 128 * C::CTAS);  // every epilogue thread (of the pair)
    }
    fence_barrier_init();
  }
  if (warp == 1) tmem_alloc<C::EMULATE, C::CTAS>(tmem_slot, C::TMEM_COLUMNS);
  tcgen05_fence_before_sync<C::EMULATE>();
  if constexpr (C::CTAS == 2)
    cluster_sync();  // the pair's barriers initialized before either CTA arrives on the other's
  else
    __syncthreads();
  tcgen05_fence_after_sync<C::EMULATE>();
  const unsigned tmem = *tmem_slot;

  // A's row of this CTA's tile row r where a contiguous call gathers them: -1 past the tile's
  // rows, -2 for an index outside A (a NaN row)
  const bool gathered = C::GROUPED == GROUPED_CONTIGUOUS && p.row_index != nullptr;
  auto gathered_row = [&](const ScheduledTile& tile, int r) -> long long {
    if (tile.m0 + a_row0 + r >= tile.m_end) return -1;
    const long long i = p.row_index[tile.m0 + a_row0 + r];
    return i >= 0 && i < p.a_rows ? i : -2;
  };

  if (warp == 0) {
    if (lane == 0) {
      prefetch_tensor_map(&p.tma_a);
      prefetch_tensor_map(&p.tma_w);
    }
    int it = 0;
    KernelTileCursor<C::GROUPED, C::GROUPS> cursor;
    for (int t = first; t < tiles; t += stride) {
      const ScheduledTile tile = gemm_tile<C>(p, t, cursor);
      if (tile.m0 >= tile.m_end) break;
      const long long w_group_row = tile.group * C::N;
      // SwiGLU: the tile's gate and up boxes by their 3D maps, at its first output's group of g
      // rows (its row in it, and the group's index past the weight's earlier ones)
      const long long o0 = (long long)tile.n_tile * (C::BN / 2);
      const int swiglu_y = C::SWIGLU ? int(o0 % p.swiglu_group) : 0;
      const int swiglu_z = C::SWIGLU ? int(tile.group * (C::N / (2 * p.swiglu_group)) + o0 / p.swiglu_group) : 0;
      for (int kt = 0; kt < C::KTILES; ++kt, ++it) {
        const int s = it % C::STAGES;
        mbar_wait(&empty[s], ((it / C::STAGES) & 1) ^ 1, 1000);
        unsigned char* st = smem + s * C::STAGE_BYTES;
        const unsigned bytes = (gathered ? 0u : gemm_a_bytes()) + gemm_w_bytes(C::BN, C::CTAS);
        if (lane == 0) {
          pair.expect_loads(&full[s], bytes);
          if (!gathered) pair.load_2d(st + C::A_AT, &p.tma_a, &full[s], kt * 128, int(tile.m0 + a_row0));
#pragma unroll
          for (int box = 0; box < C::W_ROWS / C::W_BOX_ROWS; ++box) {
            const int c = C::W_ROWS * int(pair.rank) + box * C::W_BOX_ROWS;  // the box's first tile column
            unsigned char* to = st + C::W_AT + box * C::W_BOX_ROWS * 128;
            if constexpr (C::SWIGLU)
              pair.load_3d(to, c < C::BN / 2 ? &p.tma_w : &p.tma_w_up, &full[s], kt * 128, swiglu_y, swiglu_z);
            else
              pair.load_2d(to, &p.tma_w, &full[s], kt * 128, int(w_group_row + tile_w_row<C>(p, tile.n_tile, c)));
          }
        }
        if (gathered) {
#pragma unroll 1
          for (int c = lane; c < GEMM_BM * 8; c += 32) {
            const int r = c / 8, chunk = c % 8;
            const long long row = gathered_row(tile, r), byte = (long long)kt * 128 + 16 * chunk;
            const bool in = row >= 0 && byte < C::K / 2;
            cp_async_16(st + C::A_AT + (r / 8) * OPERAND_GROUP_BYTES + (r % 8) * OPERAND_ROW_BYTES + 16 * (chunk ^ (r % 8)),
                        in ? p.a + row * p.a_stride + byte : p.a, in ? 16u : 0u);
          }
        }
        pair.loaded(&full[s], (it / C::STAGES) & 1, bytes, gathered);
      }
    }
    // every stage's last release has landed (a pair's commits arrive in both CTAs) before the
    // CTA may exit
    for (int i = it; i < it + C::STAGES; ++i) mbar_wait(&empty[i % C::STAGES], ((i / C::STAGES) & 1) ^ 1, 1000);
  } else if (warp >= 6) {
    // the scale threads: word (row, step) of A's atoms and W's, 4 block scales each (all the
    // tile's weight rows: each CTA of a pair holds W's scales for the whole MMA)
    const int i = int(threadIdx.x) - (GEMM_THREADS - GEMM_SCALE_THREADS);
    constexpr int SCALE_ROW_STEP = GEMM_SCALE_THREADS / GEMM_STEPS;  // rows between a thread's words
    constexpr int A_SCALE_WORDS = GEMM_BM / SCALE_ROW_STEP, SCALE_WORDS = (GEMM_BM + C::BN) / SCALE_ROW_STEP;
    static_assert(GEMM_SCALE_THREADS % GEMM_STEPS == 0 && C::BN % SCALE_ROW_STEP == 0, "whole words a thread");
    int it = 0;
    KernelTileCursor<C::GROUPED, C::GROUPS> cursor;
    for (int t = first; t < tiles; t += stride) {
      const ScheduledTile tile = gemm_tile<C>(p, t, cursor);
      if (tile.m0 >= tile.m_end) break;
      const long long m0 = tile.m0 + a_row0;
      const unsigned char* w_scales = p.w_scales + tile.group * p.w_group_bytes;
      for (int kt = 0; kt < C::KTILES; ++kt, ++it) {
        // Word q of this thread: row r = i / 4 + 16 q of the tile (A's rows for q < A_SCALE_WORDS,
        // then W's), MMA step i % 4. All are loaded before the stage is awaited, then stored:
        // loaded one at a time, each store waiting for its load, a stage would take SCALE_WORDS
        // memory latencies, many times its MMAs'.
        const int step = i % GEMM_STEPS;
        const long long kb = (long long)kt * (GEMM_BK / 16) + 4 * step;
        unsigned words[SCALE_WORDS];
#pragma unroll
        for (int q = 0; q < SCALE_WORDS; ++q) {
          const int r = i / GEMM_STEPS + q * SCALE_ROW_STEP;
          if (q < A_SCALE_WORDS) {
            const long long row = gathered ? gathered_row(tile, r) : m0 + r < tile.m_end ? m0 + r : -1;
            words[q] = row == -2 ? 0x7F7F7F7Fu  // an index outside A: NaN block scales
                                 : scale_word<C::A_LAYOUT, C::KB>(p.a_scales, row, row >= 0 && kb < C::KB, kb, p.a_scale_words != 0);
          } else {
            const int c = r - GEMM_BM;
            words[q] = scale_word<C::W_LAYOUT, C::KB>(w_scales, tile_w_row<C>(p, tile.n_tile, c),
                                                      tile_w_row_in<C>(tile.n_tile, c) && kb < C::KB, kb, p.w_scale_words != 0);
          }
        }
        const int s = it % C::STAGES;
        mbar_wait(&empty[s], ((it / C::STAGES) & 1) ^ 1);
        unsigned char* st = smem + s * C::STAGE_BYTES;
#pragma unroll
        for (int q = 0; q < SCALE_WORDS; ++q) {
          const int r = i / GEMM_STEPS + q * SCALE_ROW_STEP;
          const int in_atom = (r % 32) * 16 + (r % 128 / 32) * 4;  // row r % 128 of its atom (W's too: 128 = 0 mod 128)
          const unsigned atom = q < A_SCALE_WORDS ? C::SA_AT + step * 512u
                                                  : C::SW_AT + unsigned(step * C::W_ATOMS + (r - GEMM_BM) / 128) * 512u;
          *reinterpret_cast<unsigned*>(st + atom + in_atom) = words[q];
        }
        fence_proxy_async_shared();  // the atoms, visible to tcgen05.cp
        pair.arrive(&full[s]);
      }
    }
  } else if (warp == 1) {
    if (pair.leader()) {
      const unsigned idesc = instr_descriptor_mxf4nvf4(GEMM_BM * C::CTAS, C::BN);
      int it = 0, done = 0;
      KernelTileCursor<C::GROUPED, C::GROUPS> cursor;
      for (int t = first; t < tiles; t += stride) {
        if (C::GROUPED != GROUPED_NONE) {
          const ScheduledTile tile = gemm_tile<C>(p, t, cursor);
          if (tile.m0 >= tile.m_end) break;
        }
        // the epilogue (the pair's) has read what this accumulator held before
        const int acc = done % C::ACCUMULATORS;
        mbar_wait(&acc_empty[acc], ((done / C::ACCUMULATORS) & 1) ^ 1);
        tcgen05_fence_after_sync<C::EMULATE>();
        for (int kt = 0; kt < C::KTILES; ++kt, ++it) {
          const int s = it % C::STAGES;
          mbar_wait(&full[s], (it / C::STAGES) & 1);
          tcgen05_fence_after_sync<C::EMULATE>();
          if (gathered) fence_proxy_async_shared();  // this CTA's gathered rows (cp.async), to tcgen05.mma
          const unsigned st = smem_u32(smem + s * C::STAGE_BYTES);
          const unsigned sfa = tmem + C::ACCUMULATORS * C::BN + s * C::SCALE_COLUMNS, sfw = sfa + 4 * GEMM_STEPS;
          const int steps = int((C::K - (long long)kt * GEMM_BK) / GEMM_MMA_K) < GEMM_STEPS
                                ? int((C::K - (long long)kt * GEMM_BK) / GEMM_MMA_K)
                                : GEMM_STEPS;
          for (int step = 0; step < steps; ++step) {
            tmem_copy_32x128b_warpx4<C::EMULATE, C::CTAS>(sfa + 4 * step, scale_descriptor(st + C::SA_AT + step * 512));
            for (int a = 0; a < C::W_ATOMS; ++a)
              tmem_copy_32x128b_warpx4<C::EMULATE, C::CTAS>(sfw + 4 * (step * C::W_ATOMS + a),
                                                            scale_descriptor(st + C::SW_AT + (step * C::W_ATOMS + a) * 512));
          }
          for (int step = 0; step < steps; ++step)
            mma_mxf4nvf4<C::EMULATE, C::CTAS>(tmem + acc * C::BN, operand_descriptor(st + C::A_AT, step),
                                              operand_descriptor(st + C::W_AT, step), idesc, sfa + 4 * step,
                                              sfw + 4 * step * C::W_ATOMS, kt > 0 || step > 0);
          tcgen05_commit<C::EMULATE, C::CTAS>(&empty[s]);  // the stage (the pair's) is free once these MMAs are done
        }
        tcgen05_commit<C::EMULATE, C::CTAS>(&acc_full[acc]);
        ++done;
      }
    }
  } else {
    // the epilogue: warp w reads lanes 32 (w % 4) .. of the accumulator, one row of D a thread
    // (a per-group scale, W's or A's, is the tile's group's: the one-per-row read at its group)
    const int quarter = warp % 4, r = 32 * quarter + lane;
    const bool a_per_row = p.a_gscale_mode == GSCALE_DEVICE_PER_ROW;
    const int ctid = int(threadIdx.x) - 64;  // among the epilogue's 128 threads
    PendingCounts<GEMM_BM, 128> counts;      // EPILOGUE_MOE_COMBINE: the last stored tile's
    counts.clear();
    int done = 0;
    KernelTileCursor<C::GROUPED, C::GROUPS> cursor;
    for (int t = first; t < tiles; t += stride) {
      const ScheduledTile tile = gemm_tile<C>(p, t, cursor);
      if (tile.m0 >= tile.m_end) break;
      // (D's columns [n0, n0 + BN), or SwiGLU's [n0, n0 + BN / 2))
      const long long m = tile.m0 + a_row0 + r, n0 = (long long)tile.n_tile * (C::SWIGLU ? C::BN / 2 : C::BN);
      const float scale = p.alpha * global_scale(p.w_gscale_mode, p.w_gscale_value, p.w_gscale_ptr, tile.group) *
                          (a_per_row ? 1.0f : global_scale(p.a_gscale_mode, p.a_gscale_value, p.a_gscale_ptr, tile.group));
      const int acc = done % C::ACCUMULATORS;
      mbar_wait(&acc_full[acc], (done / C::ACCUMULATORS) & 1);
      tcgen05_fence_after_sync<C::EMULATE>();
      const float row_scale = a_per_row && m < tile.m_end ? scale * p.a_gscale_ptr[m] : scale;
      // NVFP4 D: one uniform branch a warp to a copy without IEEE divisions where its rows' global
      // scales allow (fp4_output_row_reciprocal)
      const GlobalScale d_tensor_scale = fp4_output_tensor_scale(p.d_fp4);
      const bool d_reciprocal =
          C::D_FP4 && __all_sync(0xFFFFFFFFu, m >= tile.m_end || fp4_output_row_reciprocal(p.d_fp4, d_tensor_scale, m));
      const unsigned row_cells = tmem + (unsigned(32 * quarter) << 16) + unsigned(acc * C::BN);
#pragma unroll 1
      for (int c = 0; c < (C::SWIGLU ? C::BN / 2 : C::BN); c += 32) {
        float v[32];
        tmem_load_32x32b_x32<C::EMULATE>(row_cells + unsigned(c), v);
        if constexpr (C::SWIGLU) {
          float up[32];  // the up sums of the same outputs, BN / 2 columns on
          tmem_load_32x32b_x32<C::EMULATE>(row_cells + unsigned(C::BN / 2 + c), up);
          if (m >= tile.m_end) continue;
#pragma unroll
          for (int j = 0; j < 32; ++j)
            v[j] = n0 + c + j < C::D_COLUMNS ? swiglu_output_value<C::BIAS, C::N / 2>(v[j], up[j], row_scale, p.bias, n0 + c + j)
                                             : 0.0f;
          if constexpr (C::D_FP4) {
            const GlobalScale g = fp4_output_row_scale(p.d_fp4, d_tensor_scale, m);
            if (d_reciprocal)
              store_fp4_row_blocks<C, DIVIDE_RECIPROCAL>(p, m, n0 + c, v, g);
            else
              store_fp4_row_blocks<C, DIVIDE_EITHER>(p, m, n0 + c, v, g);
            continue;
          }
        } else {
          if (m >= tile.m_end) continue;
#pragma unroll
          for (int j = 0; j < 32; ++j)
            v[j] = v[j] * row_scale + (n0 + c + j < C::N ? load_bias<C::BIAS>(p.bias, n0 + c + j) : 0.0f);
        }
        if (p.d_vec && n0 + c + 32 <= C::D_COLUMNS) {  // the thread's 32 columns of its row, 16 bytes at a time
          if constexpr (C::ODT == DTYPE_FP32) {
            float4* to = reinterpret_cast<float4*>(static_cast<float*>(p.d) + m * p.d_stride + n0 + c);
#pragma unroll
            for (int q = 0; q < 8; ++q) to[q] = make_float4(v[4 * q], v[4 * q + 1], v[4 * q + 2], v[4 * q + 3]);
          } else {
            uint4* to = reinterpret_cast<uint4*>(static_cast<unsigned short*>(p.d) + m * p.d_stride + n0 + c);
#pragma unroll
            for (int q = 0; q < 4; ++q)
              to[q] = make_uint4(pack_pair<C::ODT>(v[8 * q], v[8 * q + 1]), pack_pair<C::ODT>(v[8 * q + 2], v[8 * q + 3]),
                                 pack_pair<C::ODT>(v[8 * q + 4], v[8 * q + 5]), pack_pair<C::ODT>(v[8 * q + 6], v[8 * q + 7]));
          }
        } else {
#pragma unroll
          for (int j = 0; j < 32; ++j)
            if (n0 + c + j < C::D_COLUMNS) store_element<C::ODT>(p.d, m * p.d_stride + n0 + c + j, v[j]);
        }
      }
      tcgen05_fence_before_sync<C::EMULATE>();
      pair.arrive(&acc_empty[acc]);
      ++done;
      if constexpr (C::EPILOGUE == EPILOGUE_MOE_COMBINE) {
        // this CTA's rows of the tile counted, then the previous tile's counts (returned by now) read
        const PendingCounts<GEMM_BM, 128> previous = counts;
        const long long r0 = tile.m0 + a_row0, r_end = r0 + GEMM_BM < tile.m_end ? r0 + GEMM_BM : tile.m_end;
        count_tile<C::BN>(p.combine, r0, r_end, tile.n_tile, C::N, ctid, counts, [] { named_barrier(kCombineBarrier, 128); });
        finish_counts<C::ODT, C::BN>(p.combine, {p.d, p.d_stride, C::N}, previous, ctid);
      }
    }
    if constexpr (C::EPILOGUE == EPILOGUE_MOE_COMBINE) finish_counts<C::ODT, C::BN>(p.combine, {p.d, p.d_stride, C::N}, counts, ctid);
  }

  tcgen05_fence_before_sync<C::EMULATE>();
  if constexpr (C::CTAS == 2)
    cluster_sync();  // neither CTA of the pair exits while the other's MMAs may reach it
  else
    __syncthreads();
  if (warp == 1) {
    tcgen05_fence_after_sync<C::EMULATE>();
    tmem_dealloc<C::EMULATE, C::CTAS>(tmem, C::TMEM_COLUMNS);
  }
}

}  // namespace nvfp4k::sm100
