// The sm_90a GEMM's tiles: what the kernel's template can build (shared memory, warpgroups,
// registers), the heuristic and its cost model, and the tuner's search space.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ops/gemm/gemm_spec.hpp"

namespace nvfp4::jit::detail::sm90 {

struct Tile {
  int block_m = 0;    // activation rows per CTA (the wgmma's N)
  int consumers = 0;  // consumer warpgroups along N, 64 weight rows each
  int stages = 0;     // TMA ring depth
  int split_k = 1;    // CTAs of a cluster splitting K
  int block_k = 128;  // K per stage: 128 or 256 (longer contiguous weight reads per row)
  int k_slices = 1;   // consumer warpgroups per 64 weight rows, each taking a slice of every stage's k steps
  // A persistent grid's CTAs an SM (grouped_persistent_ctas), 0: a CTA a tile. Not a GemmTile
  // field: the backend's choice per spec.
  int persistent = 0;
  // The W4A8 mode's kernel (E4M3 activations: 128 columns a 128-byte box, half the bytes a
  // stage). Not a GemmTile field: the spec's precision.
  bool fp8 = false;
  // RMSNorm of A in the kernel (its rows' 1 / rms in shared memory after the stages). Not a
  // GemmTile field: the spec's flag.
  bool a_rmsnorm = false;
  // NVFP4 D (the SwiGLU epilogue's): its values staged in shared memory after the
  // RMSNorm region. Not a GemmTile field: the spec's D type.
  bool d_fp4 = false;
  bool operator==(const Tile&) const = default;
};

// The spec's GemmTile and back (block_n = 64 x consumers; threads count the k slices too).
GemmTile to_config(const Tile& tile);
Tile from_config(const GemmTile& config);

// Threads per CTA (the template's THREADS): the consumer warpgroups, then the producer warpgroup.
int threads(const Tile& tile);
// Dynamic shared memory the kernel of `tile` needs (the template's SMEM_BYTES).
unsigned shared_bytes(const Tile& tile);
// `tile` with RMSNorm of A: its stages cut to those that fit beside the rows' 1 / rms.
Tile with_a_rmsnorm(Tile tile);
// `tile` storing NVFP4 D: its stages cut to those that fit beside the staged values.
Tile with_d_fp4(Tile tile);
// Whether the kernel of `tile` can store D (elements of d_bytes) from shared memory (TMA, or a
// grouped tile's rows copied out): its tile fits in the stages (the template's condition).
bool stores_through_smem(const Tile& tile, int d_bytes);
// Why the kernel cannot be built or launched with `tile` for this K; empty when it can.
std::string tile_problem(const Tile& tile, int64_t k);

// The tile an untuned call with m rows runs: up to M = 128 one row tile as high as m's rows,
// past kGemmLargestTrimmedM the large bucket's, else the cost model's at m, trimmed to m's rows.
// `prepacked`: the weight is prepacked, which also allows three consumer warpgroups. `groups`:
// a grouped problem's (m is then rows per group, and its grid holds every group's tiles), 0 for
// a dense one; past 16 rows, where the groups' tiles fill the grid twice over, the widest tile
// in row tiles of up to 192 rows (grouped_tile), unsplit. `groups_reached`: how many contiguous
// groups the call's rows can reach, which sizes a decode tile (grouped_decode_tile); 0 where not
// counted (masked groups: their decode tile is the one measured for few groups).
// `fp8`: the W4A8 mode's tile, the exact mode's with its E4M3 stages (as many more as fit where
// the exact mode's tile takes as many as fit).
Tile heuristic_tile(int64_t n, int64_t k, int64_t m, int sm_count, bool prepacked, int groups = 0, int64_t groups_reached = 0,
                    bool fp8 = false);
// The most rows an expert of a grouped decode tile's buckets: past them no tile depends on
// `groups_reached`.
constexpr int kGroupedDecodeMostRows = 16;

// The heuristic's tile for a bucket: heuristic_tile at the bucket's largest M.
Tile bucket_tile(int64_t n, int64_t k, int bucket, int sm_count, bool prepacked = false, int groups = 0, bool fp8 = false);

// The tuner's search space for a bucket: the heuristic's tile first, then one to three
// consumers and k slices, block_k 128 / 256, 4 stages or as many as fit, split-K 1 / 2 / 4 / 8
// (and above M = 128 row tiles of 128, 192 and 256 too); only tiles tile_problem accepts.
std::vector<Tile> candidate_tiles(int64_t n, int64_t k, int bucket, int sm_count, bool prepacked, int groups = 0,
                                  bool fp8 = false);

// The CTAs an SM of the persistent grid a grouped kernel of `layout` (nvfp4k::GroupedLayoutCode)
// on `tile` runs, or 0 (a CTA a tile). Contiguous and masked groups on tiles of up to 64 rows
// (decode and small experts), whose short k loops would otherwise each start and drain a
// pipeline of their own: two CTAs an SM up to 8 rows (16 on a prepacked weight), whose decode
// wants the warps of two and whose registers fit them (a 16-row tile of the ModelOpt layout
// spills), else one. An 8-row tile of a prepacked weight up to K = 4096 and 384 threads: three
// (56 registers a thread, five 256-deep stages), which decode with more warps an SM; at K = 7168
// one token ran slower so than with two CTAs' deeper ring (perf-log.md).
int grouped_persistent_ctas(int layout, const Tile& tile, bool prepacked, int64_t k);
// `tile` as a persistent grid of `ctas` CTAs an SM runs it: as many stages as fit, up to 8 (the
// ring runs on from tile to tile, so depth costs no fill).
Tile persistent_tile(Tile tile, int ctas);
// CTAs an SM holds at once: a persistent grid's, else one.
inline int ctas_per_sm(const Tile& tile) { return tile.persistent > 1 ? tile.persistent : 1; }

// "bm8 bk256 wg1 s4 ks2" ("... wg1x2 s4 ..." with two k slices).
std::string describe(const Tile& tile);

}  // namespace nvfp4::jit::detail::sm90
