#include "ops/gemm/sm120/tiles.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "ops/gemm/block_scaled/tiles.hpp"
#include "ops/gemm/m_buckets.hpp"
#include "sm120/gemm_tile.cuh"

namespace nvfp4::jit::detail::sm120 {

namespace {
constexpr int kMaxStages = 4;
// fp32 accumulators a thread holds (MT x NT MMAs of 4): at most 64, so fragments, addresses and
// accumulators stay within 255 registers with room for the compiler to overlap loads
constexpr int kMaxAccumulators = 64;

int max_stages(const Tile& t) {
  return int(std::min<unsigned>(kMaxStages, nvfp4k::sm120::GEMM_MAX_SHARED / unsigned(nvfp4k::sm120::gemm_stage_bytes(t.block_m, t.block_n))));
}
int64_t ktiles(int64_t k) { return (k + nvfp4k::sm120::GEMM_BK - 1) / nvfp4k::sm120::GEMM_BK; }
int row_tile_for(int64_t m) { return m <= 16 ? 16 : m <= 32 ? 32 : m <= 64 ? 64 : 128; }
}  // namespace

int Tiles::threads(const Tile& t) { return nvfp4k::sm120::gemm_threads(t.block_m, t.block_n); }

unsigned Tiles::shared_bytes(const Tile& t) { return nvfp4k::sm120::gemm_shared_bytes(t.block_m, t.block_n, t.stages); }

std::string Tiles::tile_problem(const Tile& t, int64_t k) {
  if (t.block_m != 16 && t.block_m != 32 && t.block_m != 64 && t.block_m != 128)
    return fmt::format("block_m {} (16, 32, 64 or 128)", t.block_m);
  if (t.block_n != 64 && t.block_n != 128 && t.block_n != 256) return fmt::format("block_n {} (64, 128 or 256)", t.block_n);
  if (t.stages < 2 || t.stages > kMaxStages) return fmt::format("{} stages (2 to {})", t.stages, kMaxStages);
  if (shared_bytes(t) > nvfp4k::sm120::GEMM_MAX_SHARED)
    return fmt::format("{} bytes of shared memory (at most {} on sm_120 / sm_121)", shared_bytes(t),
                       nvfp4k::sm120::GEMM_MAX_SHARED);
  const int accumulators = 4 * nvfp4k::sm120::gemm_warp_mmas_m(t.block_m) * nvfp4k::sm120::gemm_warp_mmas_n(t.block_m, t.block_n);
  if (accumulators > kMaxAccumulators)
    return fmt::format("{} accumulators a thread (at most {}: registers)", accumulators, kMaxAccumulators);
  if (t.split_k != 1 && t.split_k != 2 && t.split_k != 4) return fmt::format("split_k {} (1, 2 or 4)", t.split_k);
  if (t.split_k > 1 && unsigned(t.block_m * t.block_n * 4) > shared_bytes(t))
    return fmt::format("split_k {}: the partial tile ({} B) exceeds the stages' shared memory", t.split_k, t.block_m * t.block_n * 4);
  if (t.split_k > 1 && k > 0 && ktiles(k) < 2 * t.split_k)
    return fmt::format("split_k {} leaves a split under 2 k-tiles at k = {}", t.split_k, k);
  return {};
}

Tile Tiles::heuristic_tile(int64_t n, int64_t k, int64_t m, int sm_count, int groups) {
  // chosen for m's bucket (its largest M): one tile per bucket, which prewarm compiles
  const int64_t rows = gemm_bucket_m(gemm_m_bucket(m));
  Tile t;
  t.block_m = row_tile_for(rows);
  // 128 weight rows a CTA read each activation tile half as often; 64 where 128 would leave SMs idle
  const int64_t ctas_128 = std::max(groups, 1) * ((rows + t.block_m - 1) / t.block_m) * ((n + 127) / 128);
  t.block_n = ctas_128 >= sm_count ? 128 : 64;
  t.stages = max_stages(t);
  // (the partial tiles' exchange costs about a k-tile: worth it where each split keeps 4)
  const int64_t ctas = (rows + t.block_m - 1) / t.block_m * ((n + t.block_n - 1) / t.block_n);
  if (groups == 0)  // a grouped grid runs unsplit
    for (int split : {4, 2})
      if (t.split_k == 1 && ctas * split <= sm_count && ktiles(k) >= 4 * split &&
          tile_problem({t.block_m, t.block_n, t.stages, split}).empty())
        t.split_k = split;
  return t;
}

std::vector<Tile> Tiles::candidate_tiles(int64_t n, int64_t k, int bucket, int sm_count, int groups) {
  const Tile heuristic = heuristic_tile(n, k, gemm_bucket_m(bucket), sm_count, groups);
  std::vector<Tile> tiles{heuristic};
  for (int block_m : {16, 32, 64, 128}) {
    if (block_m > std::max(heuristic.block_m, 16)) break;
    for (int block_n : {64, 128, 256})
      for (int stages = 2; stages <= kMaxStages; ++stages)
        for (int split : {1, 2, 4}) {
          const Tile t{block_m, block_n, stages, split};
          if ((split == 1 || groups == 0) && tile_problem(t, k).empty() && std::find(tiles.begin(), tiles.end(), t) == tiles.end())
            tiles.push_back(t);
        }
  }
  return tiles;
}

std::string Tiles::d_fp4_tile_problem(const Tile& t) {
  const int outputs = 4 * nvfp4k::sm120::gemm_warp_mmas_n(t.block_m, t.block_n);
  if (outputs % 16)
    return fmt::format("NVFP4 D: a warp's {} outputs are not whole 16-column blocks (bm{} bn{})", outputs, t.block_m,
                       t.block_n);
  return {};
}

Tile Tiles::with_d_fp4(Tile t) {
  if (d_fp4_tile_problem(t).empty()) return t;
  t.block_n *= 2;
  t.stages = std::min(t.stages, max_stages(t));
  return t;
}

std::string Tiles::describe(const Tile& t) {
  return fmt::format("bm{} bn{} s{}{}", t.block_m, t.block_n, t.stages, t.split_k > 1 ? fmt::format(" ks{}", t.split_k) : "");
}

GemmTile Tiles::to_config(const Tile& t) {
  return block_scaled::tile_config(t.block_m, t.block_n, nvfp4k::sm120::GEMM_BK, threads(t), t.stages, t.split_k);
}

Tile Tiles::from_config(const GemmTile& c) { return Tile{c.block_m, c.block_n, c.stages, c.split_k}; }

}  // namespace nvfp4::jit::detail::sm120
