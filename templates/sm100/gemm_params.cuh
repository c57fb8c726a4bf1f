// The sm_100a / sm_103a GEMM's parameter block, shared by the kernel and the host.
#pragma once

#include "common/params.cuh"
#include "common/tile_scheduler.cuh"

namespace nvfp4k {

// D[m, n] = alpha * a_gscale[m] * w_gscale * sum_k A[m, k] * W[n, k] (+ bias[n]), A and W in
// NVFP4 (packed E2M1 rows through TMA, E4M3 block scales in the layouts the kernel compiles in).
// Passed as a __grid_constant__ parameter so the TMA descriptors stay in parameter space.
struct GemmSm100Params {
  TmaDescriptor tma_a;            // A [M, K/2] bytes, boxes of 128 rows x 128 bytes, 128-byte swizzle
  TmaDescriptor tma_w;            // W [N, K/2] bytes, boxes of BN rows x 128 bytes, 128-byte swizzle
  // SwiGLU's gate_up weight (tma_w its gate rows, tma_w_up its up rows): 3D, {K/2 bytes, g rows,
  // the groups of 2g rows}, boxes of BN / 2 rows; g = swiglu_group, I for ModelOpt's halves
  TmaDescriptor tma_w_up;
  long long swiglu_group;
  int swiglu_shift;               // -1: ModelOpt's halves; else g = 2^swiglu_shift, an interleaved weight
  const unsigned char* a_scales;  // E4M3 [M, K/16]
  const unsigned char* w_scales;  // E4M3 [N, K/16]
  int a_scale_words;              // A's scales come as aligned 4-byte words of 4 blocks, else by byte
  int w_scale_words;
  const float* w_gscale_ptr;      // GSCALE_DEVICE: one device value
  float w_gscale_value;           // GSCALE_HOST
  int w_gscale_mode;
  float alpha;
  const float* a_gscale_ptr;      // GSCALE_DEVICE: one value; _PER_ROW: one per row (m)
  float a_gscale_value;           // GSCALE_HOST
  int a_gscale_mode;
  const void* bias;               // [N], type compiled in
  void* d;                        // [M, N] with d_stride elements per row (NVFP4 D: packed, d_stride bytes)
  long long d_stride;
  Fp4OutputParams d_fp4;          // NVFP4 D (ODT DTYPE_NVFP4): its scales and global scale
  MoeCombineEpilogueParams combine;  // EPILOGUE_MOE_COMBINE's
  int d_vec;                      // D's rows 16-byte aligned: stored 16 bytes at a time
  TileSchedule schedule;
  long long w_group_bytes;        // grouped: bytes from one group's w_scales to the next's
  // contiguous, or null: row m of A is row row_index[m] of a ([a_rows, K/2], a_stride bytes a
  // row), copied by the kernel instead of TMA
  const int* row_index;
  const unsigned char* a;
  long long a_stride;
  long long a_rows;
};

}  // namespace nvfp4k
