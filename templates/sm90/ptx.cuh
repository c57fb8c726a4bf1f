// Hopper-only (sm_90a) PTX wrappers: wgmma fences and shared-memory descriptors, register
// handover between warpgroups. The wrappers every arch shares are in common/ptx/.
#pragma once

#include "common/ptx/shared.cuh"

namespace nvfp4k::sm90 {

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int PENDING>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(PENDING) : "memory");
}

// Shared-memory matrix descriptor of a K-major tile written by TMA with the 128-byte swizzle:
// rows of 128 bytes, 8-row groups 1024 bytes apart. Its low word holds the address (>> 4), so
// a tile at a constant offset is the same high word and a 32-bit add (shared addresses below
// 256 KB cannot carry out of the 14-bit field): sw128_desc(sw128_desc_lo(p) + (off >> 4)).
__device__ __forceinline__ unsigned sw128_desc_lo(const void* p) { return ((smem_u32(p) & 0x3FFFF) >> 4) | (1u << 16); }
__device__ __forceinline__ unsigned long long sw128_desc(unsigned lo) {
  return ((unsigned long long)((1024u >> 4) | (1u << 30)) << 32) | lo;
}

// Hands registers between warpgroups (the four warps of one execute it together): dec lowers
// this warpgroup's to N, inc waits until the CTA has N free for each of its threads.
template <int N>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(N));
}
template <int N>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(N));
}

}  // namespace nvfp4k::sm90
