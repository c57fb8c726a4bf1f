// The sm_100a / sm_103a GEMM's tiles: what its kernel can build within the arch's limits
// (227 KB of shared memory per block, 512 tensor memory columns), the heuristic that reads the
// SM count, and the tuner's search space. Every tile is 128 rows (one .cta_group::1 MMA) by
// 64, 128 or 256 weight rows.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/spec.hpp"

namespace nvfp4::jit::detail::sm100 {

struct Tile {
  int block_n = 0;  // weight rows per CTA: 64, 128 or 256 (the MMA's N)
  int stages = 0;   // the TMA ring's depth, 256 k each
  bool operator==(const Tile&) const = default;
};

TileConfig to_config(const Tile& tile);
Tile from_config(const TileConfig& config);

unsigned shared_bytes(const Tile& tile);
// Why the kernel cannot be built or launched with `tile`; empty when it can.
std::string tile_problem(const Tile& tile);

// The tile an untuned call with m rows runs, chosen for m's bucket: the widest weight tile
// (256, 128, then 64 rows) whose grid still fills every SM, else the one with the most CTAs
// (64); the most stages that fit.
Tile heuristic_tile(int64_t n, int64_t m, int sm_count);

// The tuner's search space for a bucket: the heuristic's tile first, then 64 / 128 / 256 weight
// rows with 2 stages to as many as fit.
std::vector<Tile> candidate_tiles(int64_t n, int bucket, int sm_count);

// "bn128 s6"
std::string describe(const Tile& tile);

}  // namespace nvfp4::jit::detail::sm100
