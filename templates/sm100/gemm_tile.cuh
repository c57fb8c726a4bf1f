// The sm_100a / sm_103a GEMM's tile geometry, one definition for the kernel and the host (tile
// checks, shared memory, tensor memory, threads). A tile is 128 rows by BN computed by one CTA
// with .cta_group::1 MMAs (M 128, N = BN, K 64), or 256 rows by BN computed by a CTA pair of a
// cluster with .cta_group::2 MMAs (M 256): each CTA of the pair holds its 128 rows of A, half of
// the BN weight rows and, in its tensor memory, its 128 rows of D with all BN columns. K runs in
// stages of 256 (a 128-byte row of E2M1: one 128-byte swizzle atom wide).
//
// A stage, 1024-byte aligned: A's 128 rows x 128 bytes, the CTA's BN / ctas weight rows x 128
// bytes (both as TMA's 128-byte swizzle writes them), then the scale atoms of its 4 MMA steps:
// A's one per step, W's one per step and 128 of all BN weight rows (sm100/descriptors.cuh; a
// pair's MMA reads each CTA's own copy of W's scales, so both hold all of them).
//
// Tensor memory: the accumulators' BN columns each, then per stage the scale factors' columns
// (4 a step for A, 4 a step and 128 rows for W), so a stage's copies never overwrite scales an
// MMA of another stage may still read. Two accumulators where they fit (a tile's epilogue then
// overlaps the next tile's MMAs), else one.
#pragma once
#include "common/portable.cuh"

namespace nvfp4k::sm100 {

inline constexpr int GEMM_BM = 128;
inline constexpr int GEMM_BK = 256;
inline constexpr int GEMM_MMA_K = 64;
inline constexpr int GEMM_STEPS = GEMM_BK / GEMM_MMA_K;
inline constexpr unsigned GEMM_MAX_SHARED = 227 * 1024;  // dynamic shared memory per block on sm_100 / sm_103
// Warps: 0 TMA (A and W), 1 MMA (and the tensor memory's allocation), 2-5 the epilogue (a
// warpgroup: warp w reads lanes 32 (w % 4) ..), 6-7 the scale factors.
inline constexpr int GEMM_THREADS = 256;
inline constexpr int GEMM_SCALE_THREADS = 64;
inline constexpr unsigned GEMM_TMEM_COLUMNS = 512;

NVFP4_HD constexpr int gemm_w_scale_atoms(int bn) { return (bn + 127) / 128; }
NVFP4_HD constexpr unsigned gemm_a_bytes() { return GEMM_BM * 128u; }
// the weight rows one CTA of `ctas` (1, or 2: a pair) loads
NVFP4_HD constexpr int gemm_w_rows(int bn, int ctas) { return bn / ctas; }
NVFP4_HD constexpr unsigned gemm_w_bytes(int bn, int ctas) { return unsigned(gemm_w_rows(bn, ctas)) * 128u; }
NVFP4_HD constexpr unsigned gemm_stage_bytes(int bn, int ctas) {
  return gemm_a_bytes() + gemm_w_bytes(bn, ctas) + GEMM_STEPS * 512u * unsigned(1 + gemm_w_scale_atoms(bn));
}
// the stages, 1024 bytes to align them, the barriers (2 a stage, 4 for the accumulators) and
// the tensor memory address
NVFP4_HD constexpr unsigned gemm_shared_bytes(int bn, int stages, int ctas) {
  return unsigned(stages) * gemm_stage_bytes(bn, ctas) + 1024u + 8u * unsigned(2 * stages + 4) + 16u;
}
// tensor memory columns a stage's scale factors take
NVFP4_HD constexpr int gemm_scale_columns(int bn) { return 4 * GEMM_STEPS * (1 + gemm_w_scale_atoms(bn)); }
NVFP4_HD constexpr int gemm_accumulators(int bn, int stages) {
  return 2 * bn + stages * gemm_scale_columns(bn) <= int(GEMM_TMEM_COLUMNS) ? 2 : 1;
}
NVFP4_HD constexpr int gemm_tmem_columns_used(int bn, int stages) {
  return gemm_accumulators(bn, stages) * bn + stages * gemm_scale_columns(bn);
}
// the allocation: a power of 2 of at least 32 columns
NVFP4_HD constexpr unsigned gemm_tmem_allocation(int bn, int stages) {
  unsigned c = 32;
  while (c < unsigned(gemm_tmem_columns_used(bn, stages))) c *= 2;
  return c;
}

}  // namespace nvfp4k::sm100
