// The GEMM tile scheduler every arch's main loop shares: which output tile, which rows and which
// k-tiles a CTA takes. The host computes the schedule's fields (src/ops/gemm/schedule.cpp) and
// runs the same code in its tests.
#pragma once

#include "common/portable.cuh"

namespace nvfp4k {

struct TileSchedule {
  long long m;         // rows of A and D
  long long m_step;    // rows per row tile: ceil(m / m_tiles), a multiple of 8
  int m_tiles;         // row tiles
  int band_m_tiles;    // row tiles per band of the tile order
  int whole_clusters;  // split-K: clusters taking whole tiles, before those splitting one
};

struct ScheduledTile {
  int m_tile, n_tile;
  long long m0, m_end;   // its rows [m0, m_end)
  bool split;            // its K is split among the CTAs of this cluster
  int kt_begin, kt_end;  // this CTA's k-tiles
};

// The rows of row tile `m_tile`. Row tiles share M evenly (m_step <= the tile's rows): a tile
// holding only M's last few rows lets its CTAs outrun their partners on the same weights. This
// is where a grouped layout maps a row tile to its group's rows.
NVFP4_HD void row_range(const TileSchedule& s, int m_tile, long long& m0, long long& m_end) {
  m0 = (long long)m_tile * s.m_step;
  m_end = m0 + s.m_step < s.m ? m0 + s.m_step : s.m;
}

// The tile of CTA `rank` of cluster `cluster` (blockIdx.x numbers the clusters). The order decides
// what L2 holds for whom: bands of band_m_tiles row tiles, within a band every row tile of one
// weight tile in turn, so the CTAs sharing a weight tile run together and read it from HBM once
// while the band's activations stay in L2. With KSPLIT > 1 the first whole_clusters clusters
// take KSPLIT whole tiles each and the later ones split one tile's K among their CTAs: the
// split tiles run last, as a split tail.
template <int N_TILES, int KSPLIT, int KTILES>
NVFP4_HD ScheduledTile schedule_tile(const TileSchedule& s, int cluster, unsigned rank) {
  ScheduledTile t;
  t.split = KSPLIT > 1 && cluster >= s.whole_clusters;
  const int tile = KSPLIT == 1 ? cluster
                   : t.split   ? KSPLIT * s.whole_clusters + (cluster - s.whole_clusters)
                               : KSPLIT * cluster + int(rank);
  const int band = tile / (s.band_m_tiles * N_TILES), in_band = tile % (s.band_m_tiles * N_TILES);
  const int left = s.m_tiles - band * s.band_m_tiles, band_rows = s.band_m_tiles < left ? s.band_m_tiles : left;
  t.n_tile = in_band / band_rows;
  t.m_tile = band * s.band_m_tiles + in_band % band_rows;
  row_range(s, t.m_tile, t.m0, t.m_end);
  t.kt_begin = t.split ? int(rank * KTILES / KSPLIT) : 0;
  t.kt_end = t.split ? int((rank + 1) * KTILES / KSPLIT) : KTILES;
  return t;
}

}  // namespace nvfp4k
