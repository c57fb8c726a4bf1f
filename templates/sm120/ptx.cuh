// sm_120a GEMM PTX wrappers beyond common/ptx/: cp.async groups (the main loop's ring is
// ordered by groups and a CTA barrier, not by mbarriers) and 16-byte cp.async.
#pragma once

#include "common/ptx/shared.cuh"

namespace nvfp4k::sm120 {

// 16 bytes global -> shared (both 16-byte aligned), bypassing L1; bytes past `src_bytes` are zero-filled.
__device__ __forceinline__ void cp_async_16(void* dst, const void* src, unsigned src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(smem_u32(dst)), "l"(src), "r"(src_bytes) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
// Waits until at most PENDING of this thread's committed groups are still in flight.
template <int PENDING>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(PENDING) : "memory");
}

}  // namespace nvfp4k::sm120
