// The sm_90a GEMM's tiles: what the kernel's template can build (shared memory, warpgroups,
// registers), the heuristic and its cost model, and the tuner's search space.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/spec.hpp"

namespace nvfp4::jit::detail::sm90 {

struct Tile {
  int block_m = 0;    // activation rows per CTA (the wgmma's N)
  int consumers = 0;  // consumer warpgroups along N, 64 weight rows each
  int stages = 0;     // TMA ring depth
  int split_k = 1;    // CTAs of a cluster splitting K
  int block_k = 128;  // K per stage: 128 or 256 (longer contiguous weight reads per row)
  int k_slices = 1;   // consumer warpgroups per 64 weight rows, each taking a slice of every stage's k steps
  bool operator==(const Tile&) const = default;
};

// The spec's TileConfig and back (block_n = 64 x consumers; threads count the k slices).
TileConfig to_config(const Tile& tile);
Tile from_config(const TileConfig& config);

// Threads per CTA (the template's THREADS): the consumer warpgroups, then the producer warpgroup.
int threads(const Tile& tile);
// Dynamic shared memory the kernel of `tile` needs (the template's SMEM_BYTES).
unsigned shared_bytes(const Tile& tile);
// Whether the kernel of `tile` stores D (elements of d_bytes) through shared memory and TMA:
// its tile fits in the stages (the template's condition).
bool stores_through_tma(const Tile& tile, int d_bytes);
// Why the kernel cannot be built or launched with `tile` for this K; empty when it can.
std::string tile_problem(const Tile& tile, int64_t k);

// The tile an untuned call with m rows runs: up to M = 128 one row tile as high as m's rows,
// past kGemmLargestTrimmedM the large bucket's, else the cost model's at m, trimmed to m's rows.
// `prepacked`: the weight is prepacked, which also allows three consumer warpgroups.
Tile heuristic_tile(int64_t n, int64_t k, int64_t m, int sm_count, bool prepacked);

// The heuristic's tile for a bucket: heuristic_tile at the bucket's largest M.
Tile bucket_tile(int64_t n, int64_t k, int bucket, int sm_count, bool prepacked = false);

// The tuner's search space for a bucket: the heuristic's tile first, then one to three
// consumers and k slices, block_k 128 / 256, 4 stages or as many as fit, split-K 1 / 2 / 4 / 8
// (and above M = 128 row tiles of 128, 192 and 256 too); only tiles tile_problem accepts.
std::vector<Tile> candidate_tiles(int64_t n, int64_t k, int bucket, int sm_count, bool prepacked);

// "bm8 bk256 wg1 s4 ks2" ("... wg1x2 s4 ..." with two k slices).
std::string describe(const Tile& tile);

}  // namespace nvfp4::jit::detail::sm90
