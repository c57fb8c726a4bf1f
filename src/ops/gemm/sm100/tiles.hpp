// The sm_100a / sm_103a GEMM's tiles: what its kernel can build within the arch's limits
// (227 KB of shared memory per block, 512 tensor memory columns), the heuristic that reads the
// SM count, and the tuner's search space. A tile is 128 rows (one CTA, .cta_group::1 MMAs) by
// 64, 128 or 256 weight rows, or 256 rows (a CTA pair, .cta_group::2) by 128 or 256.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ops/gemm/gemm_spec.hpp"

namespace nvfp4::jit::detail::sm100 {

struct Tile {
  int block_n = 0;  // the tile's weight rows: 64, 128 or 256 (the MMA's N)
  int stages = 0;   // the TMA ring's depth, 256 k each
  int ctas = 1;     // 1, or 2: a CTA pair (a cluster of 2) computes 256 rows
  bool operator==(const Tile&) const = default;
};

// The tiles, as the block-scaled family's backend takes them (block_scaled::Backend).
struct Tiles {
  using Tile = sm100::Tile;

  static GemmTile to_config(const Tile& tile);
  static Tile from_config(const GemmTile& config);

  static unsigned shared_bytes(const Tile& tile);
  // Why the kernel cannot be built or launched with `tile`; empty when it can.
  static std::string tile_problem(const Tile& tile);

  // The tile an untuned call with m rows (a grouped call's: m rows in each of `groups`, 0 for a
  // dense call as on every backend) runs, chosen for m's bucket: a pair's 256 x 256 tile where the
  // bucket has 256 rows and its grid fills every SM (each weight tile then feeds 256 rows at half
  // the shared memory a CTA), else the widest single-CTA weight tile (256, 128, then 64 rows)
  // whose grid still fills every SM, else the one with the most CTAs (64); the most stages that
  // fit.
  static Tile heuristic_tile(int64_t n, int64_t m, int sm_count, int groups = 0);

  // The tuner's search space for a bucket: the heuristic's tile first, then 64 / 128 / 256 weight
  // rows with 2 stages to as many as fit, then the pair's 128 / 256 where the bucket has more
  // than 128 rows.
  static std::vector<Tile> candidate_tiles(int64_t n, int bucket, int sm_count, int groups = 0);

  // "bn128 s6", a pair's "bm256 bn256 s5"
  static std::string describe(const Tile& tile);
};

}  // namespace nvfp4::jit::detail::sm100
