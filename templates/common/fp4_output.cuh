// NVFP4 D from a GEMM epilogue (Fp4OutputParams), the steps every arch's shares: D is exactly
// what quantize() makes of the epilogue's fp32 values, through the quantizer's own block scale
// and value rounding (common/nvfp4_quantize.cuh). Where a block's values live differs by arch
// (sm_90a: eight a thread, staged from two warps' columns, over two lanes; sm_120a: four a
// thread, over four lanes; sm_100a: the whole block in one thread, quantize_block16 itself), so
// each meets its block's largest magnitude its own way and quantizes its share with it
// (quantize_block_share; sm_90a's eight values through quantize_fp32_words).
#pragma once
#include "common/global_scale.cuh"
#include "common/nvfp4_quantize.cuh"
#include "common/params.cuh"
#include "common/scale_layout.cuh"

namespace nvfp4k {

// |x| as bits, ordered as the magnitudes are, NaN and Inf from 0x7F800000 up: a block's largest
// magnitude is the largest of these, by integer compares and shuffles.
__device__ __forceinline__ unsigned magnitude_bits(float x) { return float_to_bits(x) & 0x7FFFFFFFu; }

// D's global scale when it is one for the tensor (1 where it is one per row).
__device__ __forceinline__ GlobalScale fp4_output_tensor_scale(const Fp4OutputParams& o) {
  return GlobalScale(o.gscale_mode == GSCALE_DEVICE_PER_ROW ? 1.0f : global_scale(o.gscale_mode, o.gscale_value, o.gscale_ptr, 0));
}

// Row m's global scale: the tensor's, or the row's own.
__device__ __forceinline__ GlobalScale fp4_output_row_scale(const Fp4OutputParams& o, GlobalScale tensor, long long m) {
  return o.gscale_mode == GSCALE_DEVICE_PER_ROW ? GlobalScale(o.gscale_ptr[m]) : tensor;
}

// Whether every block of row m may take reciprocals (GlobalScale::reciprocal_suffices): where a
// warp's rows all may, it runs a DIVIDE_RECIPROCAL copy of its quantization, whose code holds no
// IEEE division (their slow paths are calls that would spill an epilogue's values).
__device__ __forceinline__ bool fp4_output_row_reciprocal(const Fp4OutputParams& o, GlobalScale tensor, long long m) {
  return o.gscale_mode == GSCALE_DEVICE_PER_ROW ? GlobalScale::suffices(o.gscale_ptr[m]) : tensor.reciprocal_suffices();
}

// One block's E4M3 scale, and the nibbles (E2M1 codes, the sign in bit 3) of this thread's
// COUNT values of it, from the block's largest magnitude as magnitude_bits: a NaN or Inf there
// makes the NaN scale and zero nibbles, as quantize() does.
template <int DIVISION, int COUNT>
__device__ __forceinline__ unsigned char quantize_block_share(const float* x, unsigned amax_bits, GlobalScale g,
                                                              unsigned* nibbles) {
#pragma unroll
  for (int i = 0; i < COUNT; ++i) nibbles[i] = 0u;
  if (amax_bits >= 0x7F800000u) return E4M3_NAN;
  const float amax = bits_to_float(amax_bits);
  float divisor;
  const unsigned char scale = block_scale<false, DIVISION>(amax, g, divisor);
  if (divisor != 0.0f) {
    const float reciprocal = rcp_rn(divisor);
#pragma unroll
    for (int i = 0; i < COUNT; ++i) nibbles[i] = quantize_value<DIVISION>(x[i], amax, divisor, reciprocal);
  }
  return scale;
}

// Row m's scale of the block at D's column `column` (a multiple of 16) of `columns`.
__device__ __forceinline__ void store_fp4_scale(const Fp4OutputParams& o, long long m, long long column, long long columns,
                                                unsigned char scale) {
  const long long kb = column / 16, kblocks = columns / 16;
  o.scales[o.scale_layout == SCALES_LINEAR ? scale_offset_linear(m, kb, kblocks) : scale_offset_swizzled128x4(m, kb, kblocks)] =
      scale;
}

}  // namespace nvfp4k
