// E4M3 block scales of an NVFP4 matrix [rows, K] from one layout to another. One thread per
// (row, k-block) of the destination, padding included (written as zero). A one-time prepack
// step (e.g. ModelOpt's linear weight_scale -> swizzled128x4), so simplicity wins here.
#pragma once
#include "common/params.cuh"
#include "common/scale_layout.cuh"

namespace nvfp4k {

template <int SRC_LAYOUT, int DST_LAYOUT, long long K, int THREADS>
__device__ __forceinline__ void convert_scales(const ConvertScalesParams& p) {
  constexpr long long KBLOCKS = K / 16;
  constexpr long long KB_PADDED = DST_LAYOUT == SCALES_LINEAR ? KBLOCKS : (KBLOCKS + 3) / 4 * 4;
  const long long rows_padded = DST_LAYOUT == SCALES_LINEAR ? p.rows : (p.rows + 127) / 128 * 128;
  const long long i = (long long)blockIdx.x * THREADS + threadIdx.x;
  const long long r = i / KB_PADDED, kb = i - r * KB_PADDED;
  if (r >= rows_padded) return;
  const unsigned char v = r < p.rows && kb < KBLOCKS ? p.src[scale_offset<SRC_LAYOUT>(r, kb, KBLOCKS)] : 0;
  p.dst[scale_offset<DST_LAYOUT>(r, kb, KBLOCKS)] = v;
}

}  // namespace nvfp4k
