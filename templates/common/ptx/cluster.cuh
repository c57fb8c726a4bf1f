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
// A float in the shared memory of CTA `rank` of this cluster, at the address `p` has here.
__device__ __forceinline__ float ld_shared_cluster(const float* p, unsigned rank) {
  unsigned remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(smem_u32(p)), "r"(rank));
  float v;
  asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(remote) : "memory");
  return v;
}

}  // namespace nvfp4k
