// The sm_120a GEMM's tile geometry, one definition for the kernel and the host (tile checks,
// shared memory, threads): a CTA of BM x BN outputs, K in stages of 128, its warps in a
// WARPS_M x WARPS_N grid, each warp MT x NT MMAs of 16 x 8.
#pragma once
#include "common/portable.cuh"

namespace nvfp4k::sm120 {

inline constexpr int GEMM_BK = 128;            // K per stage: two m16n8k64 steps
inline constexpr int GEMM_ROW_BYTES = 64;      // a row's packed bytes per stage
// Rows of a stage 80 bytes apart: a fragment load (8 rows x 4 words) hits 32 distinct banks.
inline constexpr int GEMM_ROW_PITCH = 80;
inline constexpr int GEMM_SCALE_PITCH = 8;     // a row's 8 block scales per stage, two words
inline constexpr unsigned GEMM_MAX_SHARED = 99 * 1024;  // dynamic shared memory per block on sm_120 / sm_121

NVFP4_HD constexpr int gemm_warps_m(int bm) { return bm >= 32 ? 2 : 1; }
NVFP4_HD constexpr int gemm_warps_n(int bm, int bn) { return bm == 16 || bm * bn >= 128 * 128 ? 4 : 2; }
NVFP4_HD constexpr int gemm_threads(int bm, int bn) { return 32 * gemm_warps_m(bm) * gemm_warps_n(bm, bn); }
NVFP4_HD constexpr int gemm_stage_bytes(int bm, int bn) { return (bm + bn) * (GEMM_ROW_PITCH + GEMM_SCALE_PITCH); }
NVFP4_HD constexpr unsigned gemm_shared_bytes(int bm, int bn, int stages) { return unsigned(stages * gemm_stage_bytes(bm, bn)); }
// MMAs per warp and k64 step, along M and N
NVFP4_HD constexpr int gemm_warp_mmas_m(int bm) { return bm / gemm_warps_m(bm) / 16; }
NVFP4_HD constexpr int gemm_warp_mmas_n(int bm, int bn) { return bn / gemm_warps_n(bm, bn) / 8; }

}  // namespace nvfp4k::sm120
