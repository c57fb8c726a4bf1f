// Kernel parameter blocks, shared by the host launcher and the generated kernels so the two
// can never disagree on a layout. Plain aggregates of fundamental types only.
#pragma once

namespace nvfp4k {

enum DTypeCode { DTYPE_BF16 = 0, DTYPE_FP16 = 1, DTYPE_FP32 = 2 };

// Where a global scale comes from: a kernel argument, one device value, or one per row.
enum GlobalScaleCode { GSCALE_HOST = 0, GSCALE_DEVICE = 1, GSCALE_DEVICE_PER_ROW = 2 };

struct DequantizeParams {
  const unsigned char* packed;  // [src_rows, K/2] with packed_stride bytes per row
  long long packed_stride;
  const unsigned char* scales;  // E4M3, layout compiled in
  const float* gscale_ptr;      // GSCALE_DEVICE*: device value(s)
  float gscale_value;           // GSCALE_HOST
  int gscale_mode;              // GlobalScaleCode
  void* out;                    // [rows, K] with out_stride elements per row
  long long out_stride;
  const int* row_indices;       // null: row r reads source row r
  long long src_rows;
  long long rows;
};

// The global scale of row `src`, wherever it comes from (a uniform branch in a kernel).
#if defined(__CUDACC__)
__device__ __forceinline__ float global_scale(int mode, float value, const float* ptr, long long src) {
  return mode == GSCALE_HOST ? value : ptr[mode == GSCALE_DEVICE ? 0 : src];
}
#endif

}  // namespace nvfp4k
