// GEMM epilogue pieces shared by every arch: bias loads and converted scalar stores.
#pragma once
#include "common/nvfp4_format.cuh"
#include "common/params.cuh"

namespace nvfp4k {

template <int BIAS>
__device__ __forceinline__ float load_bias(const void* bias, long long n) {
  if constexpr (BIAS == BIAS_BF16) return bf16_bits_to_float(static_cast<const unsigned short*>(bias)[n]);
  else if constexpr (BIAS == BIAS_FP32) return static_cast<const float*>(bias)[n];
  else return 0.0f;
}

template <int DTYPE>
__device__ __forceinline__ void store_element(void* out, long long at, float v) {
  if constexpr (DTYPE == DTYPE_FP32) static_cast<float*>(out)[at] = v;
  else if constexpr (DTYPE == DTYPE_BF16) static_cast<unsigned short*>(out)[at] = float_to_bf16_bits(v);
  else static_cast<unsigned short*>(out)[at] = float_to_fp16_bits(v);
}

// Two values of a 16-bit D in one word, the first in the low half.
template <int DTYPE>
__device__ __forceinline__ unsigned pack_pair(float lo, float hi) {
  if constexpr (DTYPE == DTYPE_BF16) return pack_bf16x2(lo, hi);
  else return pack_fp16x2(lo, hi);
}

}  // namespace nvfp4k
