// What the block-scaled family's tiles share: each arch's Tile (sm100::Tile, sm120::Tile)
// travels through the front as a TileConfig of its rows, weight rows, stages and K split, with
// the arch's block_k and threads.
#pragma once
#include "core/spec.hpp"

namespace nvfp4::jit::detail::block_scaled {

// The TileConfig of a tile of block_m x block_n, `stages` deep, K split `split_k` ways.
TileConfig tile_config(int block_m, int block_n, int block_k, int threads, int stages, int split_k);

}  // namespace nvfp4::jit::detail::block_scaled
