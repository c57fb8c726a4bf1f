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
// mbarriers. Warpgroups 1..WG consume, 64 weight rows each. With KSPLIT > 1 the CTAs of a
// cluster split K and rank 0 sums the partial tiles through distributed shared memory, in
// rank order (deterministic, no workspace).
#pragma once
#include "common/gemm_epilogue.cuh"
#include "common/global_scale.cuh"
#include "common/mma_operand.cuh"
#include "common/params.cuh"
#include "common/scale_layout.cuh"
#include "sm90/ptx.cuh"

namespace nvfp4k::sm90 {

template <int ADT_, int ODT_, int BIAS_, long long N_, long long K_, int LAYOUT_, int WG_, int BM_, int STAGES_,
          int KSPLIT_>
struct GemmConfig {
  static constexpr int ADT = ADT_, ODT = ODT_, BIAS = BIAS_, LAYOUT = LAYOUT_;
  static constexpr long long N = N_, K = K_;
  static constexpr int WG = WG_, BM = BM_, STAGES = STAGES_, KSPLIT = KSPLIT_;
  static constexpr int BK = 128;  // K per stage: 8 wgmma k16 steps
  static constexpr int BN = 64 * WG;
  static constexpr long long KB = K / 16;                    // scale blocks per weight row
  static constexpr long long KB_PADDED = (KB + 3) / 4 * 4;   // swizzled layout: KB rounded up to 4
  static constexpr int KTILES = int((K + BK - 1) / BK);
  static constexpr int A_BOX_BYTES = BM * 128;  // BM rows x 64 columns, 128-byte swizzle
  static constexpr int W_BYTES = BN * BK / 2;   // BN rows x 64 bytes, 64-byte swizzle
  static constexpr int STAGE_BYTES = 2 * A_BOX_BYTES + W_BYTES;
  static constexpr int SMEM_BYTES = 1024 + STAGES * STAGE_BYTES + 2 * STAGES * 8;
  static constexpr int THREADS = 128 * (WG + 1);
  static_assert(K % 32 == 0 && BM % 8 == 0 && BM <= 256 && (WG == 1 || WG == 2));
  static_assert(STAGE_BYTES % 1024 == 0, "stages must keep the 1024-byte swizzle alignment");
  static_assert(KSPLIT == 1 || BN * BM * 4 <= STAGES * STAGE_BYTES, "split-K partials reuse the stage memory");
};

// The 8 scale bytes of weight row `row` for k-tile `kt` (blocks 8kt .. 8kt+7), zero past K or N.
template <class C>
__device__ __forceinline__ uint2 load_tile_scales(const unsigned char* scales, long long row, int kt) {
  uint2 v = make_uint2(0u, 0u);
  if (row >= C::N) return v;
  const long long kb = 8LL * kt;
  if constexpr (C::LAYOUT == SCALES_SWIZZLED128X4) {
    // 4 consecutive blocks of a row are one aligned word; the padding up to KB_PADDED is zero
    v.x = __ldg(reinterpret_cast<const unsigned*>(scales + scale_offset_swizzled128x4(row, kb, C::KB)));
    if (kb + 4 < C::KB_PADDED)
      v.y = __ldg(reinterpret_cast<const unsigned*>(scales + scale_offset_swizzled128x4(row, kb + 4, C::KB)));
  } else {
    const unsigned char* src = scales + row * C::KB + kb;
    if (kb + 8 <= C::KB && C::KB % 8 == 0) {
      v = __ldg(reinterpret_cast<const uint2*>(src));
    } else if (kb + 8 <= C::KB && C::KB % 4 == 0) {
      v.x = __ldg(reinterpret_cast<const unsigned*>(src));
      v.y = __ldg(reinterpret_cast<const unsigned*>(src) + 1);
    } else {
      // rows are 2-byte aligned (K is a multiple of 32); the last tile may be short
      unsigned short h[4] = {0, 0, 0, 0};
#pragma unroll
      for (int i = 0; i < 4; ++i)
        if (kb + 2 * i < C::KB) h[i] = __ldg(reinterpret_cast<const unsigned short*>(src) + i);
      v.x = h[0] | (unsigned(h[1]) << 16);
      v.y = h[2] | (unsigned(h[3]) << 16);
    }
  }
  return v;
}

template <class C, class Mma>
__device__ __forceinline__ void gemm_w4a16(const GemmParams& p) {
  using Op = Fp4Operand<C::ADT>;
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem = reinterpret_cast<unsigned char*>((reinterpret_cast<unsigned long long>(smem_raw) + 1023) & ~1023ull);
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
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], 4 * C::WG);
    }
    fence_barrier_init();
  }
  __syncthreads();

  float acc[C::BM / 2];
  if (wg == 0) {
    if (threadIdx.x == 0) {
      prefetch_tensor_map(&p.tma_a);
      prefetch_tensor_map(&p.tma_w);
      for (int kt = kt_begin, i = 0; kt < kt_end; ++kt, ++i) {
        const int s = i % C::STAGES;
        if (i >= C::STAGES) mbar_wait(&empty[s], ((i / C::STAGES) & 1) ^ 1);
        mbar_arrive_expect_tx(&full[s], C::STAGE_BYTES);
        tma_load_2d(stage(s), &p.tma_a, &full[s], kt * C::BK, int(m0));
        tma_load_2d(stage(s) + C::A_BOX_BYTES, &p.tma_a, &full[s], kt * C::BK + 64, int(m0));
        tma_load_2d(stage(s) + 2 * C::A_BOX_BYTES, &p.tma_w, &full[s], kt * (C::BK / 2), n0);
      }
    }
  } else {
    const int tid = threadIdx.x % 128, lane = tid % 32, t = lane % 4;
    const int row0 = (wg - 1) * 64 + (tid / 32) * 16 + lane / 4;  // this thread's rows: row0, row0 + 8
    const unsigned byte_t = 0x4440u | unsigned(t);                // byte t of a word, zeros above
#pragma unroll
    for (int i = 0; i < C::BM / 2; ++i) acc[i] = 0.0f;

    uint2 scales[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) scales[h] = load_tile_scales<C>(p.w_scales, n0 + row0 + 8 * h, kt_begin);

    for (int kt = kt_begin, i = 0; kt < kt_end; ++kt, ++i) {
      const int s = i % C::STAGES;
      const uint2 cur[2] = {scales[0], scales[1]};
      if (kt + 1 < kt_end) {
#pragma unroll
        for (int h = 0; h < 2; ++h) scales[h] = load_tile_scales<C>(p.w_scales, n0 + row0 + 8 * h, kt + 1);
      }
      mbar_wait(&full[s], (i / C::STAGES) & 1);

      // Step j's A fragment: {row0, k 2t..2t+1}, {row0+8, same}, {row0, k 2t+8..2t+9}, {row0+8, same}.
      // Decoding step j+1 overlaps step j's wgmma; wait<1> keeps two fragments in flight at most.
      const unsigned char* w = stage(s) + 2 * C::A_BOX_BYTES;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        unsigned a[4];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int r = row0 + 8 * h;
          const int swizzle = ((r >> 1) & 3) << 4;  // TMA 64-byte swizzle: 16-byte chunk ^= (r / 2) % 4
          const uint2 v = *reinterpret_cast<const uint2*>(w + ((r * 64 + j * 8) ^ swizzle));
          const unsigned scale = Op::scale_pair(((j < 4 ? cur[h].x : cur[h].y) >> (8 * (j % 4))) & 0xFFu);
          a[h] = Op::scaled(Op::place(__byte_perm(v.x, 0u, byte_t)), scale);
          a[h + 2] = Op::scaled(Op::place(__byte_perm(v.y, 0u, byte_t)), scale);
        }
        wgmma_fence();
        Mma::mma(acc, a, smem_desc_sw128(stage(s) + (j / 4) * C::A_BOX_BYTES + (j % 4) * 32));
        wgmma_commit();
        wgmma_wait<1>();
      }
      wgmma_wait<0>();
      __syncwarp();
      if (lane == 0) mbar_arrive(&empty[s]);
    }
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
  const float scale =
      p.alpha * global_scale(p.w_gscale_mode, p.w_gscale_value, p.w_gscale_ptr, 0) * float(1u << Op::SHIFT);
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
        if (m < p.m) store_element<C::ODT>(p.d, m * p.d_stride + n, acc[4 * j + 2 * h + e] * scale + bias);
      }
    }
  }
}

}  // namespace nvfp4k::sm90
