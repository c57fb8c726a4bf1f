// The GEMM tile scheduler every arch's main loop shares: which output tile, which rows and which
// k-tiles a CTA takes. The host computes the schedule's fields (src/ops/gemm/schedule.cpp) and
// runs the same code in its tests.
#pragma once

#include "common/portable.cuh"

namespace nvfp4k {

// The grouped layouts (mixture of experts): group g multiplies its rows of A by weight g.
enum GroupedLayoutCode {
  GROUPED_NONE = 0,
  GROUPED_CONTIGUOUS = 1,  // group g's rows are [group_ends[g-1], group_ends[g]) of A and D
  GROUPED_MASKED = 2,      // group g's rows are [g * group_stride, + group_rows[g]) of A and D
  GROUPED_BATCHED = 3,     // every group takes all m rows: group g's rows are [0, m) of its own A and D
};

struct TileSchedule {
  long long m;         // rows of A and D (grouped: all groups', an upper bound for contiguous; batched: each group's)
  long long m_step;    // rows per row tile: ceil(m / m_tiles), a multiple of 8 (grouped: the tile's rows)
  int m_tiles;         // row tiles (grouped: an upper bound; tiles past the groups' do nothing)
  int band_m_tiles;    // row tiles per band of the tile order
  int whole_clusters;  // split-K: clusters taking whole tiles, before those splitting one
  const int* group_ends;   // GROUPED_CONTIGUOUS: [groups] cumulative ends, on the device
  const int* group_rows;   // GROUPED_MASKED: [groups] rows, on the device
  long long group_stride;  // GROUPED_MASKED: rows from one group's first to the next's
};

struct ScheduledTile {
  int group;  // grouped layouts: the tile's group; else 0
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
// n_tiles and ktiles as run-time values: for a kernel that takes N and K as arguments.
template <int KSPLIT>
NVFP4_HD ScheduledTile schedule_tile(const TileSchedule& s, int cluster, unsigned rank, int n_tiles, int ktiles) {
  ScheduledTile t;
  t.group = 0;
  t.split = KSPLIT > 1 && cluster >= s.whole_clusters;
  const int tile = KSPLIT == 1 ? cluster
                   : t.split   ? KSPLIT * s.whole_clusters + (cluster - s.whole_clusters)
                               : KSPLIT * cluster + int(rank);
  const int band = tile / (s.band_m_tiles * n_tiles), in_band = tile % (s.band_m_tiles * n_tiles);
  const int left = s.m_tiles - band * s.band_m_tiles, band_rows = s.band_m_tiles < left ? s.band_m_tiles : left;
  t.n_tile = in_band / band_rows;
  t.m_tile = band * s.band_m_tiles + in_band % band_rows;
  row_range(s, t.m_tile, t.m0, t.m_end);
  t.kt_begin = t.split ? int(rank * ktiles / KSPLIT) : 0;
  t.kt_end = t.split ? int((rank + 1) * ktiles / KSPLIT) : ktiles;
  return t;
}

template <int N_TILES, int KSPLIT, int KTILES>
NVFP4_HD ScheduledTile schedule_tile(const TileSchedule& s, int cluster, unsigned rank) {
  return schedule_tile<KSPLIT>(s, cluster, rank, N_TILES, KTILES);
}

// CTA `cta`'s row and n tile in a grouped layout's numbering, not yet placed in a group: no rows.
NVFP4_HD ScheduledTile unplaced_grouped_tile(int cta, int n_tiles, int ktiles) {
  ScheduledTile t;
  t.group = 0;
  t.m_tile = cta / n_tiles;
  t.n_tile = cta % n_tiles;
  t.m0 = t.m_end = 0;
  t.split = false;
  t.kt_begin = 0;
  t.kt_end = ktiles;
  return t;
}

// A batched layout's tile (sizes known on the host: no device read): every group has the same
// ceil(m / m_step) row tiles of rows local to the group; past the last group, no rows.
NVFP4_HD ScheduledTile place_batched_tile(const TileSchedule& s, ScheduledTile t) {
  const int per_group = int((s.m + s.m_step - 1) / s.m_step);
  t.group = t.m_tile / per_group;
  if (t.m_tile >= s.m_tiles) return t;
  t.m0 = (long long)(t.m_tile % per_group) * s.m_step;
  t.m_end = t.m0 + s.m_step < s.m ? t.m0 + s.m_step : s.m;
  return t;
}

// A grouped layout's tile: row tiles of m_step rows are numbered group by group (a group of r
// rows has ceil(r / m_step) of them), n tiles within a row tile. Past the groups' row tiles, an
// empty range (m0 == m_end). The groups' sizes come from the device and are clamped: a
// contiguous end below the previous one leaves its group empty, one past m is m; a masked
// count outside [0, group_stride] is clamped to it. So no tile reaches rows outside A and D.
template <int N_TILES, int LAYOUT, int GROUPS, int KTILES>
NVFP4_HD ScheduledTile schedule_grouped_tile(const TileSchedule& s, int cta) {
  ScheduledTile t = unplaced_grouped_tile(cta, N_TILES, KTILES);
  if (LAYOUT == GROUPED_BATCHED) return place_batched_tile(s, t);
  long long first_tile = 0, prev_end = 0;
  for (int g = 0; g < GROUPS; ++g) {
    long long begin, end;
    if (LAYOUT == GROUPED_CONTIGUOUS) {
      const long long e = s.group_ends[g];
      begin = prev_end;
      end = e < begin ? begin : e > s.m ? s.m : e;
      prev_end = end;
    } else {
      const long long r = s.group_rows[g];
      begin = g * s.group_stride;
      end = begin + (r < 0 ? 0 : r > s.group_stride ? s.group_stride : r);
    }
    const long long tiles = (end - begin + s.m_step - 1) / s.m_step;
    if (t.m_tile < first_tile + tiles) {
      t.group = g;
      t.m0 = begin + (t.m_tile - first_tile) * s.m_step;
      t.m_end = t.m0 + s.m_step < end ? t.m0 + s.m_step : end;
      return t;
    }
    first_tile += tiles;
  }
  return t;
}

#if defined(__CUDA_ARCH__)
// schedule_grouped_tile's placement, found by one warp 32 groups at a time (every warp of the CTA
// finds it on its own: no shared memory, no barrier). A chunk of 32 groups is one load a lane;
// its groups' rows and row tiles stay in the lanes' registers until a later row tile is asked
// for, so a CTA that takes its tiles in increasing order (a persistent grid) reads each group's
// size once. Walking past a chunk costs a load, one shuffle and vote, a 32-bit division and a
// warp sum; only the tile's own chunk takes a prefix sum. Ends in order (any routing) need no
// scan; out of order, a contiguous layout's clamped ends are a running maximum. Rows and tiles
// are 32-bit (group_ends and masked_m are int32; a masked group's rows count from its first).
template <int LAYOUT, int GROUPS>
struct GroupedTileCursor {
  static constexpr int CHUNKS = (GROUPS + 31) / 32;
  static constexpr int kFirstWalkChunks = 8;  // a first walk over at most this many loads them at once
  int base = -32;         // the chunk's first group (-32: none read yet)
  int tiles_before = 0;   // row tiles of the groups before the chunk
  int end_before = 0;     // clamped end of the groups before it (contiguous)
  int chunk_tiles = 0;    // row tiles of the chunk's groups
  int chunk_end = 0;      // clamped end of its last group
  int lo = 0, hi = 0;     // the lane's group's rows: [lo, hi) (masked: from the group's first row)
  int tiles = 0;          // and its row tiles

  // The lane's group's size in chunk `chunk` as the device holds it (0 past the groups).
  __device__ __forceinline__ static int load_size(const TileSchedule& s, int chunk) {
    const int g = 32 * chunk + int(threadIdx.x % 32);
    if (g >= GROUPS) return 0;
    return LAYOUT == GROUPED_CONTIGUOUS ? s.group_ends[g] : s.group_rows[g];
  }

  // Reads the next 32 groups.
  __device__ __forceinline__ void advance(const TileSchedule& s) { advance(s, load_size(s, base / 32 + 1)); }

  // Takes the next 32 groups, the lane's size `size` (load_size of that chunk).
  __device__ __forceinline__ void advance(const TileSchedule& s, int size) {
    constexpr unsigned ALL = 0xFFFFFFFFu;
    const int lane = threadIdx.x % 32;
    tiles_before += chunk_tiles;
    end_before = chunk_end;
    base += 32;
    const int g = base + lane;
    if (LAYOUT == GROUPED_CONTIGUOUS) {
      // ends clamped to m (an int32 end past it is m); past the groups, an end that keeps the
      // order and adds no tiles
      const int m = s.m < 0x7FFFFFFF ? int(s.m) : 0x7FFFFFFF;
      const int e = g < GROUPS ? min(size, m) : m;
      const int previous = __shfl_up_sync(ALL, e, 1);
      const int before = lane == 0 ? end_before : previous;
      if (__all_sync(ALL, e >= before)) {  // in order: each group begins where the one before ends
        lo = before;
        hi = e;
      } else {
        int c = max(e, end_before);
#pragma unroll
        for (int d = 1; d < 32; d *= 2) {
          const int o = __shfl_up_sync(ALL, c, d);
          if (lane >= d) c = max(c, o);
        }
        hi = c;
        const int prev_hi = __shfl_up_sync(ALL, hi, 1);
        lo = lane == 0 ? end_before : prev_hi;
      }
      chunk_end = __shfl_sync(ALL, hi, 31);
    } else {
      const int r = size;
      lo = 0;
      hi = r < 0 ? 0 : (long long)r > s.group_stride ? int(s.group_stride) : r;
    }
    const unsigned step = unsigned(s.m_step);
    tiles = g < GROUPS ? int((unsigned(hi - lo) + step - 1) / step) : 0;
    chunk_tiles = int(__reduce_add_sync(ALL, unsigned(tiles)));
  }

  // `t` placed in its group; no rows past the groups' row tiles. Row tiles asked for in
  // increasing order (an earlier chunk's is not found again).
  __device__ __forceinline__ ScheduledTile place(const TileSchedule& s, ScheduledTile t) {
    if (LAYOUT == GROUPED_BATCHED) return place_batched_tile(s, t);
    if (base < 0) advance(s);
#pragma unroll 1
    while (t.m_tile >= tiles_before + chunk_tiles && base + 32 < GROUPS) advance(s);
    return locate(s, t);
  }

  // place() for a cursor's first tile (a CTA's only one, where it takes one): up to 256 groups,
  // every chunk is loaded at once, one round trip to L2 rather than one a chunk (a tile of the
  // 256th group is 8 chunks in).
  __device__ __forceinline__ ScheduledTile first(const TileSchedule& s, ScheduledTile t) {
    if constexpr (CHUNKS > kFirstWalkChunks || LAYOUT == GROUPED_BATCHED) {
      return place(s, t);
    } else {
      int sizes[CHUNKS];
#pragma unroll
      for (int c = 0; c < CHUNKS; ++c) sizes[c] = load_size(s, c);
#pragma unroll
      for (int c = 0; c < CHUNKS; ++c)
        if (c == 0 || t.m_tile >= tiles_before + chunk_tiles) advance(s, sizes[c]);
      return locate(s, t);
    }
  }

 private:
  // `t` in the chunk read last, or no rows when it lies past it.
  __device__ __forceinline__ ScheduledTile locate(const TileSchedule& s, ScheduledTile t) const {
    constexpr unsigned ALL = 0xFFFFFFFFu;
    const int lane = threadIdx.x % 32;
    int upto = tiles;  // inclusive prefix sum of the chunk's row tiles
#pragma unroll
    for (int d = 1; d < 32; d *= 2) {
      const int o = __shfl_up_sync(ALL, upto, d);
      if (lane >= d) upto += o;
    }
    const int first_tile = tiles_before + upto - tiles;  // the lane's group's
    const unsigned hit = __ballot_sync(ALL, t.m_tile >= first_tile && t.m_tile < first_tile + tiles);
    if (hit) {
      const int src = __ffs(hit) - 1;
      const int f = __shfl_sync(ALL, first_tile, src), b = __shfl_sync(ALL, lo, src), e = __shfl_sync(ALL, hi, src);
      t.group = base + src;
      const long long group_first = LAYOUT == GROUPED_CONTIGUOUS ? 0 : (long long)t.group * s.group_stride;
      t.m0 = group_first + b + (long long)(t.m_tile - f) * s.m_step;
      t.m_end = t.m0 + s.m_step < group_first + e ? t.m0 + s.m_step : group_first + e;
    }
    return t;
  }
};

// The cursor a kernel of any layout holds (a dense kernel's is never used).
template <int LAYOUT, int GROUPS>
using KernelTileCursor = GroupedTileCursor<LAYOUT == GROUPED_NONE ? GROUPED_CONTIGUOUS : LAYOUT, GROUPS>;

template <int LAYOUT, int GROUPS>
__device__ __forceinline__ ScheduledTile schedule_grouped_tile_warp(const TileSchedule& s, int cta, int n_tiles, int ktiles) {
  GroupedTileCursor<LAYOUT, GROUPS> cursor;
  return cursor.first(s, unplaced_grouped_tile(cta, n_tiles, ktiles));
}

template <int N_TILES, int LAYOUT, int GROUPS, int KTILES>
__device__ __forceinline__ ScheduledTile schedule_grouped_tile_warp(const TileSchedule& s, int cta) {
  return schedule_grouped_tile_warp<LAYOUT, GROUPS>(s, cta, N_TILES, KTILES);
}
#endif

}  // namespace nvfp4k
