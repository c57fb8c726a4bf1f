// The sm_120a / sm_121a GEMM's tiles: what its kernel can build within the arch's limits
// (99 KB of shared memory per block, 64K registers per SM, no clusters), the heuristic that
// reads the SM count, and the tuner's search space.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ops/gemm/gemm_spec.hpp"

namespace nvfp4::jit::detail::sm120 {

struct Tile {
  int block_m = 0;  // activation rows per CTA: 16, 32, 64 or 128
  int block_n = 0;  // weight rows per CTA: 64, 128 or 256
  int stages = 0;   // cp.async ring depth, 128 k each
  int split_k = 1;  // CTAs (a cluster) splitting a tile's K: 1, 2 or 4
  bool operator==(const Tile&) const = default;
};

// The tiles, as the block-scaled family's backend takes them (block_scaled::Backend).
struct Tiles {
  using Tile = sm120::Tile;

  static GemmTile to_config(const Tile& tile);
  static Tile from_config(const GemmTile& config);

  static int threads(const Tile& tile);
  static unsigned shared_bytes(const Tile& tile);
  // Why the kernel cannot be built or launched with `tile` (at K = k; 0: any K, split-K
  // unchecked); empty when it can.
  static std::string tile_problem(const Tile& tile, int64_t k = 0);

  // The tile an untuned call with m rows (grouped, groups > 0: m rows in each group) runs,
  // chosen for m's bucket: the row tile of its size class (16, 32, 64, then 128 rows), 128 weight
  // rows a CTA where that grid fills every SM, else 64; the most stages that fit (at most 4). A
  // dense grid that leaves half the SMs idle or more splits K in 2 or 4 (the most that still fits
  // one wave, each split 4 k-tiles or more): small M at large K.
  static Tile heuristic_tile(int64_t n, int64_t k, int64_t m, int sm_count, int groups = 0);

  // The tuner's search space for a bucket: the heuristic's tile first, then every row tile up to
  // the bucket's, 64 / 128 / 256 weight rows, 2 stages to as many as fit, split-K 1 / 2 / 4
  // (dense only); only tiles tile_problem accepts at K.
  static std::vector<Tile> candidate_tiles(int64_t n, int64_t k, int bucket, int sm_count, int groups = 0);

  // NVFP4 D (the SwiGLU epilogue's): a warp's outputs must be whole 16-column blocks, which a
  // warp's 4 x its MMAs' width is except on the 16-row tile of 64 weight rows. Why `tile` cannot
  // write it (empty: it can); and the tile that can in its place (64 weight rows doubled, its
  // stages cut to fit).
  static std::string d_fp4_tile_problem(const Tile& tile);
  static Tile with_d_fp4(Tile tile);

  // "bm64 bn128 s4" ("bm16 bn64 s4 ks2" split)
  static std::string describe(const Tile& tile);
};

}  // namespace nvfp4::jit::detail::sm120
