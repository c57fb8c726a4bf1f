// Row amax over finite values, for global scales computed on the device without a host
// synchronization. One warp per row; each lane reads 8 values (16 or 32 bytes) at a time.
// PER_ROW: out[r] = global_scale_from_amax(amax_r). Otherwise: out[0] = max(out[0], amax_r)
// on the float bits (all non-negative), out[0] zeroed by the launcher beforehand.
#pragma once
#include "common/nvfp4_quantize.cuh"
#include "common/params.cuh"
#include "common/vector_io.cuh"

namespace nvfp4k {

template <int IN_DTYPE, long long K, bool PER_ROW, int THREADS>
__device__ __forceinline__ void row_amax(const AmaxParams& p) {
  static_assert(K % 8 == 0, "K must be a multiple of 8");
  const long long r = (long long)blockIdx.x * (THREADS / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (r >= p.rows) return;
  const char* row = static_cast<const char*>(p.in) + r * p.in_stride * dtype_bytes<IN_DTYPE>();
  float m = 0.0f;
  for (long long e = lane * 8; e < K; e += 32 * 8) {
    float x[8];
    load_as_float<IN_DTYPE, 8>(row + e * dtype_bytes<IN_DTYPE>(), x);
    m = fmaxf(m, finite_amax(x));
  }
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) m = fmaxf(m, __shfl_xor_sync(0xFFFFFFFFu, m, offset));
  if (lane != 0) return;
  if (PER_ROW) p.out[r] = global_scale_from_amax(m);
  else atomicMax(reinterpret_cast<unsigned*>(p.out), __float_as_uint(m));
}

// Turns the amax in out[0] into the global scale it implies (one thread).
__device__ __forceinline__ void amax_to_global_scale(const AmaxParams& p) {
  if (threadIdx.x == 0 && blockIdx.x == 0) p.out[0] = global_scale_from_amax(p.out[0]);
}

}  // namespace nvfp4k
