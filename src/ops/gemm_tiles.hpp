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

// M buckets, named by the largest M they hold: 8, 16, 32, 64, 128, 256, and kGemmLargeM for
// every M above 256 (prefill: 256-row tiles, as many as M needs). A bucket's tile has
// min(bucket, 256) rows, so M = 129..256 runs one row tile and may split K where M > 256 must not.
inline constexpr int kGemmLargeM = 1 << 30;
inline constexpr int kGemmMBuckets[] = {8, 16, 32, 64, 128, 256, kGemmLargeM};
int gemm_m_bucket(int64_t m);

struct GemmTile {
  int block_m = 0;    // activation rows per CTA (wgmma N)
  int consumers = 0;  // consumer warpgroups, 64 weight rows each
  int stages = 0;     // TMA ring depth
  int split_k = 1;    // CTAs of a cluster splitting K
  int block_k = 128;  // K per stage: 128 or 256 (longer contiguous weight reads per row)
  int k_groups = 1;   // consumer warpgroups per 64 weight rows, splitting each stage's k steps (1 or 2)
};

// The heuristic: one CTA column of block_m rows per bucket; for small M (memory bound) 256-deep
// stages, 4 of them, and split-K until the grid covers the SMs; for prefill as many stages
// as shared memory holds (at most 8).
GemmTile gemm_heuristic(Arch arch, int64_t n, int64_t k, int bucket, int sm_count);

// Threads per CTA (the template's THREADS): the consumer warpgroups (consumers x k_groups),
// then the producer (a warp for a prepacked weight, a warpgroup that also stages scales
// otherwise).
int gemm_threads(const GemmTile& tile, bool prepacked);

// Dynamic shared memory the sm_90a kernel of `tile` needs (the template's SMEM_BYTES).
unsigned gemm_shared_bytes(const GemmTile& tile);

// Why the sm_90a kernel cannot be built or launched with `tile` (shared memory, cluster size,
// split-K partials that must fit in the stages, empty splits for this K); empty when it can.
std::string gemm_tile_problem(const GemmTile& tile, int64_t k);

// The tuner's search space for a bucket: the heuristic's tile first, then block_k 128 / 256,
// 4 stages or as many as fit, split-K 1 / 2 / 4; only tiles gemm_tile_problem accepts.
std::vector<GemmTile> gemm_candidates(Arch arch, int64_t n, int64_t k, int bucket, int sm_count);

// "bm8 bk256 wg1 s4 ks2" ("... wg2 kg2 s4 ..." with two k groups): a tile in messages and reports.
std::string describe(const GemmTile& tile);
bool operator==(const GemmTile& a, const GemmTile& b);

}  // namespace nvfp4::jit::detail
