// A CTA pair of the sm_100a / sm_103a GEMM (CTAS = 2: ranks 0 and 1 of a cluster of 2, which
// runs each tile's .cta_group::2 MMAs from rank 0, the leader) and what crosses between its two
// CTAs besides the MMA itself: the odd CTA's TMA bytes and arrivals complete on the leader's
// full barriers, its epilogue's on the leader's acc_empty (the MMA's commits reach both CTAs'
// own barriers). With CTAS = 1 everything stays in the CTA.
//
// The odd CTA's TMA loads name the leader's barrier through .cta_group::2 (ISA 9.7.9.27.1.2:
// the mbarrier may be in the destination's peer CTA). What the leader's barrier cannot count
// itself is relayed through the odd CTA's own full barrier (unused otherwise), whose loading
// warp waits for it and then arrives on the leader's: rows gathered by cp.async (whose
// completion an mbarrier tracks only in the copying CTA), and under EMULATE, on sm_90a, which
// lacks .cta_group::2, the TMA bytes too (completed on the leader's by mbarrier.complete_tx).
#pragma once
#include "common/ptx/barrier.cuh"
#include "common/ptx/cluster.cuh"
#include "common/ptx/copy.cuh"

namespace nvfp4k::sm100 {

template <int CTAS, bool EMULATE>
struct CtaPair {
  static_assert(CTAS == 1 || CTAS == 2, "a CTA or a pair");
  unsigned rank;  // in the pair: 0, the leader (or a CTA on its own), or 1

  __device__ __forceinline__ CtaPair() : rank(CTAS == 2 ? cluster_ctarank() & 1u : 0u) {}
  __device__ __forceinline__ bool leader() const { return rank == 0; }
  // The leader's barrier at `bar`'s offset, as a shared::cluster address.
  __device__ __forceinline__ unsigned at_leader(unsigned long long* bar) const {
    return CTAS == 2 ? cluster_address(smem_u32(bar), 0) : smem_u32(bar);
  }

  // The full barrier's initial arrival count: the leader's counts `per_cta` arrivals from each
  // CTA of the pair; the odd CTA's is the relay (its loading warp's 32 lanes).
  __device__ __forceinline__ unsigned full_arrivals(unsigned per_cta) const { return leader() ? CTAS * per_cta : 32u; }

  // Before a stage's loads (one thread): `bytes`, this CTA's TMA bytes, are expected on the
  // leader's full barrier, which then awaits both CTAs' (the emulation's relay expects its own).
  __device__ __forceinline__ void expect_loads(unsigned long long* full, unsigned bytes) const {
    if (leader() || EMULATE) mbar_expect_tx(full, leader() ? CTAS * bytes : bytes);
  }
  // A 2D tile into this CTA's `dst`, its bytes completing on the leader's full barrier.
  __device__ __forceinline__ void load_2d(void* dst, const void* tensor_map, unsigned long long* full, int x, int y) const {
    if (leader() || EMULATE) {
      tma_load_2d(dst, tensor_map, full, x, y);
    } else {
#if __CUDA_ARCH__ >= 1000
      asm volatile(
          "cp.async.bulk.tensor.2d.cta_group::2.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, "
          "%4}], [%2];" ::"r"(smem_u32(dst)),
          "l"(tensor_map), "r"(at_leader(full)), "r"(x), "r"(y)
          : "memory");
#endif
    }
  }
  // A 3D tile into this CTA's `dst`, likewise.
  __device__ __forceinline__ void load_3d(void* dst, const void* tensor_map, unsigned long long* full, int x, int y, int z) const {
    if (leader() || EMULATE) {
      tma_load_3d(dst, tensor_map, full, x, y, z);
    } else {
#if __CUDA_ARCH__ >= 1000
      asm volatile(
          "cp.async.bulk.tensor.3d.cta_group::2.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, "
          "%4, %5}], [%2];" ::"r"(smem_u32(dst)),
          "l"(tensor_map), "r"(at_leader(full)), "r"(x), "r"(y), "r"(z)
          : "memory");
#endif
    }
  }
  // After a stage's loads, every lane of the loading warp: its arrival on the leader's full
  // barrier, once what it copied itself (cp.async, `copies`) has landed. A leader's copies
  // arrive where they land (tcgen05.mma's warp then fences them to the async proxy); the odd
  // CTA's through the relay, fenced here.
  __device__ __forceinline__ void loaded(unsigned long long* full, unsigned parity, unsigned bytes, bool copies) const {
    if (copies)
      cp_async_arrive(full);
    else if (leader() || EMULATE)
      mbar_arrive(full);
    if (leader()) return;
    if (copies || EMULATE) {  // the relay
      mbar_wait(full, parity);
      fence_proxy_async_shared();
      if (EMULATE && threadIdx.x % 32 == 0)
        asm volatile("mbarrier.complete_tx.relaxed.cluster.shared::cluster.b64 [%0], %1;" ::"r"(at_leader(full)), "r"(bytes)
                     : "memory");
    }
    mbar_arrive_cluster(at_leader(full));
  }
  // Arrives on the leader's barrier at `bar`'s offset.
  __device__ __forceinline__ void arrive(unsigned long long* bar) const {
    if (leader())
      mbar_arrive(bar);
    else
      mbar_arrive_cluster(at_leader(bar));
  }
};

}  // namespace nvfp4k::sm100
