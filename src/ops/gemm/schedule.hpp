// The host half of the tile scheduler (templates/common/tile_scheduler.cuh): how a GEMM's
// output tiles become a grid, for every backend.
#pragma once
#include <cstdint>

#include "common/tile_scheduler.cuh"

namespace nvfp4::jit::detail {

struct GemmGrid {
  nvfp4k::TileSchedule schedule{};
  unsigned clusters = 0;  // blockIdx.x range; each cluster is split_k CTAs along z
};

// The grid of m x n on tiles of block_m x block_n rows, K split among split_k CTAs. Throws
// Error(invalid_argument) naming m where the tiles are more than one launch covers.
GemmGrid gemm_grid(int64_t m, int64_t n, int64_t k, int block_m, int block_n, int split_k, int sm_count);

// The grid of a grouped layout (nvfp4k::GroupedLayoutCode) of `groups` groups, unsplit, on row
// tiles of block_m rows: contiguous, m rows in all (an upper bound of the groups' ends); masked,
// m rows a group; batched, every group's m rows (its row tiles share them evenly). Sized for the most row tiles the groups' sizes on the device can make; the
// device pointers of the sizes are the caller's to set.
GemmGrid gemm_grouped_grid(int layout, int groups, int64_t m, int64_t n, int block_m, int block_n);

// Of `tiles` output tiles, how many a split_k > 1 grid splits (its last ones, the rest going
// whole to clusters of split_k CTAs): a last, partial wave's when split they fit in one wave
// (that wave then takes 1 / split_k of the time), else all of them. (tiles - result) is a
// multiple of split_k.
int64_t gemm_split_tiles(int64_t tiles, int split_k, int sm_count);

// Row tiles per band of the tile order: all of them where the 16-bit activations stay in L2
// (within a third of an H100's), so a weight tile is read from HBM once; else 1, one row tile's
// pass over the weight at a time.
int gemm_band_m_tiles(int64_t m, int64_t k, int block_m);

}  // namespace nvfp4::jit::detail
