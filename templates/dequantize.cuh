// NVFP4 -> BF16 / FP16 / FP32 dequantize, full or gathered by row indices.
// Gathering and the global-scale source are run-time choices (uniform branches).
// One thread decodes VEC consecutive elements of a row (one or two scale blocks):
// a 16- or 8-byte packed load, VEC*sizeof(out) bytes of 16-byte stores.
#pragma once
#include "common/nvfp4_format.cuh"
#include "common/params.cuh"
#include "common/scale_layout.cuh"
#include "common/vector_io.cuh"

namespace nvfp4k {

template <int OUT_DTYPE, long long K, int VEC, int SCALE_LAYOUT, int THREADS>
__device__ __forceinline__ void dequantize(const DequantizeParams& p) {
  static_assert(K % VEC == 0 && VEC % 16 == 0, "K must be a multiple of the vector width");
  constexpr long long CHUNKS_PER_ROW = K / VEC;
  constexpr long long KBLOCKS = K / 16;
  const long long chunk = (long long)blockIdx.x * THREADS + threadIdx.x;
  const long long r = chunk / CHUNKS_PER_ROW;
  if (r >= p.rows) return;
  const long long c = chunk - r * CHUNKS_PER_ROW;

  const long long src = p.row_indices ? (long long)p.row_indices[r] : r;
  float v[VEC];
  if (src >= 0 && src < p.src_rows) {
    unsigned w[VEC / 8];
    load_packed<VEC>(p.packed + src * p.packed_stride + c * (VEC / 2), w);
    const float gscale = global_scale(p.gscale_mode, p.gscale_value, p.gscale_ptr, src);
#pragma unroll
    for (int b = 0; b < VEC / 16; ++b) {
      // e2m1 * e4m3 is exact in fp32, so each value is one rounding of the exact product.
      const float s = e4m3_to_float(p.scales[scale_offset<SCALE_LAYOUT>(src, c * (VEC / 16) + b, KBLOCKS)]);
#pragma unroll
      for (int j = 0; j < 16; ++j) {
        const int e = b * 16 + j;
        v[e] = (e2m1_to_float((w[e / 8] >> ((e % 8) * 4)) & 15u) * s) * gscale;
      }
    }
  } else {
#pragma unroll
    for (int e = 0; e < VEC; ++e) v[e] = bits_to_float(0x7FC00000u);  // out-of-range gather index
  }
  char* out = static_cast<char*>(p.out) + (r * p.out_stride + c * VEC) * dtype_bytes<OUT_DTYPE>();
  store_converted<OUT_DTYPE, VEC>(out, v);
}

}  // namespace nvfp4k
