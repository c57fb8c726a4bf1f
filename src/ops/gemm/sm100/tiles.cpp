#include "ops/gemm/sm100/tiles.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "ops/gemm/m_buckets.hpp"
#include "sm100/gemm_tile.cuh"

namespace nvfp4::jit::detail::sm100 {

namespace {
int max_stages(int block_n) {
  int stages = 2;
  while (nvfp4k::sm100::gemm_shared_bytes(block_n, stages + 1) <= nvfp4k::sm100::GEMM_MAX_SHARED &&
         nvfp4k::sm100::gemm_tmem_columns_used(block_n, stages + 1) <= int(nvfp4k::sm100::GEMM_TMEM_COLUMNS))
    ++stages;
  return stages;
}
int64_t ctas(int64_t m, int64_t n, int block_n) {
  return (m + nvfp4k::sm100::GEMM_BM - 1) / nvfp4k::sm100::GEMM_BM * ((n + block_n - 1) / block_n);
}
}  // namespace

unsigned shared_bytes(const Tile& t) { return nvfp4k::sm100::gemm_shared_bytes(t.block_n, t.stages); }

std::string tile_problem(const Tile& t) {
  if (t.block_n != 64 && t.block_n != 128 && t.block_n != 256) return fmt::format("block_n {} (64, 128 or 256)", t.block_n);
  if (t.stages < 2) return fmt::format("{} stages (at least 2)", t.stages);
  if (shared_bytes(t) > nvfp4k::sm100::GEMM_MAX_SHARED)
    return fmt::format("{} bytes of shared memory (at most {} on sm_100 / sm_103)", shared_bytes(t),
                       nvfp4k::sm100::GEMM_MAX_SHARED);
  if (nvfp4k::sm100::gemm_tmem_columns_used(t.block_n, t.stages) > int(nvfp4k::sm100::GEMM_TMEM_COLUMNS))
    return fmt::format("{} tensor memory columns (at most {})", nvfp4k::sm100::gemm_tmem_columns_used(t.block_n, t.stages),
                       nvfp4k::sm100::GEMM_TMEM_COLUMNS);
  return {};
}

Tile heuristic_tile(int64_t n, int64_t m, int sm_count) {
  // chosen for m's bucket (its largest M): one tile per bucket, which prewarm compiles
  const int64_t rows = gemm_bucket_m(gemm_m_bucket(m));
  int block_n = 64;
  for (int bn : {256, 128})
    if (ctas(rows, n, bn) >= sm_count) {
      block_n = bn;
      break;
    }
  return {block_n, max_stages(block_n)};
}

std::vector<Tile> candidate_tiles(int64_t n, int bucket, int sm_count) {
  const Tile heuristic = heuristic_tile(n, gemm_bucket_m(bucket), sm_count);
  std::vector<Tile> tiles{heuristic};
  for (int block_n : {64, 128, 256})
    for (int stages = 2; stages <= max_stages(block_n); ++stages) {
      const Tile t{block_n, stages};
      if (std::find(tiles.begin(), tiles.end(), t) == tiles.end()) tiles.push_back(t);
    }
  return tiles;
}

std::string describe(const Tile& t) { return fmt::format("bn{} s{}", t.block_n, t.stages); }

TileConfig to_config(const Tile& t) {
  TileConfig c;
  c.block_m = uint16_t(nvfp4k::sm100::GEMM_BM);
  c.block_n = uint16_t(t.block_n);
  c.block_k = uint16_t(nvfp4k::sm100::GEMM_BK);
  c.threads = uint16_t(nvfp4k::sm100::GEMM_THREADS);
  c.stages = uint8_t(t.stages);
  c.split_k = 1;
  return c;
}

Tile from_config(const TileConfig& c) { return Tile{c.block_n, c.stages}; }

}  // namespace nvfp4::jit::detail::sm100
