// Where the E4M3 scale of (row r, k-block kb) lives, for each scale layout.
#pragma once
#include "common/portable.cuh"

namespace nvfp4k {

// SCALES_PREPACKED: the GEMM's prepacked weight, its scales inside the value chunks
// (sm90/prepacked_weight.cuh); only a GEMM kernel spec holds it.
enum ScaleLayoutCode { SCALES_LINEAR = 0, SCALES_SWIZZLED128X4 = 1, SCALES_PREPACKED = 2 };

// linear: [rows, kblocks] row-major.
NVFP4_HD long long scale_offset_linear(long long r, long long kb, long long kblocks) { return r * kblocks + kb; }

// swizzled128x4 (cuBLASLt / CUTLASS / TRT-LLM): 128-row x 4-block tiles of 512 bytes, rows
// padded to 128 and k-blocks to 4. Inside a tile, row r sits at (r%32)*16 + (r%128/32)*4. The
// offset is a row's part plus a k-block's part, so a loop over rows at one k-block can hoist the
// latter (and `I` may be unsigned, whose divisions are shifts).
template <class I>
NVFP4_HD I swizzled128x4_row_offset(I r, I kblocks) {
  return r / 128 * ((kblocks + 3) / 4 * 512) + r % 32 * 16 + r % 128 / 32 * 4;
}
template <class I>
NVFP4_HD I swizzled128x4_kblock_offset(I kb) {
  return kb / 4 * 512 + kb % 4;
}
NVFP4_HD long long scale_offset_swizzled128x4(long long r, long long kb, long long kblocks) {
  return swizzled128x4_row_offset(r, kblocks) + swizzled128x4_kblock_offset(kb);
}

template <int LAYOUT>
NVFP4_HD long long scale_offset(long long r, long long kb, long long kblocks) {
  return LAYOUT == SCALES_LINEAR ? scale_offset_linear(r, kb, kblocks) : scale_offset_swizzled128x4(r, kb, kblocks);
}

// Bytes a scale tensor of `rows` x `kblocks` occupies, padding included.
NVFP4_HD long long scale_bytes(int layout, long long rows, long long kblocks) {
  return layout == SCALES_LINEAR ? rows * kblocks : ((rows + 127) / 128) * 128 * ((kblocks + 3) / 4) * 4;
}

}  // namespace nvfp4k
