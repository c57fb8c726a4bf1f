#include "ops/gemm/schedule.hpp"

#include <algorithm>
#include <climits>

#include "core/error.hpp"
#include "ops/gemm/m_buckets.hpp"

namespace nvfp4::jit::detail {

int64_t gemm_split_tiles(int64_t tiles, int split_k, int sm_count) {
  if (split_k == 1) return 0;
  const int64_t last_wave = tiles % sm_count;
  const int64_t split = tiles >= sm_count && last_wave * split_k <= sm_count ? last_wave : tiles;
  return split + (tiles - split) % split_k;
}

int gemm_band_m_tiles(int64_t m, int64_t k, int block_m) {
  const int64_t m_step = gemm_row_step(m, block_m), m_tiles = (m + m_step - 1) / m_step;
  return m_tiles * m_step * k * 2 <= (int64_t(16) << 20) ? int(m_tiles) : 1;
}

GemmGrid gemm_grid(int64_t m, int64_t n, int64_t k, int block_m, int block_n, int split_k, int sm_count) {
  GemmGrid g;
  nvfp4k::TileSchedule& s = g.schedule;
  s.m = m;
  s.m_step = gemm_row_step(m, block_m);
  const int64_t m_tiles = (m + s.m_step - 1) / s.m_step;
  const int64_t n_tiles = (n + block_n - 1) / block_n;
  if (m_tiles * n_tiles > INT32_MAX)
    fail(Status::invalid_argument, "nvfp4::jit::gemm: m = {} at n = {} is more tiles than one launch covers ({})", m, n,
         INT32_MAX);
  s.m_tiles = int(m_tiles);
  s.band_m_tiles = gemm_band_m_tiles(m, k, block_m);
  const int64_t split = gemm_split_tiles(m_tiles * n_tiles, split_k, sm_count);
  s.whole_clusters = int((m_tiles * n_tiles - split) / split_k);
  g.clusters = unsigned(s.whole_clusters + split);
  return g;
}

GemmGrid gemm_grouped_grid(int layout, int groups, int64_t m, int64_t n, int block_m, int block_n) {
  GemmGrid g;
  nvfp4k::TileSchedule& s = g.schedule;
  // batched: every group's m rows, shared evenly by its row tiles as a dense GEMM's
  s.m_step = layout == nvfp4k::GROUPED_BATCHED ? gemm_row_step(m, block_m) : block_m;
  const int64_t tiles_per_m = (m + s.m_step - 1) / s.m_step;
  // contiguous: each group holding rows adds at most one partial row tile to m's
  const int64_t m_tiles = layout == nvfp4k::GROUPED_CONTIGUOUS ? tiles_per_m + std::min<int64_t>(groups, m) : groups * tiles_per_m;
  const int64_t n_tiles = (n + block_n - 1) / block_n;
  if (m_tiles * n_tiles > INT32_MAX)
    fail(Status::invalid_argument, "nvfp4::jit::grouped_gemm: m = {} in {} groups at n = {} is more tiles than one launch covers",
         m, groups, n);
  s.m = layout == nvfp4k::GROUPED_MASKED ? m * groups : m;
  s.m_tiles = int(m_tiles);
  s.band_m_tiles = 1;
  s.whole_clusters = int(m_tiles * n_tiles);
  s.group_stride = layout == nvfp4k::GROUPED_MASKED ? m : 0;
  g.clusters = unsigned(m_tiles * n_tiles);
  return g;
}

}  // namespace nvfp4::jit::detail
