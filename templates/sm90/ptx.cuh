// Hopper (sm_90a) PTX wrappers: mbarriers, TMA loads, wgmma fences and descriptors, clusters.
// Thin and one-to-one with the instructions, so the kernels read like the ISA.
#pragma once

namespace nvfp4k::sm90 {

__device__ __forceinline__ unsigned smem_u32(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }

__device__ __forceinline__ void mbar_init(unsigned long long* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(count) : "memory");
}
// Makes barrier initialisation visible to the async proxy (TMA) and the cluster.
__device__ __forceinline__ void fence_barrier_init() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }

__device__ __forceinline__ void mbar_arrive_expect_tx(unsigned long long* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(unsigned long long* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_u32(bar)) : "memory");
}
// Arrives where `arrive` holds, predicated rather than branched: a branch between a wgmma and
// its wait makes ptxas serialize the wgmmas (C7513).
__device__ __forceinline__ void mbar_arrive_if(unsigned long long* bar, bool arrive) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %1, 0;\n@p mbarrier.arrive.shared::cta.b64 _, [%0];\n}" ::"r"(smem_u32(bar)),
               "r"(int(arrive))
               : "memory");
}
// Waits until the phase of parity `parity` has completed. A thread with nothing else to do (a
// producer waiting for a free stage) passes `suspend_ns`: each try then suspends it for up to
// that long instead of the system's short default, so it does not take issue slots from the
// warps it waits for.
__device__ __forceinline__ void mbar_wait(unsigned long long* bar, unsigned parity, unsigned suspend_ns = 0) {
  unsigned done = 0;
  do {
    if (suspend_ns)
      asm volatile(
          "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2, %3;\n selp.u32 %0, 1, 0, p;\n}\n"
          : "=r"(done)
          : "r"(smem_u32(bar)), "r"(parity), "r"(suspend_ns)
          : "memory");
    else
      asm volatile(
          "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
          : "=r"(done)
          : "r"(smem_u32(bar)), "r"(parity)
          : "memory");
  } while (!done);
}

// 2D tensor tile -> shared memory; completion is counted in bytes on `bar`.
__device__ __forceinline__ void tma_load_2d(void* dst, const void* tensor_map, unsigned long long* bar, int x, int y) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];" ::"r"(
          smem_u32(dst)),
      "l"(tensor_map), "r"(smem_u32(bar)), "r"(x), "r"(y)
      : "memory");
}
// `bytes` contiguous bytes (a multiple of 16, both addresses 16-byte aligned) -> shared
// memory; completion is counted in bytes on `bar`.
__device__ __forceinline__ void bulk_load(void* dst, const void* src, unsigned bytes, unsigned long long* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                   smem_u32(dst)),
               "l"(src), "r"(bytes), "r"(smem_u32(bar))
               : "memory");
}
__device__ __forceinline__ void prefetch_tensor_map(const void* tensor_map) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(tensor_map) : "memory");
}

// Shared memory -> 2D tensor tile (rows and columns past the tensor are not written), in the
// bulk group of this thread; the shared memory must stay until bulk_wait_read says it is read.
__device__ __forceinline__ void tma_store_2d(const void* tensor_map, const void* src, int x, int y) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];" ::"l"(tensor_map),
               "r"(smem_u32(src)), "r"(x), "r"(y)
               : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
__device__ __forceinline__ void bulk_wait_read() { asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory"); }
// This thread's shared-memory writes, visible to the async proxy (TMA) after a barrier.
__device__ __forceinline__ void fence_proxy_async_shared() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
__device__ __forceinline__ void st_shared_f32(unsigned addr, float v) {
  asm volatile("st.shared.f32 [%0], %1;" ::"r"(addr), "f"(v) : "memory");
}
// Four 8x8 16-bit matrices, each held as an mma accumulator fragment (lane l: row l / 4,
// columns 2 (l % 4) and + 1 in one register), stored transposed: row r of matrix q goes to the
// 16 bytes at the address lane 8q + r gives.
__device__ __forceinline__ void stmatrix_x4_trans(unsigned addr, unsigned r0, unsigned r1, unsigned r2, unsigned r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(r0), "r"(r1),
               "r"(r2), "r"(r3)
               : "memory");
}

// Asynchronous 4- or 8-byte copy global -> shared; bytes past `src_bytes` are zero-filled.
template <int BYTES>
__device__ __forceinline__ void cp_async(void* dst, const void* src, unsigned src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;" ::"r"(smem_u32(dst)), "l"(src), "n"(BYTES), "r"(src_bytes)
               : "memory");
}
// Arrives on `bar` once this thread's earlier cp.async copies have landed (counted in the
// barrier's expected arrivals).
__device__ __forceinline__ void cp_async_arrive(unsigned long long* bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(smem_u32(bar)) : "memory");
}

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

// Named barrier for a subset of the block's warps (id 0 is __syncthreads).
__device__ __forceinline__ void named_barrier(unsigned id, unsigned threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

}  // namespace nvfp4k::sm90
