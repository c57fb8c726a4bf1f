// Thread-block clusters (sm_90 and later): rank, barrier, distributed shared memory.
#pragma once

#include "common/ptx/shared.cuh"

namespace nvfp4k {

__device__ __forceinline__ unsigned cluster_ctarank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
// Every thread of the cluster waits for all; RELEASE orders this thread's earlier memory
// accesses before the others' later ones (a relaxed one only synchronizes).
template <bool RELEASE = true>
__device__ __forceinline__ void cluster_sync() {
  if constexpr (RELEASE)
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
  else
    asm volatile("barrier.cluster.arrive.relaxed.aligned;\nbarrier.cluster.wait.aligned;" ::: "memory");
}
// The shared::cluster address, in CTA `rank` of this cluster, of what lies at the shared::cta
// address `address` here.
__device__ __forceinline__ unsigned cluster_address(unsigned address, unsigned rank) {
  unsigned remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(address), "r"(rank));
  return remote;
}
// A float in the shared memory of CTA `rank` of this cluster, at the address `p` has here.
__device__ __forceinline__ float ld_shared_cluster(const float* p, unsigned rank) {
  float v;
  asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(cluster_address(smem_u32(p), rank)) : "memory");
  return v;
}
// Arrives on the mbarrier at the shared::cluster address `bar` (another CTA's, say), releasing
// this thread's earlier memory accesses at cluster scope.
__device__ __forceinline__ void mbar_arrive_cluster(unsigned bar) {
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" ::"r"(bar) : "memory");
}

}  // namespace nvfp4k
