// The global scale of a row, wherever it comes from (a uniform branch in a kernel).
#pragma once
#include "common/nvfp4_quantize.cuh"
#include "common/params.cuh"

namespace nvfp4k {

__device__ __forceinline__ float global_scale(int mode, float value, const float* ptr, long long row) {
  if (mode == GSCALE_HOST) return value;
  if (mode == GSCALE_FROM_AMAX) return global_scale_from_amax(ptr[0]);
  return ptr[mode == GSCALE_DEVICE ? 0 : row];
}

}  // namespace nvfp4k
