// Shared-memory addresses and stores (sm_90 and later). Thin and one-to-one with the
// instructions, as every file under common/ptx/, so the kernels read like the ISA.
#pragma once

namespace nvfp4k {

__device__ __forceinline__ unsigned smem_u32(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }

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

// Four 8x8 16-bit matrices loaded as mma fragments: row r of matrix q is the 16 bytes at the
// address lane 8q + r gives; lane l receives row l / 4, columns 2 (l % 4) and + 1 of each.
__device__ __forceinline__ void ldmatrix_x4(unsigned addr, unsigned (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}

}  // namespace nvfp4k
