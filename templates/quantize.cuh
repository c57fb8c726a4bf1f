// BF16 / FP16 / FP32 [rows, K] -> NVFP4: packed E2M1 [rows, K/2] and E4M3 scales.
// One thread per 16-element block: two to four 16-byte loads, one 8-byte store, one scale
// byte. For the swizzled layout the grid also covers the padding (rows up to a multiple of
// 128, k-blocks up to a multiple of 4) and writes it as zeros.
#pragma once
#include "common/global_scale.cuh"
#include "common/nvfp4_quantize.cuh"
#include "common/params.cuh"
#include "common/scale_layout.cuh"
#include "common/vector_io.cuh"

namespace nvfp4k {

template <int IN_DTYPE, long long K, int SCALE_LAYOUT, int THREADS>
__device__ __forceinline__ void quantize(const QuantizeParams& p) {
  static_assert(K % 16 == 0, "K must be a multiple of the NVFP4 block");
  constexpr long long KBLOCKS = K / 16;
  constexpr long long KBLOCKS_PADDED = SCALE_LAYOUT == SCALES_LINEAR ? KBLOCKS : (KBLOCKS + 3) / 4 * 4;
  const long long i = (long long)blockIdx.x * THREADS + threadIdx.x;
  const long long r = i / KBLOCKS_PADDED, kb = i - r * KBLOCKS_PADDED;
  const long long rows_padded = SCALE_LAYOUT == SCALES_LINEAR ? p.rows : (p.rows + 127) / 128 * 128;
  if (r >= rows_padded) return;
  unsigned char scale = 0;
  if (r < p.rows && kb < KBLOCKS) {
    const char* in = static_cast<const char*>(p.in) + (r * p.in_stride + kb * 16) * dtype_bytes<IN_DTYPE>();
    const float gscale = global_scale(p.gscale_mode, p.gscale_value, p.gscale_ptr, r);
    unsigned packed[2];
    if constexpr (IN_DTYPE == DTYPE_FP32) {
      float x[16];
      load_as_float<IN_DTYPE, 16>(in, x);
      scale = quantize_block16(x, gscale, packed);
    } else {
      unsigned w[8];
      load_words<8>(in, w);
      scale = quantize_block16_16bit<IN_DTYPE>(w, gscale, packed);
    }
    *reinterpret_cast<uint2*>(p.packed + r * p.packed_stride + kb * 8) = make_uint2(packed[0], packed[1]);
  }
  p.scales[scale_offset<SCALE_LAYOUT>(r, kb, KBLOCKS)] = scale;
}

}  // namespace nvfp4k
