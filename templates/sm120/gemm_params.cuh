// The sm_120a / sm_121a GEMM's parameter block, shared by the kernel and the host.
#pragma once

#include "common/params.cuh"
#include "common/tile_scheduler.cuh"

namespace nvfp4k {

// D[m, n] = alpha * a_gscale[m] * w_gscale * sum_k A[m, k] * W[n, k] (+ bias[n]), with A and W
// (grouped: the group's W and scales) in NVFP4 (packed E2M1 rows, E4M3 block scales in the layouts the kernel compiles in).
struct GemmW4A4Params {
  const unsigned char* a;         // [M, K/2] packed, a_stride bytes per row
  long long a_stride;
  const unsigned char* a_scales;  // E4M3 [M, K/16]
  const unsigned char* w;         // [N, K/2] packed, w_stride bytes per row (16-byte aligned rows)
  long long w_stride;
  const unsigned char* w_scales;  // E4M3 [N, K/16]
  const float* w_gscale_ptr;      // GSCALE_DEVICE: one device value; GSCALE_DEVICE_PER_ROW (grouped): one per group
  float w_gscale_value;           // GSCALE_HOST
  int w_gscale_mode;
  float alpha;
  const float* a_gscale_ptr;      // GSCALE_DEVICE: one value; _PER_ROW: one per row (m); _PER_GROUP: one per group
  float a_gscale_value;           // GSCALE_HOST
  int a_gscale_mode;
  const void* bias;               // [N], type compiled in
  void* d;                        // [M, N] with d_stride elements per row (NVFP4 D: packed, d_stride bytes)
  long long d_stride;
  Fp4OutputParams d_fp4;          // NVFP4 D (ODT DTYPE_NVFP4): its scales and global scale
  MoeCombineEpilogueParams combine;  // EPILOGUE_MOE_COMBINE's
  int swiglu_shift;               // SwiGLU's gate_up weight: -1 halves, else interleaved in groups of 2^swiglu_shift rows
  TileSchedule schedule;
  int a_rows_16b;                 // A's rows start 16-byte aligned: 16-byte copies, else 4-byte ones
  int a_scale_words;              // A's scales come as aligned 4-byte words of 4 blocks, else by byte
  // grouped layouts: group g's weight is rows [g N, (g + 1) N) of w, its scales w_group_bytes on
  const int* row_index;           // contiguous, or null: row m of A is row row_index[m] of a ([a_rows, K/2])
  long long a_rows;
  long long w_group_bytes;
};

}  // namespace nvfp4k
