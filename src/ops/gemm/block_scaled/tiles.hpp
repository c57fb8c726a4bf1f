// What the block-scaled family's tiles share: each arch's Tile (sm100::Tile, sm120::Tile)
// travels through the front as a GemmTile of its rows, weight rows, stages and K split, with
// the arch's block_k and threads.
#pragma once
#include "ops/gemm/gemm_spec.hpp"

namespace nvfp4::jit::detail::block_scaled {

// The GemmTile of a tile of block_m x block_n, `stages` deep, K split `split_k` ways.
GemmTile tile_config(int block_m, int block_n, int block_k, int threads, int stages, int split_k);

}  // namespace nvfp4::jit::detail::block_scaled
