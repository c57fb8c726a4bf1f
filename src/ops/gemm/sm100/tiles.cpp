#include "ops/gemm/sm100/tiles.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "ops/gemm/block_scaled/tiles.hpp"
#include "ops/gemm/m_buckets.hpp"
#include "sm100/gemm_tile.cuh"

namespace nvfp4::jit::detail::sm100 {

namespace {
int max_stages(int block_n, int ctas) {
  int stages = 2;
  while (nvfp4k::sm100::gemm_shared_bytes(block_n, stages + 1, ctas) <= nvfp4k::sm100::GEMM_MAX_SHARED &&
         nvfp4k::sm100::gemm_tmem_columns_used(block_n, stages + 1) <= int(nvfp4k::sm100::GEMM_TMEM_COLUMNS))
    ++stages;
  return stages;
}
// the CTAs of m rows' tiles, `tile_ctas` a tile (2: a pair's 256 rows)
int64_t ctas(int64_t m, int64_t n, int block_n, int tile_ctas = 1) {
  const int64_t block_m = nvfp4k::sm100::GEMM_BM * tile_ctas;
  return (m + block_m - 1) / block_m * ((n + block_n - 1) / block_n) * tile_ctas;
}
}  // namespace

unsigned Tiles::shared_bytes(const Tile& t) { return nvfp4k::sm100::gemm_shared_bytes(t.block_n, t.stages, t.ctas); }

std::string Tiles::tile_problem(const Tile& t) {
  if (t.ctas != 1 && t.ctas != 2) return fmt::format("{} CTAs a tile (1, or 2: a pair)", t.ctas);
  if (t.block_n != 64 && t.block_n != 128 && t.block_n != 256) return fmt::format("block_n {} (64, 128 or 256)", t.block_n);
  if (t.ctas == 2 && t.block_n == 64) return "block_n 64 on a CTA pair (128 or 256: 64 weight rows a CTA at least)";
  if (t.stages < 2) return fmt::format("{} stages (at least 2)", t.stages);
  if (shared_bytes(t) > nvfp4k::sm100::GEMM_MAX_SHARED)
    return fmt::format("{} bytes of shared memory (at most {} on sm_100 / sm_103)", shared_bytes(t),
                       nvfp4k::sm100::GEMM_MAX_SHARED);
  if (nvfp4k::sm100::gemm_tmem_columns_used(t.block_n, t.stages) > int(nvfp4k::sm100::GEMM_TMEM_COLUMNS))
    return fmt::format("{} tensor memory columns (at most {})", nvfp4k::sm100::gemm_tmem_columns_used(t.block_n, t.stages),
                       nvfp4k::sm100::GEMM_TMEM_COLUMNS);
  return {};
}

Tile Tiles::heuristic_tile(int64_t n, int64_t m, int sm_count, int groups) {
  // chosen for m's bucket (its largest M): one tile per bucket, which prewarm compiles
  const int64_t rows = gemm_bucket_m(gemm_m_bucket(m));
  groups = std::max(groups, 1);  // the grid holds every group's tiles
  if (rows >= 2 * nvfp4k::sm100::GEMM_BM && ctas(rows, n, 256, 2) * groups >= sm_count) return {256, max_stages(256, 2), 2};
  int block_n = 64;
  for (int bn : {256, 128})
    if (ctas(rows, n, bn) * groups >= sm_count) {
      block_n = bn;
      break;
    }
  return {block_n, max_stages(block_n, 1)};
}

std::vector<Tile> Tiles::candidate_tiles(int64_t n, int bucket, int sm_count, int groups) {
  const Tile heuristic = heuristic_tile(n, gemm_bucket_m(bucket), sm_count, groups);
  std::vector<Tile> tiles{heuristic};
  for (int tile_ctas : {1, 2}) {
    if (tile_ctas == 2 && gemm_bucket_m(bucket) <= nvfp4k::sm100::GEMM_BM) continue;  // a pair's rows would be padding
    for (int block_n : {64, 128, 256})
      for (int stages = 2; stages <= max_stages(block_n, tile_ctas); ++stages) {
        const Tile t{block_n, stages, tile_ctas};
        if (tile_problem(t).empty() && std::find(tiles.begin(), tiles.end(), t) == tiles.end()) tiles.push_back(t);
      }
  }
  return tiles;
}

std::string Tiles::describe(const Tile& t) {
  return t.ctas == 2 ? fmt::format("bm256 bn{} s{}", t.block_n, t.stages) : fmt::format("bn{} s{}", t.block_n, t.stages);
}

GemmTile Tiles::to_config(const Tile& t) {
  return block_scaled::tile_config(nvfp4k::sm100::GEMM_BM * t.ctas, t.block_n, nvfp4k::sm100::GEMM_BK,
                                   nvfp4k::sm100::GEMM_THREADS, t.stages, 1);
}

Tile Tiles::from_config(const GemmTile& c) { return Tile{c.block_n, c.stages, c.block_m / nvfp4k::sm100::GEMM_BM}; }

}  // namespace nvfp4::jit::detail::sm100
