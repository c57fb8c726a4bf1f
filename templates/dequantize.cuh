// NVFP4 -> BF16 / FP16 / FP32 dequantize, full or gathered by row indices.
//
// Work is cut into groups of 8 consecutive elements of a row (4 packed bytes in, 16 or 32
// bytes out), numbered across the whole output. Each of a block's THREADS threads handles up
// to LOADS groups, one per pass; a warp's pass touches one contiguous span. A thread's packed
// words (and their scales) are all loaded before the first is used, to keep enough bytes in
// flight.
// Gathering and the global-scale source are run-time choices (uniform branches).
#pragma once
#include "common/ptx/dependent_launch.cuh"
#include "common/global_scale.cuh"
#include "common/nvfp4_format.cuh"
#include "common/params.cuh"
#include "common/scale_layout.cuh"
#include "common/vector_io.cuh"

namespace nvfp4k {

template <int OUT_DTYPE, long long K, int SCALE_LAYOUT, int THREADS, int LOADS>
__device__ __forceinline__ void dequantize(const DequantizeParams& p) {
  static_assert(K % 16 == 0, "K must be a multiple of the NVFP4 block");
  // W4A4's GEMM reads this kernel's output only after its griddep_wait: with weights_static it
  // may start now and stream its first weights meanwhile.
  griddep_launch_dependents();
  constexpr long long GROUPS_PER_ROW = K / 8;
  const long long total = p.rows * GROUPS_PER_ROW;
  // pass j of block b takes the THREADS groups from (j * blocks + b) * THREADS: LOADS passes of
  // a large call, fewer of a small one, which the host spreads over more blocks
  auto group = [&](int j) { return ((long long)j * gridDim.x + blockIdx.x) * THREADS + threadIdx.x; };

  // Each group's packed word, scale and global scale are all requested before any is used:
  // one memory round trip per thread, which is what the small (latency-bound) calls wait on.
  unsigned word[LOADS], scale[LOADS];
  float gscale[LOADS];
  long long src[LOADS];
  // The tensor's global scale (unless one per row): its load, if any, goes out with the
  // others; the arithmetic from an amax waits until they are all out.
  const bool per_row = p.gscale_mode == GSCALE_DEVICE_PER_ROW;
  const float tensor_raw = p.gscale_mode == GSCALE_HOST ? p.gscale_value : per_row ? 0.0f : p.gscale_ptr[0];
#pragma unroll
  for (int j = 0; j < LOADS; ++j) {
    const long long g = group(j);
    const long long r = g / GROUPS_PER_ROW, c = g - r * GROUPS_PER_ROW;
    src[j] = g >= total ? -1 : p.row_indices ? (long long)p.row_indices[r] : r;
    const bool in = src[j] >= 0 && src[j] < p.src_rows;
    word[j] = in ? *reinterpret_cast<const unsigned*>(p.packed + src[j] * p.packed_stride + c * 4) : 0u;
    scale[j] = in ? p.scales[scale_offset<SCALE_LAYOUT>(src[j], c / 2, K / 16)] : 0u;
    gscale[j] = per_row && in ? p.gscale_ptr[src[j]] : 0.0f;
  }
  const float tensor_gscale = p.gscale_mode == GSCALE_FROM_AMAX ? global_scale_from_amax(tensor_raw) : tensor_raw;
#pragma unroll
  for (int j = 0; j < LOADS; ++j) {
    const long long g = group(j);
    if (g >= total) break;
    const long long r = g / GROUPS_PER_ROW, c = g - r * GROUPS_PER_ROW;
    float v[8];
    if (src[j] >= 0 && src[j] < p.src_rows) {
      // e2m1 * e4m3 is exact in fp32, so each value is one rounding of the exact product.
      const float s = e4m3_to_float(scale[j]);
      const float gs = per_row ? gscale[j] : tensor_gscale;
#pragma unroll
      for (int e = 0; e < 8; ++e) v[e] = (e2m1_to_float((word[j] >> (4 * e)) & 15u) * s) * gs;
    } else {
#pragma unroll
      for (int e = 0; e < 8; ++e) v[e] = bits_to_float(0x7FC00000u);  // out-of-range gather index
    }
    char* out = static_cast<char*>(p.out) + (r * p.out_stride + c * 8) * dtype_bytes<OUT_DTYPE>();
    store_converted<OUT_DTYPE, 8>(out, v);
  }
}

}  // namespace nvfp4k
