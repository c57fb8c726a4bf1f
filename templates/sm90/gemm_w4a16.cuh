// NVFP4-weight GEMM on Hopper: D[M, N] = alpha * gw * A[M, K] . W[N, K]^T (+ bias[N]), with A in
// BF16 or FP16 and W in NVFP4 (ModelOpt layout, either scale layout).
//
// The product runs transposed, D^T = W . A^T, so the weight is wgmma's A operand and comes from
// registers: each consumer thread turns the staged packed bytes it owns into exact BF16/FP16
// pairs (value * block scale, see common/mma_operand.cuh) and decoded weights never touch
// shared memory. The activations are wgmma's B operand (TMA, 128-byte swizzle) and M is
// wgmma's N; the 8-row decode tile issues the same fragments to mma.m16n8k16 per warp instead
// (GemmConfig::WARP_MMA).
//
// Warpgroups 0..WG-1 consume, 64 weight rows each; the threads after them produce: one issues
// the TMA loads of a STAGES-deep ring guarded by mbarriers, and for the ModelOpt layout a
// warpgroup of them stages the tiles' block scales (cp.async). (Rows gathered through
// moe_route's row_index come sorted: the front copies them first, gather_rows.cuh.) With ADT
// DTYPE_NVFP4 (W4A4 in one launch) the producer warps decode A's NVFP4 rows to BF16 into the
// places TMA's 128-byte swizzle gives them, a stage a warp in turn (sm90/fp4_activations.cuh).
// A prepacked weight (LAYOUT == SCALES_PREPACKED, sm90/prepacked_weight.cuh) holds its scales
// and comes in as one contiguous bulk copy per consumer warpgroup and stage. With KSLICES = 2
// two consumer warpgroups share each 64 rows, each decoding half of every stage's k steps (twice
// the warps to hide latency with, the same stages), and add up in the end.
// With KSPLIT > 1 the grid is clusters of KSPLIT CTAs: the first GemmParams::whole_clusters
// take KSPLIT whole tiles each, and each later one splits one tile's K among its CTAs, rank 0
// summing the partial tiles through distributed shared memory in rank order (deterministic, no
// workspace). Splitting only the tiles of a last, partial wave fills it with CTAs of half the
// work (a wave of whole tiles on all SMs, then one of split ones, is a split tail).
// With EPILOGUE == EPILOGUE_SWIGLU the weight is a gate_up weight prepacked in the 8-row
// interleave (gate rows i..i+7, then up rows i..i+7): a thread's rows r and r + 8 are gate
// and up of one intermediate column, and D [M, N/2] = silu(gate) * up from the fp32 sums.
// With ODT DTYPE_NVFP4 D is that quantized to NVFP4 (sm90/swiglu_fp4_epilogue.cuh).
// With EPILOGUE == EPILOGUE_MOE_COMBINE (contiguous groups, a down weight) D is stored as
// always, then each token whose rows are all stored is combined into its output row
// (common/moe_combine_epilogue.cuh).
// With RMSNORM (dense) D is of A's rows RMS-normalized with the weight GemmParams::a_rmsnorm_weight
// (sm90/a_rmsnorm.cuh: its numerics, and who computes the rows' 1 / rms). With RESIDUAL (dense,
// no fused epilogue) GemmParams::residual is added to D's fp32 values before their rounding.
#pragma once
#include "common/gemm_epilogue.cuh"
#include "common/global_scale.cuh"
#include "common/mma_operand.cuh"
#include "common/ptx/barrier.cuh"
#include "common/ptx/cluster.cuh"
#include "common/ptx/copy.cuh"
#include "common/ptx/dependent_launch.cuh"
#include "common/scale_layout.cuh"
#include "common/tile_scheduler.cuh"
#include "sm90/fp4_activations.cuh"
#include "sm90/a_rmsnorm.cuh"
#include "sm90/fp8_operand.cuh"
#include "sm90/gemm_params.cuh"
#include "common/moe_combine_epilogue.cuh"
#include "sm90/prepacked_weight.cuh"
#include "sm90/ptx.cuh"
#include "sm90/swiglu_fp4_epilogue.cuh"
#include "sm90/wgmma.cuh"

namespace nvfp4k::sm90 {

// N is a run-time value (GemmParams::n): one kernel serves every N of a K and tile. K stays a
// constant: its loops' trip counts shape the main loop's code (a run-time K is slower).
// `Choices` names the kernel's compile-time choices, every one a static constexpr member (the
// generated source declares them by name: sm90/backend.cpp), of which GemmConfig derives the rest:
//   ADT, ODT: A's and D's dtypes (ADT DTYPE_NVFP4: W4A4 in one launch; DTYPE_E4M3: W4A8);
//   BIAS (BiasCode), K (long long), LAYOUT (the weight's scale layout);
//   WG, BM, BK, STAGES, KSPLIT, KSLICES: the tile;
//   GROUPED (GroupedLayoutCode), GROUPS, PERSISTENT; EPILOGUE (GemmEpilogueCode);
//   A_SCALES (NVFP4 A's scale layout), RMSNORM (ARmsNormCode), RESIDUAL.
template <class Choices>
struct GemmConfig {
  // NVFP4 activations (ADT DTYPE_NVFP4, their scales in layout A_SCALES): decoded to BF16 by
  // the producers, the BF16 kernel's from there on.
  static constexpr bool A_FP4 = Choices::ADT == DTYPE_NVFP4;
  static constexpr int A_SCALES = Choices::A_SCALES;
  static constexpr int ADT = A_FP4 ? DTYPE_BF16 : Choices::ADT, ODT = Choices::ODT, BIAS = Choices::BIAS, LAYOUT = Choices::LAYOUT;
  static constexpr int EPILOGUE = Choices::EPILOGUE;  // GemmEpilogueCode
  static constexpr int RMSNORM = Choices::RMSNORM;    // ARmsNormCode: RMSNorm of A, its weight's type
  static constexpr bool RESIDUAL = Choices::RESIDUAL;  // D = ... + residual
  static constexpr long long K = Choices::K;
  static constexpr int WG = Choices::WG, BM = Choices::BM, STAGES = Choices::STAGES, KSPLIT = Choices::KSPLIT;
  // Consumer warpgroups per 64 weight rows, each decoding its share of every stage's k steps
  // (more warps per SM to hide latency at small M, without more CTAs to fill and reduce).
  static constexpr int KSLICES = Choices::KSLICES;
  static constexpr int CONSUMERS = WG * KSLICES;  // consumer warpgroups
  // A grouped layout (GroupedLayoutCode) of GROUPS groups, each with its own weight.
  static constexpr int GROUPED = Choices::GROUPED, GROUPS = Choices::GROUPS;
  // A persistent grid (contiguous and masked groups): a CTA takes every gridDim.x-th tile, its
  // producers running into the next tile's stages while the consumers finish one. D is stored by
  // element and k slices add up in a region of their own: the stages are never idle.
  static constexpr bool PERSISTENT = Choices::PERSISTENT;
  // Contiguous and masked groups end inside a tile: from 64 rows on, the MMA narrows to their
  // rows, in the widths narrow_mma_width gives (sm90/gemm_params.cuh).
  static constexpr bool NARROW_MMA = (GROUPED == GROUPED_CONTIGUOUS || GROUPED == GROUPED_MASKED) && narrow_mma_width_count(BM) > 1;
  // The W4A8 mode (ADT DTYPE_E4M3, sm90/fp8_operand.cuh): E4M3 activations and weights folded to
  // E4M3 from a prepacked weight, k32 steps; D gets each weight row's 2^e in the end.
  static constexpr bool FP8 = ADT == DTYPE_E4M3;
  // The 8-row decode tile multiplies by warp (mma.m16n8k16, B by ldmatrix) instead of wgmma:
  // each warp runs free of its warpgroup, with no descriptors, fences or commit waits, and its
  // stage is released as soon as it is decoded (docs/perf-log.md; 16 rows measured no faster).
  static constexpr bool WARP_MMA = BM == 8 && !FP8;
  using Operand = Fp4Operand<FP8 ? DTYPE_FP16 : ADT>;  // the 16-bit path's placed pairs
  // the operands' 2^-SHIFT (NVFP4 activations: both operands'), undone in the epilogue
  static constexpr int SHIFT = FP8 ? 0 : A_FP4 ? 2 * Operand::SHIFT : Operand::SHIFT;
  static constexpr int BK = Choices::BK;  // K per stage: 128 or 256
  static constexpr int KSTEPS = BK / (FP8 ? 32 : 16);  // wgmma k16 (k32) steps per stage
  static constexpr int A_BOX_COLS = FP8 ? 128 : 64;    // 128 bytes of a row: the swizzle span
  static constexpr int A_BOXES = BK / A_BOX_COLS;      // activation boxes per stage
  static constexpr int W_ROW = BK / 2;    // packed bytes per weight row and stage (64 or 128: the TMA swizzle span)
  static constexpr int BN = 64 * WG;
  static constexpr long long KB = K / 16;                    // scale blocks per weight row
  static constexpr long long KB_PADDED = (KB + 3) / 4 * 4;   // swizzled layout: KB rounded up to 4
  static constexpr int KTILES = int((K + BK - 1) / BK);
  static constexpr int A_BOX_BYTES = BM * 128;  // BM rows x A_BOX_COLS columns, 128-byte swizzle
  static constexpr int W_BYTES = BN * W_ROW;    // BN rows, swizzled over W_ROW bytes
  static constexpr int SCALE_BYTES = (WG == 3 ? 16 : 8) * BK;  // BN rows x BK/16 E4M3 scales, padded to keep alignment
  static constexpr int STAGE_BYTES = A_BOXES * A_BOX_BYTES + W_BYTES + SCALE_BYTES;
  static constexpr int W_AT = A_BOXES * A_BOX_BYTES;   // offset of the weights in a stage
  static constexpr int SCALE_AT = W_AT + W_BYTES;       // offset of the scales in a stage
  static constexpr int PARTIAL_AT = STAGES * STAGE_BYTES + 2 * STAGES * 8;  // after the stages and their barriers
  static constexpr int PARTIAL_BYTES = PERSISTENT && KSLICES > 1 ? BM * 64 * WG * 4 : 0;
  static constexpr int RMS_AT = PARTIAL_AT + PARTIAL_BYTES;  // RMSNORM: the tile's rows' 1 / rms (fp32)
  static constexpr int RMS_BYTES = RMSNORM ? BM * 4 : 0;
  // NVFP4 D: each consumer warpgroup's staged values (sm90/swiglu_fp4_epilogue.cuh), in a
  // region of their own where a persistent CTA's stages hold its next tile, else in the stages
  static constexpr bool D_FP4 = ODT == DTYPE_NVFP4;
  static constexpr int STAGING_AT = PERSISTENT ? RMS_AT + RMS_BYTES : 0;
  static constexpr int STAGING_BYTES = D_FP4 && PERSISTENT ? WG * kFp4StagingFloats<BM, true> * 4 : 0;
  static constexpr int SMEM_BYTES = 1024 + RMS_AT + RMS_BYTES + STAGING_BYTES;
  static constexpr bool PREPACKED = LAYOUT == SCALES_PREPACKED;
  // RMSNORM from the stages (sm90/a_rmsnorm.cuh): producer warps 1..3 add up a tall tile's rows'
  // squares from each stage, one more arrival each on its empty barrier
  static constexpr bool RMS_FROM_STAGES = RMSNORM && PREPACKED && KSPLIT == 1 && BM > 64;
  static constexpr int RMS_THREADS = 96;
  // After the consumer warpgroups, a producer warpgroup: its thread 0 issues the copies, and
  // for the ModelOpt layout every thread stages a weight row's scales. (A producer warp alone
  // saves no registers: ptxas counts warpgroups whole.)
  static constexpr int THREADS = 128 * CONSUMERS + 128;
  // Registers: ptxas gives every thread 65536 / THREADS. Where two or more consumer warpgroups
  // hold 64 accumulators or more, the producers keep PRODUCER_REGS and hand the rest to the
  // consumers (a 256-row tile's: 232 instead of 168, with which ptxas serialized its wgmmas).
  // Smaller tiles need fewer than the even share (ptxas would ignore the hand-over).
  static constexpr int BASE_REGS = 65536 / THREADS / 8 * 8;
  static constexpr bool REALLOCATE = CONSUMERS >= 2 && BM >= 128;
  static constexpr int PRODUCER_REGS = PREPACKED ? 40 : 56;
  static constexpr int CONSUMER_REGS = BASE_REGS + (BASE_REGS - PRODUCER_REGS) / CONSUMERS / 8 * 8;
  static constexpr int CHUNKS = BK / prepacked::CHUNK_K;                  // prepacked chunks per warpgroup and stage
  static constexpr int CHUNK_RUN = CHUNKS * prepacked::CHUNK_BYTES;       // their bytes, contiguous in global memory
  static_assert(!PREPACKED || WG * CHUNK_RUN <= W_BYTES + SCALE_BYTES, "prepacked chunks fit where the stage's weights go");
  static_assert(K > 0 && K % 32 == 0 && BM > 0 && BM % 8 == 0 && BM <= 256 && (BK == 128 || BK == 256) && STAGES > 0);
  // three consumers only on a prepacked weight: the ModelOpt layout's scale staging has one
  // producer thread per weight row, 128 of them
  static_assert(WG == 1 || WG == 2 || (WG == 3 && PREPACKED), "1 or 2 consumer warpgroups (3 on a prepacked weight)");
  static_assert(KSLICES == 1 || (KSLICES == 2 && BM <= 64), "k slices: register budget of the larger CTA");
  static_assert(GROUPED == GROUPED_NONE || (KSPLIT == 1 && GROUPS > 0), "grouped layouts run unsplit");
  static_assert(!FP8 || (PREPACKED && GROUPED != GROUPED_BATCHED), "W4A8: a prepacked weight, dense, contiguous or masked");
  static_assert(!A_FP4 || GROUPED == GROUPED_NONE, "NVFP4 activations: dense only (a grouped call decodes A first)");
  static_assert(!A_FP4 || (RMSNORM == A_RMSNORM_NONE && !RESIDUAL),
                "NVFP4 activations: no RMSNorm or residual (their producer warps decode A)");
  static_assert(!PERSISTENT || GROUPED == GROUPED_CONTIGUOUS || GROUPED == GROUPED_MASKED, "persistent: contiguous or masked groups");
  static_assert(STAGE_BYTES % 1024 == 0, "stages must keep the 1024-byte swizzle alignment");
  static_assert(EPILOGUE == EPILOGUE_NONE || (EPILOGUE == EPILOGUE_SWIGLU && PREPACKED && GROUPED != GROUPED_BATCHED) ||
                    (EPILOGUE == EPILOGUE_MOE_COMBINE && GROUPED == GROUPED_CONTIGUOUS),
                "SwiGLU: a prepacked gate_up weight, not batched; the MoE combine: contiguous groups");
  static_assert(KSPLIT * KSLICES == 1 || BN * BM * 4 <= STAGES * STAGE_BYTES, "partial tiles reuse the stage memory");
  static_assert(!RMSNORM || (GROUPED == GROUPED_NONE && !FP8), "RMSNorm of A: dense, 16-bit activations");
  static_assert(!RESIDUAL || (GROUPED == GROUPED_NONE && EPILOGUE == EPILOGUE_NONE), "the residual: dense, no fused epilogue");
  static_assert(!D_FP4 || EPILOGUE == EPILOGUE_SWIGLU, "NVFP4 D: the SwiGLU epilogue's");
};

// Stages the BK/16 scale bytes of weight row `row` for k-tile `kt` at `dst` and arrives on
// `bar` when they have landed; zeros past K and the weight's n rows. Asynchronous (cp.async,
// 4-byte pieces of 4 blocks) whenever the rows allow it, else plain loads.
template <class C>
__device__ __forceinline__ void stage_tile_scales(unsigned* dst, const unsigned char* scales, long long row, int kt,
                                                  unsigned long long* bar, long long n) {
  constexpr int PIECES = C::BK / 64;
  const long long kb0 = (long long)(C::BK / 16) * kt;
  const bool in_rows = row < n;
  const long long r = in_rows ? row : 0;
  if constexpr (C::LAYOUT == SCALES_SWIZZLED128X4 || C::KB % 4 == 0) {
#pragma unroll
    for (int i = 0; i < PIECES; ++i) {
      const long long kb = kb0 + 4 * i;
      if constexpr (C::LAYOUT == SCALES_SWIZZLED128X4) {
        // 4 consecutive blocks of a row are one aligned word; the padding up to KB_PADDED is zero
        const bool in = in_rows && kb < C::KB_PADDED;
        cp_async<4>(dst + i, scales + scale_offset_swizzled128x4(r, in ? kb : 0, C::KB), in ? 4u : 0u);
      } else {
        const long long left = in_rows ? C::KB - kb : 0;  // K tail: the last tile may be short
        cp_async<4>(dst + i, scales + r * C::KB + (left > 0 ? kb : 0), unsigned(left <= 0 ? 0 : left < 4 ? left : 4));
      }
    }
    cp_async_arrive(bar);
  } else {
    // rows only 2-byte aligned (K = 32 mod 64): synchronous 2-byte loads
#pragma unroll
    for (int i = 0; i < PIECES; ++i) {
      unsigned short h[2] = {0, 0};
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const long long kb = kb0 + 4 * i + 2 * e;
        if (in_rows && kb < C::KB) h[e] = __ldg(reinterpret_cast<const unsigned short*>(scales + r * C::KB + kb));
      }
      dst[i] = h[0] | (unsigned(h[1]) << 16);
    }
    mbar_arrive(bar);
  }
}

// One warpgroup's share of a stage from the ModelOpt layout (TMA-swizzled packed rows, scales
// staged per row): its STEPS k16 steps from step j0 (a multiple of STEPS, itself a multiple of
// 4); local step j's fragment into a[j % FRAGS], then issue(j).
template <class C, class Op, int STEPS, int COMMIT_STEPS, int FRAGS, class Issue>
__device__ __forceinline__ void decode_modelopt(const unsigned char* w, const unsigned char* scales, int row0, int j0,
                                                unsigned byte_t, const int (&w_row)[2], const int (&w_swizzle)[2],
                                                bool (&nan_scale)[2], unsigned (&a)[FRAGS][4], Issue&& issue) {
  // The scales of both rows as pairs: word q covers local steps 4q..4q+3, pairs[h][q][0]
  // holds steps 4q and 4q+2 in its lanes, pairs[h][q][1] steps 4q+1 and 4q+3.
  const unsigned* tile_scales = reinterpret_cast<const unsigned*>(scales);
  unsigned pairs[2][STEPS / 4][2];
#pragma unroll
  for (int h = 0; h < 2; ++h)
#pragma unroll
    for (int q = 0; q < STEPS / 4; ++q) {
      const unsigned word = tile_scales[(row0 + 8 * h) * (C::BK / 64) + j0 / 4 + q];
      nan_scale[h] |= Op::has_nan_scale(word);
      pairs[h][q][0] = Op::scale_pairs(word, false);
      pairs[h][q][1] = Op::scale_pairs(word, true);
    }
  // Step j's A fragment: {row0, k 2t..2t+1}, {row0+8, same}, {row0, k 2t+8..2t+9}, {row0+8, same},
  // from byte t of the two words of the step's 8 packed bytes per row.
  auto decode = [&](int j, int h, uint2 v) {
    unsigned(&frag)[4] = a[j % FRAGS];
    const unsigned scales = pairs[h][j / 4][j % 2];
    if ((j % 4) / 2 == 0) {
      frag[h] = Op::template scaled<0>(Op::place(__byte_perm(v.x, 0u, byte_t)), scales);
      frag[h + 2] = Op::template scaled<0>(Op::place(__byte_perm(v.y, 0u, byte_t)), scales);
    } else {
      frag[h] = Op::template scaled<1>(Op::place(__byte_perm(v.x, 0u, byte_t)), scales);
      frag[h + 2] = Op::template scaled<1>(Op::place(__byte_perm(v.y, 0u, byte_t)), scales);
    }
  };
  // Step j0 + j's 16-byte chunk is (j0 + j) / 2 = (j0 / 2) ^ (j / 2) (j0 / 2 is a multiple of
  // the range of j / 2): the offset goes into the swizzle term once.
  int swizzle[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) swizzle[h] = w_swizzle[h] ^ ((j0 / 2) << 4);
  auto row_bytes = [&](int h, int j) { return w + w_row[h] + ((((j / 2) << 4) ^ swizzle[h]) | (j % 2) * 8); };
#pragma unroll
  for (int j = 0; j < STEPS; j += 2) {
    if constexpr (COMMIT_STEPS == 1) {  // 8 bytes per row and step: fewest registers next to 128 accumulators
#pragma unroll
      for (int jj = j; jj < j + 2; ++jj) {
#pragma unroll
        for (int h = 0; h < 2; ++h) decode(jj, h, *reinterpret_cast<const uint2*>(row_bytes(h, jj)));
        issue(jj);
      }
    } else {  // 16 bytes per row: two steps per load
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const uint4 v = *reinterpret_cast<const uint4*>(row_bytes(h, j));
        decode(j, h, make_uint2(v.x, v.y));
        decode(j + 1, h, make_uint2(v.z, v.w));
      }
      issue(j);
      issue(j + 1);
    }
  }
}

// The same from a prepacked weight (STEPS / 4 chunks from `chunks`): per 64-k chunk one 16-byte
// load of values and one 8-byte load of both rows' scale codes (sm90/prepacked_weight.cuh),
// a shift and an AND per pair, a shift and a LOP3 per scale pair; NaN scales are flagged per
// row in the weight instead.
template <class C, int STEPS, int FRAGS, class Issue>
__device__ __forceinline__ void decode_prepacked(const unsigned char* chunks, int tid, unsigned (&a)[FRAGS][4],
                                                 Issue&& issue) {
  prepacked::decode_chunks<C::ADT, STEPS / 4>(chunks, tid, [](int) { return 0u; }, [&](int q, const prepacked::ChunkPairs<C::ADT>& pairs) {
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      const int j = 4 * q + s;
#pragma unroll
      for (int f = 0; f < 4; ++f) a[j % FRAGS][f] = pairs.pair(s, f);
      issue(j);
    }
  });
}

// What a consumer thread's k loop reads besides the weight rows it decodes: the stages and their
// barriers, its k slice's first step and its place in the tile.
struct ConsumerStage {
  unsigned char* smem;
  unsigned long long *full, *empty;
  int j0, cw, tid, row0;
  unsigned byte_t;
  FoldRow fold[2];  // W4A8: the fold constants of rows row0, row0 + 8 (the tile's)
  const void* a_rmsnorm_weight;  // RMSNORM: g [K], multiplied into the decoded weight
};

// A consumer warpgroup's k loop over k-tiles [kt_begin, kt_end), the CTA's k-tiles from `ring`
// on (its place in the stages' ring): decode its weight rows of each stage and issue the
// products with W columns of D (wgmma's N, at most BM). Steps go to the tensor
// cores in commits of COMMIT_STEPS (see gemm_w4a16); fragments alternate between two sets where
// a k-tile holds an even number of commits (CARRY).
template <class C, int STEPS, int COMMIT_STEPS, int W, int FRAGS>
__device__ __forceinline__ void consumer_k_loop(const ConsumerStage& st, int ring, int kt_begin, int kt_end, const int (&w_row)[2],
                                                const int (&w_swizzle)[2], bool (&nan_scale)[2], unsigned (&a)[FRAGS][4],
                                                float (&acc)[C::BM / 2]) {
  using Op = typename C::Operand;
  constexpr bool CARRY = !C::WARP_MMA && STEPS % (2 * COMMIT_STEPS) == 0;
  const int j0 = st.j0, cw = st.cw, tid = st.tid, row0 = st.row0;
  const unsigned byte_t = st.byte_t;
  auto stage = [&](int s) { return st.smem + s * C::STAGE_BYTES; };
  // Every thread arrives: an arrive releases its own thread's reads of the stage only (PTX
  // memory model), so one lane's would leave the others' unordered before the refill.
  // Predicated, not branched (a branch in flight makes ptxas serialize the wgmmas).
  auto release = [&](int stage_index) {
    mbar_arrive_if(&st.empty[stage_index < 0 ? 0 : stage_index], stage_index >= 0);
  };
  unsigned long long* full = st.full;
  int held = -1;  // the previous tile's stage, while its last commit may be in flight
  for (int kt = kt_begin, i = ring; kt < kt_end; ++kt, ++i) {
    const int s = i % C::STAGES;
    unsigned norm_pairs[STEPS][2];  // RMSNORM: g's pairs for this k-tile's steps (read before the wait)
    if constexpr (C::RMSNORM != A_RMSNORM_NONE)
      load_a_rmsnorm_pairs<C::ADT, C::RMSNORM, C::K, STEPS>(st.a_rmsnorm_weight, (long long)kt * C::BK + 16 * j0, tid % 4,
                                                            norm_pairs);
    mbar_wait(&full[s], (i / C::STAGES) & 1);
    // Local step j's activations start (j / 4) boxes and (j % 4) * 32 bytes after the k slice's.
    const unsigned desc_lo = sw128_desc_lo(stage(s) + j0 / 4 * C::A_BOX_BYTES);
    // WARP_MMA: an ldmatrix.x4 brings the four 8 x 8 matrices of activations (8 rows, 8 k) of
    // steps j and j + 1 (j even). Lane l gives row l % 8 of matrix l / 8: activation row l % 8,
    // 16-byte chunk 2 (j % 4) + l / 8 of the box, under the 128-byte swizzle (chunk ^ row).
    const unsigned b_row = smem_u32(stage(s) + j0 / 4 * C::A_BOX_BYTES) + (tid % 8) * 128;
    const unsigned b_chunk = ((tid % 32 / 8) ^ (tid % 8)) << 4;
    // Step j's A fragment is in a[j % FRAGS]; at a commit's end, its MMAs.
    auto issue = [&](int j) {
      if (j % COMMIT_STEPS != COMMIT_STEPS - 1) return;
      if constexpr (C::RMSNORM != A_RMSNORM_NONE) {
#pragma unroll
        for (int jj = j + 1 - COMMIT_STEPS; jj <= j; ++jj) apply_a_rmsnorm<C::ADT>(a[jj % FRAGS], norm_pairs[jj]);
      }
      if constexpr (C::WARP_MMA) {
        static_assert(COMMIT_STEPS % 2 == 0, "two steps an ldmatrix");
#pragma unroll
        for (int jj = j + 1 - COMMIT_STEPS; jj <= j; jj += 2) {
          unsigned b[4];
          ldmatrix_x4(b_row + unsigned((jj / 4) * C::A_BOX_BYTES) + (b_chunk ^ unsigned((jj % 4) * 32)), b);
          mma_m16n8k16<C::ADT>(acc, a[jj % FRAGS], b[0], b[1]);
          mma_m16n8k16<C::ADT>(acc, a[(jj + 1) % FRAGS], b[2], b[3]);
        }
        return;
      }
      wgmma_fence();
#pragma unroll
      for (int jj = j + 1 - COMMIT_STEPS; jj <= j; ++jj)
        wgmma<W, C::ADT>(acc, a[jj % FRAGS], sw128_desc(desc_lo + unsigned(((jj / 4) * C::A_BOX_BYTES + (jj % 4) * 32) >> 4)));
      wgmma_commit();
      wgmma_wait<1>();
      if (CARRY && j == COMMIT_STEPS - 1) release(held);
    };
    if constexpr (C::FP8)
      decode_prepacked_fp8<STEPS, FRAGS>(stage(s) + C::W_AT + cw * C::CHUNK_RUN + j0 / 2 * prepacked::CHUNK_BYTES, tid,
                                         st.fold, a, issue);
    else if constexpr (C::PREPACKED)
      decode_prepacked<C, STEPS, FRAGS>(stage(s) + C::W_AT + cw * C::CHUNK_RUN + j0 / 4 * prepacked::CHUNK_BYTES,
                                            tid, a, issue);
    else
      decode_modelopt<C, Op, STEPS, COMMIT_STEPS, FRAGS>(stage(s) + C::W_AT, stage(s) + C::SCALE_AT, row0, j0, byte_t, w_row,
                                                  w_swizzle, nan_scale, a, issue);
    if constexpr (CARRY) {
      held = s;
    } else {
      if constexpr (!C::WARP_MMA) wgmma_wait<0>();
      release(s);
    }
  }
  if constexpr (!C::WARP_MMA) wgmma_wait<0>();
  release(held);  // the last stage (a persistent CTA's producers refill it)
}

// consumer_k_loop at the narrowest of the tile's MMA widths, from width I on, that holds `rows`.
template <class C, int STEPS, int COMMIT_STEPS, int I, int FRAGS>
__device__ __forceinline__ void narrowed_k_loop(long long rows, const ConsumerStage& st, int ring, int kt_begin, int kt_end,
                                                const int (&w_row)[2], const int (&w_swizzle)[2], bool (&nan_scale)[2],
                                                unsigned (&a)[FRAGS][4], float (&acc)[C::BM / 2]) {
  constexpr int W = narrow_mma_width(C::BM, I);
  if constexpr (I + 1 < narrow_mma_width_count(C::BM)) {
    if (rows > W) {
      narrowed_k_loop<C, STEPS, COMMIT_STEPS, I + 1>(rows, st, ring, kt_begin, kt_end, w_row, w_swizzle, nan_scale, a, acc);
      return;
    }
  }
  consumer_k_loop<C, STEPS, COMMIT_STEPS, W>(st, ring, kt_begin, kt_end, w_row, w_swizzle, nan_scale, a, acc);
}

// A consumer thread's share of a finished tile: k slices and split-K partial sums added, the
// global scales, alpha and bias applied, D stored.
template <class C>
__device__ __forceinline__ void store_tile(const GemmParams& p, const ScheduledTile& tile, float (&acc)[C::BM / 2],
                                           unsigned char* smem, int cw, int kslice, unsigned rank,
                                           PendingCounts<C::BM, 128 * C::WG>& counts) {
  // Partial tiles go to this CTA's (now idle) stage memory (a persistent CTA's to a region of
  // their own: its stages hold the next tile), 4 bytes per consumer thread of k group 0 and
  // accumulator, which (in order) adds those of k slice 1 and then, on rank 0, those of the
  // cluster's other CTAs in rank order: deterministic, no workspace.
  float* partial = reinterpret_cast<float*>(smem + (C::PERSISTENT ? C::PARTIAL_AT : 0));
  const int ctid = threadIdx.x % (128 * C::WG);
  const bool summing = kslice == 0;  // holds the sums in the end
  if constexpr (C::KSLICES > 1) {
    named_barrier(1, 128 * C::CONSUMERS);  // every consumer is done reading the stages
    if (kslice == 1) {
#pragma unroll
      for (int i = 0; i < C::BM / 2; ++i) partial[i * 128 * C::WG + ctid] = acc[i];
    }
    named_barrier(1, 128 * C::CONSUMERS);
    if (summing) {
#pragma unroll
      for (int i = 0; i < C::BM / 2; ++i) acc[i] += partial[i * 128 * C::WG + ctid];
    }
  }
  if (C::KSPLIT > 1 && tile.split) {  // uniform over the cluster
    named_barrier(1, 128 * C::CONSUMERS);  // every consumer is done reading the stages
    if (summing && rank != 0) {
#pragma unroll
      for (int i = 0; i < C::BM / 2; ++i) partial[i * 128 * C::WG + ctid] = acc[i];
    }
    cluster_sync();
    if (summing && rank == 0) {
      for (unsigned r = 1; r < C::KSPLIT; ++r) {
#pragma unroll
        for (int i = 0; i < C::BM / 2; ++i) acc[i] += ld_shared_cluster(&partial[i * 128 * C::WG + ctid], r);
      }
    }
    cluster_sync<false>();  // peers keep their shared memory until rank 0 has read it
    if (rank != 0) return;
  }
  if (!summing) return;

  // acc[4j + 2h + e] is D^T[row0 + 8h, 8j + 2t + e], i.e. D[m0 + 8j + 2t + e, n0 + row0 + 8h]
  const int tid = threadIdx.x % 128, lane = tid % 32, t = lane % 4;
  const int row0 = cw * 64 + (tid / 32) * 16 + lane / 4;
  const long long N = p.n, m0 = tile.m0, m_end = tile.m_end;
  const int n0 = tile.n_tile * C::BN;
  constexpr bool BATCHED = C::GROUPED == GROUPED_BATCHED;
  // A's global scale (W4A4) is per row of D when a device vector; otherwise (one, or the tile's
  // group's) folded in here.
  const bool a_per_row = p.a_gscale_mode == GSCALE_DEVICE_PER_ROW;
  const float a_scale = a_per_row                                   ? 1.0f
                        : p.a_gscale_mode == GSCALE_DEVICE_PER_GROUP ? p.a_gscale_ptr[tile.group]
                                                                     : global_scale(p.a_gscale_mode, p.a_gscale_value, p.a_gscale_ptr, 0);
  const float scale = p.alpha * global_scale(p.w_gscale_mode, p.w_gscale_value, p.w_gscale_ptr, tile.group) * a_scale *
                      float(1u << C::SHIFT);
  float bias[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const long long n = n0 + row0 + 8 * h;
    // SwiGLU's bias: gate's N/2 values, then up's (weight row n is gate or up n / 16 * 8 + n % 8)
    const long long at = C::EPILOGUE == EPILOGUE_SWIGLU ? h * (N / 2) + n / 16 * 8 + n % 8 : n;
    bias[h] = n < N ? load_bias<C::BIAS>(p.bias, at) : 0.0f;
  }
  // D's values, in place. A's per-row scales (W4A4) in a loop of their own: tested in the loop
  // for every value, they make each value a branch (16 instructions a value in SASS). Each lane
  // loads every 32nd row's scale, and a warp's values come by shuffle (loaded per value, the
  // loads are hoisted and spill registers).
  // RMSNORM's rows' 1 / rms (the producers', sm90/a_rmsnorm.cuh) are per-row factors too.
  if (a_per_row || C::RMSNORM != A_RMSNORM_NONE) {
    const float* row_inv_rms = reinterpret_cast<const float*>(smem + C::RMS_AT);
    float lane_scales[(C::BM + 31) / 32];  // rows lane + 32q
#pragma unroll
    for (int q = 0; q < (C::BM + 31) / 32; ++q) {
      const int r = lane + 32 * q;
      const long long m = m0 + r;  // batched: A's rows are (m, group), m-major
      const bool in = m < m_end && r < C::BM;
      const float a_scale = in && a_per_row ? p.a_gscale_ptr[BATCHED ? m * C::GROUPS + tile.group : m] : 1.0f;
      lane_scales[q] = !in ? 0.0f : C::RMSNORM != A_RMSNORM_NONE ? a_scale * row_inv_rms[r] : a_scale;
    }
#pragma unroll
    for (int j = 0; j < C::BM / 8; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {  // row 8j + 2t + e of the tile
        const float row_scale = scale * __shfl_sync(0xFFFFFFFFu, lane_scales[j / 4], 8 * (j % 4) + 2 * t + e);
#pragma unroll
        for (int h = 0; h < 2; ++h) acc[4 * j + 2 * h + e] = acc[4 * j + 2 * h + e] * row_scale + bias[h];
      }
  } else {
#pragma unroll
    for (int i = 0; i < C::BM / 2; ++i) acc[i] = acc[i] * scale + bias[(i / 2) % 2];
  }
  if constexpr (C::RESIDUAL) {
    // read here, before this thread stores the same elements (the residual may be D itself)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const long long n = n0 + row0 + 8 * h;
#pragma unroll
      for (int j = 0; j < C::BM / 8; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const long long m = m0 + 8 * j + 2 * t + e;
          if (m < m_end && n < N) acc[4 * j + 2 * h + e] += load_element<C::ODT>(p.residual, m * p.residual_stride + n);
        }
    }
  }

  if constexpr (C::EPILOGUE == EPILOGUE_SWIGLU) {
    // Gate row g (h = 0) and up row g (h = 1) of the 8-row interleave: weight row n0 + row0 is
    // D's column (n0 + row0) / 16 * 8 + (n0 + row0) % 8. Element stores: the smem path's slabs
    // are whole 64-column tiles.
    const long long n = n0 + row0;
    // (NVFP4 D in the stages: every consumer is done with them, and with the partial sums)
    if constexpr (C::D_FP4 && !C::PERSISTENT) named_barrier(2, 128 * C::WG);
    if (n >= N && !C::D_FP4) return;  // (NVFP4 D: every consumer meets the staging's barriers)
#pragma unroll
    for (int j = 0; j < C::BM / 8; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) acc[4 * j + e] = silu_mul_fp32(acc[4 * j + e], acc[4 * j + 2 + e]);
    if constexpr (C::D_FP4) {
      static_assert(C::PERSISTENT || C::WG * kFp4StagingFloats<C::BM, false> * 4 <= C::STAGES * C::STAGE_BYTES);
      float* staging = reinterpret_cast<float*>(smem + C::STAGING_AT);
      store_swiglu_fp4<C::BM, C::WG, C::PERSISTENT>(p, m0, m_end, n0, acc, staging, cw);
      return;
    }
    const long long column = n / 16 * 8 + n % 8;
#pragma unroll
    for (int j = 0; j < C::BM / 8; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const long long m = m0 + 8 * j + 2 * t + e;
        if (m < m_end) store_element<C::ODT>(p.d, m * p.d_stride + column, acc[4 * j + e]);
      }
    return;
  }
  // D through shared memory where its tile fits in the stages: each consumer warpgroup's 64
  // columns as slabs of 128-byte rows (128-byte swizzle), one TMA store a slab. The element
  // stores below write four rows' 16 bytes per warp instruction, which costs at large M.
  constexpr int D_BYTES = C::ODT == DTYPE_FP32 ? 4 : 2, SLAB_COLS = 128 / D_BYTES;
  // (The MoE combine stores by element: its counts must follow stores of the generic proxy.)
  if constexpr (!C::PERSISTENT && C::EPILOGUE == EPILOGUE_NONE && C::BM % 16 == 0 &&
                C::WG * 64 * C::BM * D_BYTES <= C::STAGES * C::STAGE_BYTES) {
    if (p.d_from_smem) {
      // A grouped tile whose rows end before its box (the next group's rows follow) copies its
      // rows out 16 bytes a thread: a TMA store would clip at D's end only. (A batched group's
      // rows end where its D's do, which the 3D map clips.) Its rows, or 0: TMA.
      const int copy_rows = C::GROUPED != GROUPED_NONE && !BATCHED && m_end - m0 != p.schedule.m_step ? int(m_end - m0) : 0;
      named_barrier(2, 128 * C::WG);  // every consumer is done with the stages (and partial sums)
      unsigned char* slabs = smem + cw * 64 * C::BM * D_BYTES;  // this warpgroup's
      // D's element (m_local, column c of the warpgroup's 64) in the swizzled slabs
      auto at = [&](int m_local, int c) {
        const int chunk = c % SLAB_COLS * D_BYTES / 16;
        return smem_u32(slabs) + unsigned(c / SLAB_COLS * C::BM * 128 + m_local * 128 +
                                          ((chunk ^ (m_local % 8)) << 4) + c * D_BYTES % 16);
      };
      const int c0 = (tid / 32) * 16 + lane / 4;  // row0's column
      if constexpr (D_BYTES == 2) {
        // stmatrix.trans turns four 8 x 8 fragments (rows n, pairs of m) into 16-byte rows of D
        const int q = lane / 8, r = lane % 8;  // the matrix and row this lane addresses
#pragma unroll
        for (int j = 0; j < C::BM / 8; j += 2) {
          unsigned packed[4];  // matrix q: m from 8 (j + q / 2), n from row0 - lane / 4 + 8 (q % 2)
#pragma unroll
          for (int qq = 0; qq < 4; ++qq) {
            const int jj = j + qq / 2, h = qq % 2;
            packed[qq] = pack_pair<C::ODT>(acc[4 * jj + 2 * h], acc[4 * jj + 2 * h + 1]);
          }
          stmatrix_x4_trans(at(8 * (j + q / 2) + r, c0 - lane / 4 + 8 * (q % 2)), packed[0], packed[1], packed[2],
                            packed[3]);
        }
      } else {
        // FP32: one value a store; a warp's 32 land in distinct banks (4 rows x 8 columns, swizzled)
#pragma unroll
        for (int i = 0; i < C::BM / 2; ++i) {
          const int j = i / 4, h = (i / 2) % 2, e = i % 2;
          st_shared_f32(at(8 * j + 2 * t + e, c0 + 8 * h), acc[i]);
        }
      }
      if (copy_rows) {
        named_barrier(2, 128 * C::WG);
        constexpr int PIECE = 16 / D_BYTES, PIECES = 64 / PIECE;  // 16-byte pieces of a row's 64 columns
#pragma unroll 1
        for (int i = tid; i < copy_rows * PIECES; i += 128) {
          const int r = i / PIECES, col = i % PIECES * PIECE;  // the piece's row and first column
          const int chunk = col % SLAB_COLS / PIECE;
          const uint4 v = *reinterpret_cast<const uint4*>(slabs + col / SLAB_COLS * C::BM * 128 + r * 128 + ((chunk ^ (r % 8)) << 4));
          const long long n = n0 + cw * 64 + col;  // N is a multiple of PIECE (p.d_from_smem)
          if (n < N) *reinterpret_cast<uint4*>(static_cast<unsigned char*>(p.d) + ((m0 + r) * p.d_stride + n) * D_BYTES) = v;
        }
        return;
      }
      fence_proxy_async_shared();
      named_barrier(2, 128 * C::WG);
      if (tid == 0) {
#pragma unroll
        for (int s = 0; s < 64 / SLAB_COLS; ++s) {
          if constexpr (BATCHED)
            tma_store_3d(&p.tma_d, slabs + s * C::BM * 128, n0 + cw * 64 + s * SLAB_COLS, int(m0), tile.group);
          else
            tma_store_2d(&p.tma_d, slabs + s * C::BM * 128, n0 + cw * 64 + s * SLAB_COLS, int(m0));
        }
        bulk_commit();
        bulk_wait_read();  // the shared memory stays until the store has read it
      }
      return;
    }
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const long long n = n0 + row0 + 8 * h;
    if (n >= N) continue;
#pragma unroll
    for (int j = 0; j < C::BM / 8; ++j) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const long long m = m0 + 8 * j + 2 * t + e;
        if (m < m_end)
          store_element<C::ODT>(p.d, (BATCHED ? tile.group * p.d_group_stride : 0) + m * p.d_stride + n,
                                acc[4 * j + 2 * h + e]);
      }
    }
  }
  if constexpr (C::EPILOGUE == EPILOGUE_MOE_COMBINE) {
    // this tile's rows counted, then the previous tile's counts (returned by now) read
    const PendingCounts<C::BM, 128 * C::WG> previous = counts;
    count_tile<C::BN>(p.combine, tile.m0, tile.m_end, tile.n_tile, p.n, ctid, counts,
                      [] { named_barrier(3, 128 * C::WG); });  // (barrier 3: the combine's)
    finish_counts<C::ODT, C::BN>(p.combine, {p.d, p.d_stride, p.n}, previous, ctid);
  }
}

template <class C>
__device__ __forceinline__ void gemm_w4a16(const GemmParams& p) {
  extern __shared__ unsigned char smem_raw[];
  // 1024-byte aligned for the swizzles; derived from smem_raw so loads stay ld.shared
  unsigned char* smem = smem_raw + ((1024u - (smem_u32(smem_raw) & 1023u)) & 1023u);
  unsigned long long* full = reinterpret_cast<unsigned long long*>(smem + C::STAGES * C::STAGE_BYTES);
  unsigned long long* empty = full + C::STAGES;
  auto stage = [&](int s) { return smem + s * C::STAGE_BYTES; };

  // The warp index broadcast from lane 0: provably warp-uniform, so the branches on it stay
  // convergent and ptxas keeps stage addresses and wgmma descriptors in uniform registers.
  const int warp = __shfl_sync(0xFFFFFFFFu, int(threadIdx.x / 32), 0);
  const bool producer = warp >= 4 * C::CONSUMERS;
  const int ptid = threadIdx.x - 128 * C::CONSUMERS;  // producer thread
  const int cw = warp / 4 % C::WG;                     // consumer's row tile (64 weight rows)
  const int kslice = warp / 4 / C::WG;                 // consumer's k slice
  constexpr int STEPS = C::KSTEPS / C::KSLICES;        // k16 steps per stage and k slice
  const int j0 = kslice * STEPS;                       // the k slice's first step
  const long long N = p.n;
  const int n_tiles = int((N + C::BN - 1) / C::BN);
  const long long prepacked_row_blocks = (N + 127) / 128 * 2;  // 64-row blocks of a prepacked weight
  const unsigned rank = C::KSPLIT > 1 ? cluster_ctarank() : 0u;
  constexpr bool BATCHED = C::GROUPED == GROUPED_BATCHED;  // A and D are 3D maps {k or n, row, group}
  // the groups' sizes may be the previous kernel's output (a batched layout's are the host's)
  if constexpr (C::GROUPED != GROUPED_NONE && !BATCHED) griddep_wait();
  // The CTA's tiles: tile blockIdx.x, and with PERSISTENT every gridDim.x-th after it up to the
  // groups' last (every warp walks them, in increasing order, with its own cursor).
  KernelTileCursor<C::GROUPED, C::GROUPS> cursor;
  auto tile_at = [&](int index, bool cursor_first) {
    if constexpr (C::GROUPED == GROUPED_NONE)
      return schedule_tile<C::KSPLIT>(p.schedule, index, rank, n_tiles, C::KTILES);
    else if (cursor_first)
      return cursor.first(p.schedule, unplaced_grouped_tile(index, n_tiles, C::KTILES));
    else
      return cursor.place(p.schedule, unplaced_grouped_tile(index, n_tiles, C::KTILES));
  };
  const ScheduledTile first = tile_at(int(blockIdx.x), true);
  if (C::GROUPED != GROUPED_NONE && first.m0 >= first.m_end) return;  // past the groups' tiles: the whole CTA
  const int tile_indices = C::PERSISTENT ? p.schedule.m_tiles * n_tiles : 0;
  // After tile `index` of the CTA's, the next one: false past its last.
  auto next_tile = [&](int& index, ScheduledTile& tile) {
    if (!C::PERSISTENT || index >= tile_indices - int(gridDim.x)) return false;  // (no int overflow)
    index += int(gridDim.x);
    tile = tile_at(index, false);
    return tile.m0 < tile.m_end;
  };

  constexpr bool a_by_threads = C::A_FP4;  // A not loaded by TMA: decoded from NVFP4 by the producer warps
  if (threadIdx.x == 0) {
    for (int s = 0; s < C::STAGES; ++s) {
      // the TMA thread (+ one per scale row) (+ the lanes of the warp decoding A)
      mbar_init(&full[s], (C::PREPACKED ? 1 : 1 + C::BN) + (C::A_FP4 ? 32 : 0));
      mbar_init(&empty[s], 128 * C::CONSUMERS + (C::RMS_FROM_STAGES ? C::RMS_THREADS : 0));
    }
    fence_barrier_init();
  }
  __syncthreads();
  if constexpr (C::REALLOCATE) {
    if (producer) setmaxnreg_dec<C::PRODUCER_REGS>();
    else setmaxnreg_inc<C::CONSUMER_REGS>();
  }

  if (producer) {
    // Thread 0 issues the TMA loads; thread r < BN stages weight row r's 8 scales of the tile,
    // so scales arrive STAGES tiles ahead like the rest (a prepacked weight brings its own).
    // One stage is the weights' part (and the expected bytes of both) then the activations'.
    auto load_weights = [&](const ScheduledTile& tile, int kt, int s) {
      // the tile's weight: its group's, rows n0.. of the group's N
      const unsigned char* w_scales = p.w_scales + tile.group * p.w_group_bytes;
      const int n0 = tile.n_tile * C::BN;
      if (ptid == 0) {
        // A prepacked weight's rows are padded to 128 only: with three consumers the last
        // CTA's last 64 rows may lie past them, and are neither loaded nor stored.
        const int row_blocks = C::PREPACKED && C::WG == 3 && n0 / 64 + C::WG > prepacked_row_blocks
                                   ? int(prepacked_row_blocks - n0 / 64) : C::WG;
        mbar_arrive_expect_tx(&full[s], (a_by_threads ? 0 : C::W_AT) + (C::PREPACKED ? row_blocks * C::CHUNK_RUN : C::W_BYTES));
        if constexpr (C::PREPACKED) {
#pragma unroll
          for (int g = 0; g < C::WG; ++g)
            if (g < row_blocks)
              bulk_load(stage(s) + C::W_AT + g * C::CHUNK_RUN,
                        w_scales + prepacked::chunk_offset(n0 / 64 + g, (long long)kt * C::CHUNKS, C::K), C::CHUNK_RUN,
                        &full[s]);
        } else {
          tma_load_2d(stage(s) + C::W_AT, &p.tma_w, &full[s], kt * C::W_ROW, tile.group * int(N) + n0);
        }
      }
      if constexpr (!C::PREPACKED) {
        if (ptid < C::BN)
          stage_tile_scales<C>(reinterpret_cast<unsigned*>(stage(s) + C::SCALE_AT) + ptid * (C::BK / 64), w_scales,
                               n0 + ptid, kt, &full[s], N);
      }
    };
    // Stage `ring_index` of the ring (s = its place) decoded by producer warp ring_index % 4:
    // each warp waits on its own loads while the other three go on to the next stages.
    auto decode_activations = [&](const ScheduledTile& tile, int kt, int s, int ring_index) {
      if (ring_index % 4 != ptid / 32) return;
      decode_fp4_activations<C>(p, tile, kt, stage(s), ptid % 32);
      fence_proxy_async_shared();  // the stores, to wgmma
      mbar_arrive(&full[s]);
    };
    auto load_activations = [&](const ScheduledTile& tile, int kt, int s, int ring_index) {
      if constexpr (C::A_FP4) {
        decode_activations(tile, kt, s, ring_index);
      } else if (ptid == 0) {
#pragma unroll
        for (int b = 0; b < C::A_BOXES; ++b) {
          if constexpr (BATCHED)
            tma_load_3d(stage(s) + b * C::A_BOX_BYTES, &p.tma_a, &full[s], kt * C::BK + 64 * b, int(tile.m0), tile.group);
          else
            tma_load_2d(stage(s) + b * C::A_BOX_BYTES, &p.tma_a, &full[s], kt * C::BK + C::A_BOX_COLS * b, int(tile.m0));
        }
      }
    };
    // A prepacked weight's stages are the TMA thread's alone: its warp walks the tiles
    // (the cursor takes a whole warp).
    if (!C::PREPACKED || ptid < 32 || a_by_threads) {
      if (ptid == 0) {
        if constexpr (!C::A_FP4) prefetch_tensor_map(&p.tma_a);
        if constexpr (!C::PREPACKED) prefetch_tensor_map(&p.tma_w);
      }
      int ring = 0;  // k-tiles this CTA has loaded: the next one's place in the ring
      ScheduledTile tile = first;
      int index = int(blockIdx.x);
      do {
        const bool first_tile = index == int(blockIdx.x);
        // The weights are no previous kernel's output (GemmArgs::weights_static): the first
        // stages' weights are requested before waiting for that kernel, the activations after.
        // Three stages, not the whole ring: the activations queue behind every request made
        // before them, and with the whole ring ahead the consumers start late (docs/perf.md).
        const int tiles = tile.kt_end - tile.kt_begin, early = first_tile ? min(min(tiles, C::STAGES), 3) : 0;
        for (int i = 0; i < early; ++i) load_weights(tile, tile.kt_begin + i, i);
        if (first_tile) griddep_wait();
        for (int i = 0; i < early; ++i) load_activations(tile, tile.kt_begin + i, i, ring + i);
        for (int i = early; i < tiles; ++i) {
          const int r = ring + i, s = r % C::STAGES;
          if (r >= C::STAGES) mbar_wait(&empty[s], ((r / C::STAGES) & 1) ^ 1, 1000);
          load_weights(tile, tile.kt_begin + i, s);
          load_activations(tile, tile.kt_begin + i, s, r);
        }
        ring += tiles;
      } while (next_tile(index, tile));
    }
    if constexpr (C::RMSNORM != A_RMSNORM_NONE) {
      // The tile's rows' 1 / rms, by the threads with no copies to issue (a prepacked weight's
      // warps 1..3, beside warp 0's loads), else by all after theirs; the consumers wait for them
      // before the epilogue. (Split K: rank 0's alone, which stores D.)
      const int warp_in = ptid / 32, first_warp = C::PREPACKED ? 1 : 0;
      float* row_inv_rms = reinterpret_cast<float*>(smem + C::RMS_AT);
      if constexpr (C::RMS_FROM_STAGES) {
        if (warp_in >= 1)
          a_rmsnorm_rows_from_stages<C::ADT, C::K, C::BM, C::STAGES, C::STAGE_BYTES, C::A_BOXES,
                                     (C::BM + C::RMS_THREADS - 1) / C::RMS_THREADS>(
              p, smem, full, empty, 0, first.kt_begin, first.kt_end, first.m0, first.m_end, ptid - 32, C::RMS_THREADS,
              row_inv_rms);
      } else if (warp_in >= first_warp && rank == 0) {
        griddep_wait();  // A may be the previous kernel's output
        a_rmsnorm_rows<C::ADT, C::K, C::BM>(p, first.m0, first.m_end, warp_in - first_warp, 4 - first_warp, row_inv_rms);
      }
      named_barrier_arrive(kRmsBarrier, C::THREADS);
    }
    griddep_launch_dependents();
    // The producers' work ends here: the code below is the consumers' alone, so ptxas may give
    // it the consumers' registers (code both reach would get the producers' few).
    return;
  }

  const int tid = threadIdx.x % 128, lane = tid % 32, t = lane % 4;
  const int row0 = cw * 64 + (tid / 32) * 16 + lane / 4;  // this thread's rows: row0, row0 + 8
  const unsigned byte_t = 0x4440u | unsigned(t);                // byte t of a word, zeros above
  // Where this thread's rows start in a stage's weights, and their TMA swizzle: the 16-byte
  // chunk index is XORed with address bits 7.. (64-byte span: (r/2)%4, 128-byte: r%8).
  int w_row[2], w_swizzle[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    w_row[h] = (row0 + 8 * h) * C::W_ROW;
    w_swizzle[h] = ((w_row[h] >> 7) & (C::W_ROW / 16 - 1)) << 4;
  }
  // Steps go to the tensor cores in commits of COMMIT_STEPS, and wait<1> keeps one commit in
  // flight while the next is decoded: four steps (one 64-k chunk) for small BM, else two (more
  // wgmma work queued), or one where the accumulators leave too few registers (two consumers
  // above 192 rows) or two measured slower (docs/perf.md).
  // Fragments alternate between two sets of COMMIT_STEPS where a k-tile holds an even number of
  // commits: its last commit then stays in flight into the next tile, whose first commit writes
  // the other set, and its stage is released once that first commit is issued (wait<1>:
  // every earlier commit complete). Otherwise a tile drains before the next one's decode
  // rewrites the fragments.
  constexpr int COMMIT_K16 = C::BM <= 64 ? 4 : C::WG == 1 || (C::WG == 2 && C::BM <= 192) || (C::WG == 3 && C::BM <= 128) ? 2 : 1;
  // a k32 step (W4A8) is two k16 steps' MMA: half as many a commit
  constexpr int COMMIT_STEPS = C::FP8 ? (COMMIT_K16 > 1 ? COMMIT_K16 / 2 : 1) : COMMIT_K16;
  static_assert(STEPS % COMMIT_STEPS == 0, "whole commits a stage");
  constexpr bool CARRY = !C::WARP_MMA && STEPS % (2 * COMMIT_STEPS) == 0;
  constexpr int FRAGS = CARRY ? 2 * COMMIT_STEPS : COMMIT_STEPS;
  unsigned a[FRAGS][4];
  ConsumerStage st{smem, full, empty, j0, cw, tid, row0, byte_t, {}, p.a_rmsnorm_weight};
  PendingCounts<C::BM, 128 * C::WG> counts;  // EPILOGUE_MOE_COMBINE: the last stored tile's
  counts.clear();
  int ring = 0;    // k-tiles this CTA has consumed
  ScheduledTile tile = first;
  int index = int(blockIdx.x);
  do {
    const int n0 = tile.n_tile * C::BN;
    bool nan_scale[2] = {false, false};  // a NaN block scale makes the row's outputs NaN
    if constexpr (C::PREPACKED) {  // read now, used after the loop: the latency hides behind it
      // (rows in the other epilogue's order, too: prepacked_weight.cuh's row bytes)
      constexpr unsigned char READS = C::EPILOGUE == EPILOGUE_SWIGLU ? prepacked::ROW_SWIGLU_ORDER : 0;
      const unsigned char* nan_rows =
          p.w_scales + tile.group * p.w_group_bytes + prepacked::nan_rows_offset(N, C::K) + n0 + row0;
      const bool in_rows = n0 + row0 < 64 * prepacked_row_blocks;  // row0 + 8: the same 64-row block
      nan_scale[0] = in_rows && nan_rows[0] != READS;
      nan_scale[1] = in_rows && nan_rows[8] != READS;
    }
    float fold_factor[2] = {1.0f, 1.0f};  // W4A8: 2^e of rows row0, row0 + 8, for D
    if constexpr (C::FP8) {
      const unsigned char* exponents =
          p.w_scales + tile.group * p.w_group_bytes + prepacked::fold_exponents_offset(N, C::K) + n0 + row0;
      const bool in_rows = n0 + row0 < 64 * prepacked_row_blocks;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int e = in_rows ? int(static_cast<signed char>(exponents[8 * h])) : 0;
        st.fold[h] = fold_row(e);
        fold_factor[h] = exp2_int(e);
      }
    }
    float acc[C::BM / 2];
#pragma unroll
    for (int i = 0; i < C::BM / 2; ++i) acc[i] = 0.0f;
    // The MMA's width (wgmma's N: rows of D) follows a grouped tile's rows (narrow_mma_width): a
    // group holding fewer rows than the tile issues no products for rows that are not there
    // (the accumulators past the width stay zero and are not stored).
    // One k loop per width, chosen once per tile (uniform over the CTA): a branch inside the
    // loop would have ptxas serialize the wgmmas.
    const int kt_begin = tile.kt_begin, kt_end = tile.kt_end;
    if constexpr (C::NARROW_MMA)
      narrowed_k_loop<C, STEPS, COMMIT_STEPS, 0>(tile.m_end - tile.m0, st, ring, kt_begin, kt_end, w_row, w_swizzle, nan_scale, a, acc);
    else
      consumer_k_loop<C, STEPS, COMMIT_STEPS, C::BM>(st, ring, kt_begin, kt_end, w_row, w_swizzle, nan_scale, a, acc);
    ring += kt_end - kt_begin;
    // acc[4j + 2h + e] belongs to row row0 + 8h
#pragma unroll
    for (int i = 0; i < C::BM / 2; ++i) {
      if constexpr (C::FP8) acc[i] *= fold_factor[(i / 2) % 2];  // exact: a power of two
      if (nan_scale[(i / 2) % 2]) acc[i] = __int_as_float(0x7FC00000);
    }
    // The next kernel on the stream may launch once every CTA is this far (when it allows it):
    // its CTAs then stream their weights while this one finishes.
    griddep_launch_dependents();
    // the epilogue reads the global scales and bias and writes D, which the previous kernel
    // may write or read
    griddep_wait();
    if constexpr (C::RMSNORM != A_RMSNORM_NONE) named_barrier(kRmsBarrier, C::THREADS);  // the rows' 1 / rms are in
    store_tile<C>(p, tile, acc, smem, cw, kslice, rank, counts);
  } while (next_tile(index, tile));
  if constexpr (C::EPILOGUE == EPILOGUE_MOE_COMBINE)
    if (kslice == 0) finish_counts<C::ODT, C::BN>(p.combine, {p.d, p.d_stride, p.n}, counts, threadIdx.x % (128 * C::WG));
}

}  // namespace nvfp4k::sm90
