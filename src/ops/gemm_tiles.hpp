// GEMM tile choice: M buckets and the heuristic config of each. The dispatcher and the
// prewarm (and later the tuner) share these, so the kernels per (N, K) are bounded by the
// bucket set, never by M.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/spec.hpp"

namespace nvfp4::jit::detail {

// M buckets, named by the largest M they hold, and kGemmLargeM for every M above 2048. Up to
// 128 a bucket is one row tile of its own height; above, the heuristic picks the row tile (128
// to 256 rows, in steps of 32) and split-K whose grid does the least work per SM, and the
// buckets there are fine enough that one choice fits all of a bucket's M.
inline constexpr int kGemmLargeM = 1 << 30;
inline constexpr int kGemmMBuckets[] = {8,   16,  32,  64,  128,  192,  256,  320,  384,  448,
                                        512, 576, 640, 768, 1024, 1536, 2048, kGemmLargeM};
int gemm_m_bucket(int64_t m);

struct GemmTile {
  int block_m = 0;    // activation rows per CTA (wgmma N)
  int consumers = 0;  // consumer warpgroups, 64 weight rows each
  int stages = 0;     // TMA ring depth
  int split_k = 1;    // CTAs of a cluster splitting K
  int block_k = 128;  // K per stage: 128 or 256 (longer contiguous weight reads per row)
  int k_groups = 1;   // consumer warpgroups per 64 weight rows, splitting each stage's k steps (1 or 2)
};

// The M a bucket's tile is chosen and tuned for: its largest (4096 for the last bucket).
int64_t gemm_bucket_m(int bucket);

// Rows per row tile for M rows on tiles of at most block_m: the tiles share M evenly, in
// multiples of 8 (ceil(m / step) tiles, as many as block_m needs).
int64_t gemm_row_step(int64_t m, int block_m);
// Row tiles per group of the kernel's tile order (within a group, the row tiles of one weight
// tile run together, so it is read from HBM once): all of them where the activations stay in
// L2, else 1.
int gemm_tile_group(int64_t m, int64_t k, const GemmTile& tile);

// The heuristic: up to M = 128 one row tile of the bucket's height, 256-deep stages, split-K
// until the grid covers the SMs; above, the row tile and split-K of least modelled time
// (waves of CTAs x each CTA's k-steps, a k-step costing its weight decode plus its rows), as
// many stages as shared memory holds (at most 8).
// `prepacked`: the weight is prepacked, which also allows three consumer warpgroups.
GemmTile gemm_heuristic(Arch arch, int64_t n, int64_t k, int bucket, int sm_count, bool prepacked = false);

// The tile a call with m rows runs when its bucket is not tuned: up to M = 128 the bucket's
// heuristic tile, past M = 16384 the largest bucket's, else the model's at m itself, so that
// every M, not only a bucket's largest, gets the row tile and consumer count that fit it.
// Below 16384 the tile's wgmmas are as tall as its rows (in 16s).
GemmTile gemm_tile_at(Arch arch, int64_t n, int64_t k, int64_t m, int sm_count, bool prepacked);

// The tile a call with m rows runs: its bucket's tuned tile where the tuner found one faster
// than the heuristic's (trimmed to m's rows, as gemm_tile_at's), else gemm_tile_at (a tuned
// entry that kept the heuristic's tile, timed at the bucket's largest M, does not take the
// smaller M's own tiles away).
GemmTile gemm_tile_choice(const GemmTile* tuned, Arch arch, int64_t n, int64_t k, int64_t m, int sm_count,
                          bool prepacked);

// Every tile gemm_tile_at picks for an M of `bucket` (the heuristic's first): what the prewarm
// compiles, so no M of the bucket meets a kernel it lacks.
std::vector<GemmTile> gemm_bucket_tiles(Arch arch, int64_t n, int64_t k, int bucket, int sm_count, bool prepacked);

// Every tile gemm_tile_choice runs for an M of `bucket` where `tuned` is its tuned tile (the
// tile first): what `tune` compiles besides its candidates.
std::vector<GemmTile> gemm_tuned_tiles(const GemmTile& tuned, int bucket);

// Of `tiles` output tiles, how many a split_k > 1 grid splits (its last ones, the rest going
// whole to clusters of split_k CTAs): a last, partial wave's when split they fit in one wave
// (that wave then takes 1 / split_k of the time), else all of them (a grid that fits one wave
// split, or one the model would not split). (tiles - result) is a multiple of split_k.
int64_t gemm_split_tiles(int64_t tiles, int split_k, int sm_count);

// Threads per CTA (the template's THREADS): the consumer warpgroups (consumers x k_groups),
// then the producer warpgroup.
int gemm_threads(const GemmTile& tile);

// Whether the sm_90a kernel of `tile` can store D (elements of d_bytes) through shared memory
// and TMA: its tile fits in the stages (the template's condition; otherwise it stores element
// by element and needs no descriptor for D).
bool gemm_stores_through_tma(const GemmTile& tile, int d_bytes);

// Dynamic shared memory the sm_90a kernel of `tile` needs (the template's SMEM_BYTES).
unsigned gemm_shared_bytes(const GemmTile& tile);

// Why the sm_90a kernel cannot be built or launched with `tile` (shared memory, cluster size,
// split-K partials that must fit in the stages, empty splits for this K); empty when it can.
std::string gemm_tile_problem(const GemmTile& tile, int64_t k);

// The tuner's search space for a bucket: the heuristic's tile first, then one or two consumers
// and k groups, block_k 128 / 256, 4 stages or as many as fit, split-K 1 / 2 / 4 / 8 (and
// above M = 128 row tiles of 128, 192 and 256 too); only tiles gemm_tile_problem accepts.
// (Stages few enough for two CTAs per SM never won at N = 2880 to 8192: not tried.)
std::vector<GemmTile> gemm_candidates(Arch arch, int64_t n, int64_t k, int bucket, int sm_count, bool prepacked = false);

// "bm8 bk256 wg1 s4 ks2" ("... wg2 kg2 s4 ..." with two k groups): a tile in messages and reports.
std::string describe(const GemmTile& tile);
bool operator==(const GemmTile& a, const GemmTile& b);

}  // namespace nvfp4::jit::detail
