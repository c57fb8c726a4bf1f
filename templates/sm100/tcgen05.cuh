// The tcgen05 subset the sm_100a / sm_103a GEMM uses, one function per instruction, each either
// the instruction (EMULATE false: sm_100a, sm_103a) or its emulation (EMULATE true: the same
// kernel compiled for sm_90a; sm100/tcgen05_emulated.cuh). PTX ISA 9.7.16.
//
// CTAS is the .cta_group: 1, or 2 for a CTA pair (ISA 9.7.16.5.1: ranks 2i and 2i + 1 of a
// cluster), whose one MMA (M 256) reads each CTA's shared memory at the descriptors' offsets and
// writes each CTA's tensor memory at the same addresses. A kernel uses one .cta_group throughout
// (ISA: every tcgen05 instruction of a kernel the same).
//
// Who calls what: alloc / relinquish / dealloc by one whole warp (of each CTA of a pair); cp, mma
// and commit by the MMA warp (of a pair's even CTA), all 32 lanes calling (the instruction is
// issued by lane 0 alone: single-thread semantics, ISA 9.7.16.5; the emulation spreads an MMA's
// work over the warp); ld and wait by a whole warp of the epilogue warpgroup.
#pragma once
#include "common/ptx/cluster.cuh"
#include "common/ptx/shared.cuh"
#include "sm100/descriptors.cuh"
#include "sm100/tcgen05_emulated.cuh"

namespace nvfp4k::sm100 {

// asm volatile of an instruction whose opcode names the CTA group: BEFORE "1" or "2" AFTER (the
// group is part of the opcode, not an operand), the asm's operands after the two strings.
#define NVFP4_TCGEN05_ASM(CTAS, BEFORE, AFTER, ...) \
  do {                                                \
    if constexpr ((CTAS) == 2)                        \
      asm volatile(BEFORE "2" AFTER __VA_ARGS__);     \
    else                                              \
      asm volatile(BEFORE "1" AFTER __VA_ARGS__);     \
  } while (0)

template <bool EMULATE, int CTAS>
__device__ __forceinline__ void tmem_alloc(unsigned* dst, unsigned columns) {
  if constexpr (EMULATE) {
    emulated::tmem_alloc(dst, columns);
  } else {
#if __CUDA_ARCH__ >= 1000
    NVFP4_TCGEN05_ASM(CTAS, "tcgen05.alloc.cta_group::", ".sync.aligned.shared::cta.b32 [%0], %1;",
                      ::"r"(smem_u32(dst)), "r"(columns) : "memory");
    NVFP4_TCGEN05_ASM(CTAS, "tcgen05.relinquish_alloc_permit.cta_group::", ".sync.aligned;", ::: "memory");
#endif
  }
}

template <bool EMULATE, int CTAS>
__device__ __forceinline__ void tmem_dealloc(unsigned address, unsigned columns) {
  if constexpr (EMULATE) {
    emulated::tmem_dealloc(address, columns);
  } else {
#if __CUDA_ARCH__ >= 1000
    NVFP4_TCGEN05_ASM(CTAS, "tcgen05.dealloc.cta_group::", ".sync.aligned.b32 %0, %1;", ::"r"(address), "r"(columns)
                      : "memory");
#endif
  }
}

// Orders this thread's tcgen05 operations before (after) a thread synchronization.
template <bool EMULATE>
__device__ __forceinline__ void tcgen05_fence_before_sync() {
  if constexpr (EMULATE) {
    __threadfence_block();
  } else {
#if __CUDA_ARCH__ >= 1000
    asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");
#endif
  }
}
template <bool EMULATE>
__device__ __forceinline__ void tcgen05_fence_after_sync() {
  if constexpr (EMULATE) {
    __threadfence();  // a pair's: the other CTA's tensor memory and shared memory, read here next
  } else {
#if __CUDA_ARCH__ >= 1000
    asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");
#endif
  }
}

// 32 rows of 16 bytes (one 512-byte scale atom) into columns [address, address + 4) of all
// four 32-lane partitions: .32x128b.warpx4 (a pair's: each CTA's atom at the descriptor's
// offset into its own tensor memory).
template <bool EMULATE, int CTAS>
__device__ __forceinline__ void tmem_copy_32x128b_warpx4(unsigned address, unsigned long long desc) {
  if constexpr (EMULATE) {
    __syncwarp();
    if (threadIdx.x % 32 == 0) emulated::copy_32x128b_warpx4<CTAS>(address, desc);
    __syncwarp();
  } else {
#if __CUDA_ARCH__ >= 1000
    if (threadIdx.x % 32 == 0)
      NVFP4_TCGEN05_ASM(CTAS, "tcgen05.cp.cta_group::", ".32x128b.warpx4 [%0], %1;", ::"r"(address), "l"(desc) : "memory");
#endif
  }
}

// D[128 CTAS x N] (+)= (A * SF_A) . (B * SF_B), K = 64, E2M1 operands in shared memory and UE4M3
// scale factors in tensor memory (.kind::mxf4nvf4, 4 scales a row: .scale_vec::4X, which
// sm_103a spells .block16).
#if __CUDA_ARCH__ == 1000
#define NVFP4_SM100_MMA_SCALE_VEC "scale_vec::4X"
#else
#define NVFP4_SM100_MMA_SCALE_VEC "block16"
#endif
template <bool EMULATE, int CTAS>
__device__ __forceinline__ void mma_mxf4nvf4(unsigned d, unsigned long long a_desc, unsigned long long b_desc,
                                             unsigned idesc, unsigned sfa, unsigned sfb, bool accumulate) {
  if constexpr (EMULATE) {
    emulated::mma_mxf4nvf4<CTAS>(d, a_desc, b_desc, idesc, sfa, sfb, accumulate);
  } else {
#if __CUDA_ARCH__ >= 1000
    if (threadIdx.x % 32 == 0)
      NVFP4_TCGEN05_ASM(CTAS, "{\n .reg .pred p;\n setp.ne.b32 p, %6, 0;\n tcgen05.mma.cta_group::",
                        ".kind::mxf4nvf4.block_scale." NVFP4_SM100_MMA_SCALE_VEC " [%0], %1, %2, %3, [%4], [%5], p;\n}\n",
                        ::"r"(d), "l"(a_desc), "l"(b_desc), "r"(idesc), "r"(sfa), "r"(sfb), "r"(int(accumulate))
                        : "memory");
#endif
  }
}
#undef NVFP4_SM100_MMA_SCALE_VEC

// Arrives once on `bar` when this thread's earlier cp and mma operations have completed: a
// pair's on the barrier at `bar`'s offset in both CTAs (.multicast::cluster, ctaMask the pair's
// two ranks).
template <bool EMULATE, int CTAS>
__device__ __forceinline__ void tcgen05_commit(unsigned long long* bar) {
  if constexpr (EMULATE) {
    emulated::commit<CTAS>(bar);
  } else {
#if __CUDA_ARCH__ >= 1000
    if (threadIdx.x % 32 == 0) {
      if constexpr (CTAS == 2) {
        const unsigned short pair_mask = 3u << (cluster_ctarank() & ~1u);
        asm volatile(
            "tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64 [%0], %1;" ::"r"(
                smem_u32(bar)),
            "h"(pair_mask)
            : "memory");
      } else {
        asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%0];" ::"r"(smem_u32(bar))
                     : "memory");
      }
    }
#endif
  }
}

// 32 consecutive columns of the warp's 32 lanes (lane l: its lane's columns in v[0..31]):
// .32x32b.x32, then wait::ld.
template <bool EMULATE>
__device__ __forceinline__ void tmem_load_32x32b_x32(unsigned address, float (&v)[32]) {
  if constexpr (EMULATE) {
    emulated::load_32x32b(address, v);
  } else {
#if __CUDA_ARCH__ >= 1000
    unsigned r[32];
    asm volatile(
        "tcgen05.ld.sync.aligned.32x32b.x32.b32 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, [%32];\n"
        "tcgen05.wait::ld.sync.aligned;"
        : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]), "=r"(r[4]), "=r"(r[5]), "=r"(r[6]), "=r"(r[7]), "=r"(r[8]),
          "=r"(r[9]), "=r"(r[10]), "=r"(r[11]), "=r"(r[12]), "=r"(r[13]), "=r"(r[14]), "=r"(r[15]), "=r"(r[16]),
          "=r"(r[17]), "=r"(r[18]), "=r"(r[19]), "=r"(r[20]), "=r"(r[21]), "=r"(r[22]), "=r"(r[23]), "=r"(r[24]),
          "=r"(r[25]), "=r"(r[26]), "=r"(r[27]), "=r"(r[28]), "=r"(r[29]), "=r"(r[30]), "=r"(r[31])
        : "r"(address)
        : "memory");
#pragma unroll
    for (int i = 0; i < 32; ++i) v[i] = __uint_as_float(r[i]);
#endif
  }
}

#undef NVFP4_TCGEN05_ASM

}  // namespace nvfp4k::sm100
