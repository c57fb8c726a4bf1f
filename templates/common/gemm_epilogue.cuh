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

template <int DTYPE>
__device__ __forceinline__ float load_element(const void* in, long long at) {
  if constexpr (DTYPE == DTYPE_FP32) return static_cast<const float*>(in)[at];
  else if constexpr (DTYPE == DTYPE_BF16) return bf16_bits_to_float(static_cast<const unsigned short*>(in)[at]);
  else return fp16_bits_to_float(static_cast<const unsigned short*>(in)[at]);
}

// Two values of a 16-bit D in one word, the first in the low half.
template <int DTYPE>
__device__ __forceinline__ unsigned pack_pair(float lo, float hi) {
  if constexpr (DTYPE == DTYPE_BF16) return pack_bf16x2(lo, hi);
  else return pack_fp16x2(lo, hi);
}

// The SwiGLU epilogue's silu(g) * u = g / (1 + e^-g) * u of fp32 sums, in fp32 from the
// hardware's exp2 and divide approximations (relative error below 2^-19; the exact division's
// slow path is a call, whose saved registers spill next to a tall tile's accumulators). Where
// 1 + e^-g passes 2^126 (g below -87.3) the quotient is 0: |silu(g)| < 2^-120 |g| there.
__device__ __forceinline__ float silu_mul_fp32(float g, float u) { return __fmul_rn(__fdividef(g, __fadd_rn(1.0f, __expf(-g))), u); }

}  // namespace nvfp4k
