// NVFP4-weight GEMM on Hopper: D[M, N] = alpha * gw * A[M, K] . W[N, K]^T (+ bias[N]), with A in
// BF16 or FP16 and W in NVFP4 (ModelOpt layout, either scale layout).
//
// The product runs transposed, D^T = W . A^T, so the weight is wgmma's A operand and comes from
// registers: each consumer thread turns the staged packed bytes it owns into exact BF16/FP16
// pairs (value * block scale, see common/mma_operand.cuh) and decoded weights never touch
// shared memory. The activations are wgmma's B operand (TMA, 128-byte swizzle) and M is
// wgmma's N, so a decode call with M = 1 runs m64n8k16.
//
// Warpgroup 0 produces: one thread issues the TMA loads of a STAGES-deep ring guarded by
// mbarriers; its threads also stage the tiles' block scales (cp.async). Warpgroups 1..WG
// consume, 64 weight rows each. With KSPLIT > 1 the CTAs of a cluster split K and rank 0
// sums the partial tiles through distributed shared memory, in rank order (deterministic,
// no workspace).
#pragma once
#include "common/gemm_epilogue.cuh"
#include "common/global_scale.cuh"
#include "common/mma_operand.cuh"
#include "common/params.cuh"
#include "common/scale_layout.cuh"
#include "sm90/ptx.cuh"

namespace nvfp4k::sm90 {

template <int ADT_, int ODT_, int BIAS_, long long N_, long long K_, int LAYOUT_, int WG_, int BM_, int BK_,
          int STAGES_, int KSPLIT_>
struct GemmConfig {
  static constexpr int ADT = ADT_, ODT = ODT_, BIAS = BIAS_, LAYOUT = LAYOUT_;
  static constexpr long long N = N_, K = K_;
  static constexpr int WG = WG_, BM = BM_, STAGES = STAGES_, KSPLIT = KSPLIT_;
  static constexpr int BK = BK_;          // K per stage: 128 or 256
  static constexpr int KSTEPS = BK / 16;  // wgmma k16 steps per stage
  static constexpr int A_BOXES = BK / 64; // 64-column activation boxes per stage
  static constexpr int W_ROW = BK / 2;    // packed bytes per weight row and stage (64 or 128: the TMA swizzle span)
  static constexpr int BN = 64 * WG;
  static constexpr long long KB = K / 16;                    // scale blocks per weight row
  static constexpr long long KB_PADDED = (KB + 3) / 4 * 4;   // swizzled layout: KB rounded up to 4
  static constexpr int KTILES = int((K + BK - 1) / BK);
  static constexpr int A_BOX_BYTES = BM * 128;  // BM rows x 64 columns, 128-byte swizzle
  static constexpr int W_BYTES = BN * W_ROW;    // BN rows, swizzled over W_ROW bytes
  static constexpr int SCALE_BYTES = 8 * BK;    // BN rows x BK/16 E4M3 scales, padded to keep alignment
  static constexpr int STAGE_BYTES = A_BOXES * A_BOX_BYTES + W_BYTES + SCALE_BYTES;
  static constexpr int W_AT = A_BOXES * A_BOX_BYTES;   // offset of the weights in a stage
  static constexpr int SCALE_AT = W_AT + W_BYTES;       // offset of the scales in a stage
  static constexpr int SMEM_BYTES = 1024 + STAGES * STAGE_BYTES + 2 * STAGES * 8;
  static constexpr int THREADS = 128 * (WG + 1);
  static_assert(K % 32 == 0 && BM % 8 == 0 && BM <= 256 && (WG == 1 || WG == 2) && (BK == 128 || BK == 256));
  static_assert(STAGE_BYTES % 1024 == 0, "stages must keep the 1024-byte swizzle alignment");
  static_assert(KSPLIT == 1 || BN * BM * 4 <= STAGES * STAGE_BYTES, "split-K partials reuse the stage memory");
};

// Stages the BK/16 scale bytes of weight row `row` for k-tile `kt` at `dst` and arrives on
// `bar` when they have landed; zeros past K and N. Asynchronous (cp.async, 4-byte pieces of
// 4 blocks) whenever the rows allow it, else plain loads.
template <class C>
__device__ __forceinline__ void stage_tile_scales(unsigned* dst, const unsigned char* scales, long long row, int kt,
                                                  unsigned long long* bar) {
  constexpr int PIECES = C::BK / 64;
  const long long kb0 = (long long)(C::BK / 16) * kt;
  const bool in_rows = row < C::N;
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

template <class C, class Mma>
__device__ __forceinline__ void gemm_w4a16(const GemmParams& p) {
  using Op = Fp4Operand<C::ADT>;
  extern __shared__ unsigned char smem_raw[];
  // 1024-byte aligned for the swizzles; derived from smem_raw so loads stay ld.shared
  unsigned char* smem = smem_raw + ((1024u - (smem_u32(smem_raw) & 1023u)) & 1023u);
  unsigned long long* full = reinterpret_cast<unsigned long long*>(smem + C::STAGES * C::STAGE_BYTES);
  unsigned long long* empty = full + C::STAGES;
  auto stage = [&](int s) { return smem + s * C::STAGE_BYTES; };

  const int wg = threadIdx.x / 128;
  const int n0 = blockIdx.x * C::BN;
  const long long m0 = (long long)blockIdx.y * C::BM;
  const unsigned rank = C::KSPLIT > 1 ? cluster_ctarank() : 0u;
  const int kt_begin = int(rank * C::KTILES / C::KSPLIT), kt_end = int((rank + 1) * C::KTILES / C::KSPLIT);

  if (threadIdx.x == 0) {
    for (int s = 0; s < C::STAGES; ++s) {
      mbar_init(&full[s], 1 + C::BN);  // the TMA thread + one per scale row
      mbar_init(&empty[s], 4 * C::WG);
    }
    fence_barrier_init();
  }
  __syncthreads();

  float acc[C::BM / 2];
  if (wg == 0) {
    // Thread 0 issues the TMA loads; thread r < BN stages weight row r's 8 scales of the tile,
    // so scales arrive STAGES tiles ahead like the rest.
    for (int kt = kt_begin, i = 0; kt < kt_end; ++kt, ++i) {
      const int s = i % C::STAGES;
      if (i >= C::STAGES) mbar_wait(&empty[s], ((i / C::STAGES) & 1) ^ 1);
      if (threadIdx.x == 0) {
        if (i == 0) {
          prefetch_tensor_map(&p.tma_a);
          prefetch_tensor_map(&p.tma_w);
        }
        mbar_arrive_expect_tx(&full[s], C::W_AT + C::W_BYTES);
#pragma unroll
        for (int b = 0; b < C::A_BOXES; ++b)
          tma_load_2d(stage(s) + b * C::A_BOX_BYTES, &p.tma_a, &full[s], kt * C::BK + 64 * b, int(m0));
        tma_load_2d(stage(s) + C::W_AT, &p.tma_w, &full[s], kt * C::W_ROW, n0);
      }
      if (threadIdx.x < C::BN)
        stage_tile_scales<C>(reinterpret_cast<unsigned*>(stage(s) + C::SCALE_AT) + threadIdx.x * (C::BK / 64),
                             p.w_scales, n0 + threadIdx.x, kt, &full[s]);
    }
  } else {
    const int tid = threadIdx.x % 128, lane = tid % 32, t = lane % 4;
    const int row0 = (wg - 1) * 64 + (tid / 32) * 16 + lane / 4;  // this thread's rows: row0, row0 + 8
    const unsigned byte_t = 0x4440u | unsigned(t);                // byte t of a word, zeros above
    // Where this thread's rows start in a stage's weights, and their TMA swizzle: the 16-byte
    // chunk index is XORed with address bits 7.. (64-byte span: (r/2)%4, 128-byte: r%8).
    int w_row[2], w_swizzle[2];
    bool nan_scale[2] = {false, false};  // a NaN block scale makes the row's outputs NaN
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      w_row[h] = (row0 + 8 * h) * C::W_ROW;
      w_swizzle[h] = ((w_row[h] >> 7) & (C::W_ROW / 16 - 1)) << 4;
    }
#pragma unroll
    for (int i = 0; i < C::BM / 2; ++i) acc[i] = 0.0f;

    for (int kt = kt_begin, i = 0; kt < kt_end; ++kt, ++i) {
      const int s = i % C::STAGES;
      mbar_wait(&full[s], (i / C::STAGES) & 1);
      // The tile's scales of both rows as pairs: word q covers steps 4q..4q+3, pairs[h][q][0]
      // holds steps 4q and 4q+2 in its lanes, pairs[h][q][1] steps 4q+1 and 4q+3.
      const unsigned* tile_scales = reinterpret_cast<const unsigned*>(stage(s) + C::SCALE_AT);
      unsigned pairs[2][C::BK / 64][2];
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int q = 0; q < C::BK / 64; ++q) {
          const unsigned word = tile_scales[(row0 + 8 * h) * (C::BK / 64) + q];
          nan_scale[h] |= Op::has_nan_scale(word);
          pairs[h][q][0] = Op::scale_pairs(word, false);
          pairs[h][q][1] = Op::scale_pairs(word, true);
        }
      const unsigned char* w = stage(s) + C::W_AT;

      // Step j's A fragment: {row0, k 2t..2t+1}, {row0+8, same}, {row0, k 2t+8..2t+9}, {row0+8, same},
      // from byte t of the two words of the step's 8 packed bytes per row.
      auto decode = [&](unsigned (&a)[4], int j, int h, uint2 v) {
        const unsigned scales = pairs[h][j / 4][j % 2];
        if ((j % 4) / 2 == 0) {
          a[h] = Op::template scaled<0>(Op::place(__byte_perm(v.x, 0u, byte_t)), scales);
          a[h + 2] = Op::template scaled<0>(Op::place(__byte_perm(v.y, 0u, byte_t)), scales);
        } else {
          a[h] = Op::template scaled<1>(Op::place(__byte_perm(v.x, 0u, byte_t)), scales);
          a[h + 2] = Op::template scaled<1>(Op::place(__byte_perm(v.y, 0u, byte_t)), scales);
        }
      };
      // Steps go to the tensor cores in groups of GROUP: a whole tile at once for small BM
      // (latency bound: decode the tile, then back-to-back wgmmas; the weights come in as one
      // 16-byte load per two steps), one at a time for large BM (register bound: 128
      // accumulators; wait<1> keeps one step in flight while the next is decoded).
      constexpr int GROUP = C::BM <= 64 ? C::KSTEPS : 1;
#pragma unroll
      for (int j0 = 0; j0 < C::KSTEPS; j0 += GROUP) {
        unsigned a[GROUP][4];
        if constexpr (GROUP == 1) {
#pragma unroll
          for (int h = 0; h < 2; ++h)
            decode(a[0], j0, h,
                   *reinterpret_cast<const uint2*>(w + w_row[h] + ((((j0 / 2) << 4) ^ w_swizzle[h]) | (j0 % 2) * 8)));
        } else {
#pragma unroll
          for (int j = 0; j < GROUP; j += 2)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              const uint4 v = *reinterpret_cast<const uint4*>(w + w_row[h] + (((j / 2) << 4) ^ w_swizzle[h]));
              decode(a[j], j, h, make_uint2(v.x, v.y));
              decode(a[j + 1], j + 1, h, make_uint2(v.z, v.w));
            }
        }
        wgmma_fence();
#pragma unroll
        for (int jj = 0; jj < GROUP; ++jj) {
          const int j = j0 + jj;
          Mma::mma(acc, a[jj], smem_desc_sw128(stage(s) + (j / 4) * C::A_BOX_BYTES + (j % 4) * 32));
        }
        wgmma_commit();
        if constexpr (GROUP == 1) wgmma_wait<1>();
      }
      // Drain before the next tile's decode: registers a wgmma still reads must not be
      // rewritten, and ptxas does not track that across the loop's back edge.
      wgmma_wait<0>();
      __syncwarp();
      if (lane == 0) mbar_arrive(&empty[s]);  // the stage may be refilled
    }
    // acc[4j + 2h + e] belongs to row row0 + 8h
#pragma unroll
    for (int i = 0; i < C::BM / 2; ++i)
      if (nan_scale[(i / 2) % 2]) acc[i] = __int_as_float(0x7FC00000);
  }

  if constexpr (C::KSPLIT > 1) {
    // Partials go to this CTA's (now idle) stage memory, rank 0 adds the others' in rank order.
    float* partial = reinterpret_cast<float*>(smem);
    const int ctid = threadIdx.x - 128;
    if (wg > 0) named_barrier(1, 128 * C::WG);  // every consumer is done reading the stages
    if (wg > 0 && rank != 0) {
#pragma unroll
      for (int i = 0; i < C::BM / 2; ++i) partial[i * 128 * C::WG + ctid] = acc[i];
    }
    cluster_sync();
    if (wg > 0 && rank == 0) {
      for (unsigned r = 1; r < C::KSPLIT; ++r) {
#pragma unroll
        for (int i = 0; i < C::BM / 2; ++i) acc[i] += ld_shared_cluster(&partial[i * 128 * C::WG + ctid], r);
      }
    }
    cluster_sync();  // peers keep their shared memory until rank 0 has read it
    if (rank != 0) return;
  }
  if (wg == 0) return;

  // acc[4j + 2h + e] is D^T[row0 + 8h, 8j + 2t + e], i.e. D[m0 + 8j + 2t + e, n0 + row0 + 8h]
  const int tid = threadIdx.x % 128, lane = tid % 32, t = lane % 4;
  const int row0 = (wg - 1) * 64 + (tid / 32) * 16 + lane / 4;
  // A's global scale (W4A4) is per row of D when a device vector; otherwise folded in here.
  const bool a_per_row = p.a_gscale_mode == GSCALE_DEVICE_PER_ROW;
  const float scale = p.alpha * global_scale(p.w_gscale_mode, p.w_gscale_value, p.w_gscale_ptr, 0) *
                      (a_per_row ? 1.0f : global_scale(p.a_gscale_mode, p.a_gscale_value, p.a_gscale_ptr, 0)) *
                      float(1u << Op::SHIFT);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const long long n = n0 + row0 + 8 * h;
    if (n >= C::N) continue;
    const float bias = load_bias<C::BIAS>(p.bias, n);
#pragma unroll
    for (int j = 0; j < C::BM / 8; ++j) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const long long m = m0 + 8 * j + 2 * t + e;
        if (m < p.m)
          store_element<C::ODT>(p.d, m * p.d_stride + n,
                                acc[4 * j + 2 * h + e] * (a_per_row ? scale * p.a_gscale_ptr[m] : scale) + bias);
      }
    }
  }
}

}  // namespace nvfp4k::sm90
