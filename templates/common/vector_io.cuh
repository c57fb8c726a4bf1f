// 16-byte loads of BF16/FP16/FP32 inputs and 16-byte stores of converted outputs.
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

// Loads N 32-bit words (N a multiple of 4, 16-byte aligned) with 16-byte loads: 16-bit values as stored, two per word.
template <int N>
__device__ __forceinline__ void load_words(const void* src, unsigned (&w)[N]) {
#pragma unroll
  for (int i = 0; i < N; i += 4) {
    const uint4 v = reinterpret_cast<const uint4*>(src)[i / 4];
    w[i] = v.x, w[i + 1] = v.y, w[i + 2] = v.z, w[i + 3] = v.w;
  }
}

// Stores N 32-bit words (N a multiple of 4, 16-byte aligned) with 16-byte stores.
template <int N>
__device__ __forceinline__ void store_words(void* dst, const unsigned (&w)[N]) {
#pragma unroll
  for (int i = 0; i < N; i += 4) reinterpret_cast<uint4*>(dst)[i / 4] = make_uint4(w[i], w[i + 1], w[i + 2], w[i + 3]);
}

// Loads N values of DTYPE (N a multiple of 8, 16-byte aligned) as floats, with 16-byte loads.
template <int DTYPE, int N>
__device__ __forceinline__ void load_as_float(const void* src, float (&v)[N]) {
  if constexpr (DTYPE == DTYPE_FP32) {
#pragma unroll
    for (int i = 0; i < N; i += 4) {
      const float4 f = reinterpret_cast<const float4*>(src)[i / 4];
      v[i] = f.x; v[i + 1] = f.y; v[i + 2] = f.z; v[i + 3] = f.w;
    }
  } else {
#pragma unroll
    for (int i = 0; i < N; i += 8) {
      const uint4 w = reinterpret_cast<const uint4*>(src)[i / 8];
      const unsigned words[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        v[i + 2 * j] = DTYPE == DTYPE_BF16 ? bf16_bits_to_float(words[j]) : fp16_bits_to_float(words[j] & 0xFFFFu);
        v[i + 2 * j + 1] = DTYPE == DTYPE_BF16 ? bf16_bits_to_float(words[j] >> 16) : fp16_bits_to_float(words[j] >> 16);
      }
    }
  }
}

}  // namespace nvfp4k
