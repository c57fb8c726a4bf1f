// Wide (16-byte) loads and stores of packed NVFP4 data and converted outputs.
#pragma once
#include "common/nvfp4_format.cuh"
#include "common/params.cuh"

namespace nvfp4k {

// Loads N packed E2M1 values (N/2 bytes, N in {16, 32}) as N/8 32-bit words.
template <int N>
__device__ __forceinline__ void load_packed(const unsigned char* src, unsigned (&w)[N / 8]) {
  if constexpr (N == 32) {
    const uint4 v = *reinterpret_cast<const uint4*>(src);
    w[0] = v.x; w[1] = v.y; w[2] = v.z; w[3] = v.w;
  } else {
    static_assert(N == 16, "16 or 32 elements per load");
    const uint2 v = *reinterpret_cast<const uint2*>(src);
    w[0] = v.x; w[1] = v.y;
  }
}

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
    for (int i = 0; i < N; i += 2) {
      const unsigned lo = DTYPE == DTYPE_BF16 ? float_to_bf16_bits(v[i]) : float_to_fp16_bits(v[i]);
      const unsigned hi = DTYPE == DTYPE_BF16 ? float_to_bf16_bits(v[i + 1]) : float_to_fp16_bits(v[i + 1]);
      packed[i / 2] = lo | (hi << 16);
    }
#pragma unroll
    for (int i = 0; i < N / 2; i += 4)
      reinterpret_cast<uint4*>(dst)[i / 4] = make_uint4(packed[i], packed[i + 1], packed[i + 2], packed[i + 3]);
  }
}

template <int DTYPE>
__device__ constexpr int dtype_bytes() { return DTYPE == DTYPE_FP32 ? 4 : 2; }

}  // namespace nvfp4k
