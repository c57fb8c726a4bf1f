// Prepack: a ModelOpt NVFP4 weight [rows, K] rewritten in the sm_90a GEMM's own layout
// (sm90/prepacked_weight.cuh). One thread per (chunk, wgmma thread), then one per padded row
// for the NaN and fold exponent row bytes; a one-time step at load, so it runs the CPU reference's code as it is.
#pragma once
#include "common/params.cuh"
#include "sm90/prepacked_weight.cuh"

namespace nvfp4k {

template <int LAYOUT, long long K, int THREADS>
__device__ __forceinline__ void prepack(const PrepackParams& p) {
  const long long i = (long long)blockIdx.x * THREADS + threadIdx.x;
  const long long chunk = i / 128, chunks = prepacked::chunks_per_row_tile(K);
  const long long row_tile = chunk / chunks, row_tiles = prepacked::padded_rows(p.rows) / prepacked::TILE_ROWS;
  if (row_tile >= row_tiles) {
    const long long row = i - row_tiles * chunks * 128;
    if (row < prepacked::padded_rows(p.rows))
      prepacked::prepack_row_bytes(p.scales, LAYOUT, p.rows, K, row, p.out, p.swiglu_interleave);
    return;
  }
  prepacked::prepack_thread(p.packed, p.packed_stride, p.scales, LAYOUT, p.rows, K, row_tile, chunk - row_tile * chunks,
                            int(i % 128), p.out, p.swiglu_interleave);
}

}  // namespace nvfp4k
