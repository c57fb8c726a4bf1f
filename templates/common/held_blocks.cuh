// Blocks of 16 values a thread of the fused quantizers holds in registers, and their
// quantization.
#pragma once
#include "common/nvfp4_quantize.cuh"
#include "common/vector_io.cuh"

namespace nvfp4k {

// Blocks of 16 values a thread holds: 16-bit values two per word, as loaded or as a prologue
// rounded them (every value is one the dtype represents, so packing is exact), fp32 values as
// floats; quantized as quantize does from either.
template <int DTYPE, int BLOCKS>
struct HeldBlocks {
  static constexpr bool WORDS = DTYPE != DTYPE_FP32;
  float x[WORDS ? 1 : BLOCKS][16];
  unsigned w[WORDS ? BLOCKS : 1][8];

  __device__ __forceinline__ void load(int j, const char* src) {
    if constexpr (WORDS) load_words<8>(src, w[j]);
    else load_as_float<DTYPE, 16>(src, x[j]);
  }
  __device__ __forceinline__ void store(int j, char* dst) const {
    if constexpr (WORDS) store_words<8>(dst, w[j]);
    else store_converted<DTYPE, 16>(dst, x[j]);
  }
  __device__ __forceinline__ void put(int j, const float (&v)[16]) {
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      if constexpr (WORDS) {
        if (i % 2 == 0) w[j][i / 2] = DTYPE == DTYPE_BF16 ? pack_bf16x2(v[i], v[i + 1]) : pack_fp16x2(v[i], v[i + 1]);
      } else {
        x[j][i] = v[i];
      }
    }
  }
  __device__ __forceinline__ void get(int j, float (&v)[16]) const {
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      if constexpr (WORDS) {
        const unsigned h = i % 2 ? w[j][i / 2] >> 16 : w[j][i / 2] & 0xFFFFu;
        v[i] = DTYPE == DTYPE_BF16 ? bf16_bits_to_float(h) : fp16_bits_to_float(h);
      } else {
        v[i] = x[j][i];
      }
    }
  }
  template <int OTHER_BLOCKS>
  __device__ __forceinline__ void copy(int j, const HeldBlocks<DTYPE, OTHER_BLOCKS>& from, int i) {
    if constexpr (WORDS) {
#pragma unroll
      for (int e = 0; e < 8; ++e) w[j][e] = from.w[i][e];
    } else {
#pragma unroll
      for (int e = 0; e < 16; ++e) x[j][e] = from.x[i][e];
    }
  }
  // The largest finite magnitude of block j (0 if none): of 16-bit values by three-way 16-bit
  // maximums, value by value only where the block holds an Inf or a NaN.
  __device__ __forceinline__ float finite_amax(int j) const {
    if constexpr (WORDS) {
      unsigned m[8];
      magnitudes_16bit(w[j], m);
      const unsigned a = amax_16bit(m);
      if (a < inf_bits_16<DTYPE>()) return widen_16<DTYPE>(a);
    }
    float v[16];
    get(j, v);
    return nvfp4k::finite_amax(v);
  }
  // Block j quantized (DIVISION: see DIVIDE_EITHER) into the nibbles at `packed` (8 bytes) and
  // the scale at `scale`.
  template <int DIVISION>
  __device__ __forceinline__ void quantize_store(int j, GlobalScale g, unsigned char* packed, unsigned char* scale) const {
    unsigned words[2];
    if constexpr (WORDS) *scale = quantize_block16_16bit<DTYPE, DIVISION>(w[j], g, words);
    else *scale = quantize_block16<DIVISION>(x[j], g, words);
    *reinterpret_cast<uint2*>(packed) = make_uint2(words[0], words[1]);
  }
};

}  // namespace nvfp4k
