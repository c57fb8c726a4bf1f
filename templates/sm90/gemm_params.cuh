// The sm_90a GEMM's parameter block, shared by the kernel and the host.
#pragma once

#include "common/params.cuh"
#include "common/tile_scheduler.cuh"

namespace nvfp4k {

// The widths (wgmma's N: rows of D) a contiguous or masked grouped tile of BM >= 64 rows narrows
// its MMA to, so a group's last tile multiplies about the rows it holds: BM's quarters, and from
// 128 rows its eighths above the half (where the tile's MMA outweighs its weight decode about
// three to one), rounded up to 8 (wgmma's granule). Ascending; the last is BM. The kernel holds
// one k loop per width (sm90/gemm_w4a16.cuh), each issuing that width's wgmma (sm90/wgmma.cuh).
NVFP4_HD constexpr int narrow_mma_width_count(int bm) { return bm < 64 ? 1 : bm < 128 ? 4 : 6; }
NVFP4_HD constexpr int narrow_mma_width(int bm, int i) {
  const int count = narrow_mma_width_count(bm);
  // in eighths of BM: 8; or 2, 4, 6, 8; or 2, 4, 5, 6, 7, 8
  const int eighths = count == 1 ? 8 : count == 4 || i < 2 ? 2 * (i + 1) : i + 3;
  return (eighths * bm / 8 + 7) / 8 * 8;
}

// D[m, n] = alpha * a_gscale[m] * w_gscale * sum_k A[m, k] * W[n, k] (+ bias[n]).
// Passed as a __grid_constant__ parameter so the TMA descriptors stay in parameter space.
struct GemmParams {
  TmaDescriptor tma_a;            // activations [M, K], 16-bit (batched: 3D {K, M, groups}, strided)
  TmaDescriptor tma_w;            // packed weights [N, K/2] bytes (unused for a prepacked weight)
  TmaDescriptor tma_d;            // D [M, N], boxes of m_step rows x 128 bytes (when d_from_smem; batched: 3D)
  const unsigned char* w_scales;  // E4M3 [N, K/16], layout compiled in; or the prepacked weight
  const float* w_gscale_ptr;      // GSCALE_DEVICE: one device value; GSCALE_DEVICE_PER_ROW (grouped): one per group
  float w_gscale_value;           // GSCALE_HOST
  int w_gscale_mode;
  float alpha;
  const float* a_gscale_ptr;      // W4A4: A's global scale on the device, one or one per row (m)
  float a_gscale_value;           // GSCALE_HOST (1 for W4A16)
  int a_gscale_mode;
  const void* bias;               // [N], type compiled in
  void* d;                        // [M, N] with d_stride elements per row (NVFP4 D: packed, d_stride bytes)
  long long d_stride;
  Fp4OutputParams d_fp4;          // NVFP4 D (ODT DTYPE_NVFP4): its scales and global scale
  TileSchedule schedule;
  int d_from_smem;                // D is stored from shared memory: tma_d, or row pieces (16-byte aligned rows and n)
  long long w_group_bytes;        // grouped: bytes from one group's w_scales to the next's
  long long d_group_stride;       // batched: elements from one group's D to the next's
  long long n;                    // the weight's rows (one group's)
  // NVFP4 activations (W4A4 in one launch): a holds A's packed rows (a_stride bytes per row),
  // a_scales their E4M3 block scales (layout compiled in), decoded by the producers (dense: M rows).
  const unsigned char* a;
  long long a_stride;
  const unsigned char* a_scales;
  MoeCombineEpilogueParams combine;  // EPILOGUE_MOE_COMBINE only
  // RMSNorm of A (GemmConfig::RMSNORM): D's rows of (A * g / rms(A's row)) . W^T, g [K] in A's
  // 16-bit type or fp32 (compiled in); A's rows read at a (a_stride bytes a row) for their rms.
  const void* a_rmsnorm_weight;
  float a_rmsnorm_eps;
  // RESIDUAL: D = ... + residual [M, N] (D's type, residual_stride elements a row), before D's rounding
  const void* residual;
  long long residual_stride;
};

}  // namespace nvfp4k
