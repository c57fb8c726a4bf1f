// 16-byte stores of converted outputs.
#pragma once
#include "common/nvfp4_format.cuh"
#include "common/params.cuh"

namespace nvfp4k {

// Stores N floats (N a multiple of 8) converted to DTYPE with 16-byte stores.
template <int DTYPE, int N>
__device__ __forceinline__ void store_converted(void* dst, const float (&v)[N]) {
  if constexpr (DTYPE == DTYPE_FP32) {
#pragma unroll
    for (int i = 0; i < N; i += 4)
      reinterpret_cast<float4*>(dst)[i / 4] = make_float4(v[i], v[i + 1], v[i + 2], v[i + 3]);
  } else {
    unsigned packed[N / 2];
#pragma unroll
    for (int i = 0; i < N; i += 2)
      packed[i / 2] = DTYPE == DTYPE_BF16 ? pack_bf16x2(v[i], v[i + 1]) : pack_fp16x2(v[i], v[i + 1]);
#pragma unroll
    for (int i = 0; i < N / 2; i += 4)
      reinterpret_cast<uint4*>(dst)[i / 4] = make_uint4(packed[i], packed[i + 1], packed[i + 2], packed[i + 3]);
  }
}

template <int DTYPE>
__device__ constexpr int dtype_bytes() { return DTYPE == DTYPE_FP32 ? 4 : 2; }

}  // namespace nvfp4k
