// M buckets and row tiles: how the GEMM front bounds the kernels per weight shape. M is a
// run-time argument; a kernel is chosen for M's bucket, so the kernels per (N, K) are bounded
// by the bucket set, never by M. Arch-neutral: every backend's tiles are sized by these.
#pragma once
#include <cstdint>
#include <iterator>
#include <utility>

#include "ops/gemm/gemm_spec.hpp"

namespace nvfp4::jit::detail {

// Buckets, named by the largest M they hold, and kGemmLargeM for every M above 2048. Up to 128
// a bucket is one row tile of its own height; above, the buckets are fine enough that one tile
// choice fits all of a bucket's M.
inline constexpr int kGemmLargeM = 1 << 30;
inline constexpr int kGemmMBuckets[] = {8,   16,  32,  64,  128,  192,  256,  320,  384,  448,
                                        512, 576, 640, 768, 1024, 1536, 2048, kGemmLargeM};
// Above this M no tile is trimmed or chosen for M itself: the large bucket's runs as it is.
inline constexpr int64_t kGemmLargestTrimmedM = 16384;

int gemm_m_bucket(int64_t m);
// The M a bucket's tile is chosen and tuned for: its largest (4096 for the large bucket).
int64_t gemm_bucket_m(int bucket);
// The Ms of a bucket that may get tiles of their own: from the previous bucket's end to the
// bucket's (kGemmLargestTrimmedM for the large one).
std::pair<int64_t, int64_t> gemm_bucket_rows(int bucket);

// Rows per row tile for m rows on tiles of at most block_m: the tiles share m evenly, in
// multiples of 8 (a tile holding only m's last few rows lets its CTAs outrun their partners on
// the same weights).
int64_t gemm_row_step(int64_t m, int block_m);
// A tile of block_m rows trimmed to what it holds of m rows: its row step rounded up to 16
// (the MMA and store granule), the grid unchanged.
int gemm_trimmed_height(int block_m, int64_t m);
GemmTile gemm_trimmed_to_rows(GemmTile tile, int64_t m);

}  // namespace nvfp4::jit::detail
