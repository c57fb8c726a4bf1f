#include "ops/gemm_tiles.hpp"

#include <algorithm>
#include <map>
#include <mutex>

#include <fmt/format.h>

namespace nvfp4::jit::detail {

namespace {
constexpr unsigned kSm90SharedBytes = 227 * 1024;  // opt-in maximum per block
// activation boxes, packed weights, block scales: the template's STAGE_BYTES
unsigned stage_bytes(const GemmTile& t) {
  return unsigned(t.block_k / 64 * t.block_m * 128 + 64 * t.consumers * t.block_k / 2 + (t.consumers == 3 ? 16 : 8) * t.block_k);
}
unsigned max_stages(const GemmTile& t) { return std::min(8u, (kSm90SharedBytes - 1024 - 128) / stage_bytes(t)); }
// Three consumers: on a prepacked weight only (the ModelOpt layout stages scales with 128
// producer threads), at most 192 rows (ptxas fits each wgmma in the 128 registers a thread of
// 16 warps starts with: 96 accumulators fit, 112 do not); gemm_tile_problem rules out split-K
// and k groups.
bool three_consumers_fit(const GemmTile& t, bool prepacked) { return t.consumers != 3 || (prepacked && t.block_m <= 192); }
}  // namespace

int gemm_m_bucket(int64_t m) {
  for (int b : kGemmMBuckets)
    if (m <= b) return b;
  return kGemmMBuckets[std::size(kGemmMBuckets) - 1];
}

int64_t gemm_split_tiles(int64_t tiles, int split_k, int sm_count) {
  if (split_k == 1) return 0;
  const int64_t last_wave = tiles % sm_count;
  const int64_t split = tiles >= sm_count && last_wave * split_k <= sm_count ? last_wave : tiles;
  return split + (tiles - split) % split_k;
}

int gemm_threads(const GemmTile& tile) { return 128 * (tile.consumers * tile.k_groups + 1); }

unsigned gemm_shared_bytes(const GemmTile& tile) {
  return 1024 + unsigned(tile.stages) * stage_bytes(tile) + 16u * unsigned(tile.stages);
}

bool gemm_stores_through_tma(const GemmTile& tile, int d_bytes) {
  return tile.block_m % 16 == 0 &&
         unsigned(64 * tile.consumers * tile.block_m * d_bytes) <= unsigned(tile.stages) * stage_bytes(tile);
}

int64_t gemm_bucket_m(int bucket) { return bucket == kGemmLargeM ? 4096 : bucket; }

int64_t gemm_row_step(int64_t m, int block_m) {
  const int64_t tiles = (m + block_m - 1) / block_m;
  return std::min<int64_t>(block_m, ((m + tiles - 1) / tiles + 7) / 8 * 8);
}

int gemm_tile_group(int64_t m, int64_t k, const GemmTile& tile) {
  // Activations (16-bit) within a third of the H100's L2: every row tile of a weight tile in
  // turn (1-2% faster at M = 257-700). Larger ones stream: one row tile's pass over the weight
  // at a time (groups of 16 MiB were no faster at M = 8192, N = K = 8192).
  const int64_t m_step = gemm_row_step(m, tile.block_m), m_tiles = (m + m_step - 1) / m_step;
  return m_tiles * m_step * k * 2 <= (int64_t(16) << 20) ? int(m_tiles) : 1;
}

namespace {

// The time of tile `t` on m rows, in MMA k-tiles of one activation row. Fitted on an H100
// (docs/perf.md): with two consumer warpgroups a CTA's k-tile costs its rows plus the weight
// decode, worth about 55 rows (N = K = 8192, M = 129 to 4096 within 10%); one consumer does
// half the rows' tensor work, but its decode, with half the warps to hide latency, is worth
// about 70 (N = 4096 and 8192, M = 192 and 256). A split-K reduction costs about 10 k-tiles;
// the grid runs in whole waves.
double modelled_cost(const GemmTile& t, int64_t m, int64_t n, int64_t k, int sm_count) {
  constexpr double kReduceKTiles = 10;
  // three consumers (a prepacked weight): half again the rows of two, and a decode worth about
  // 50 (fitted from `nvfp4-jit tune` at 6144 x 4096, M = 448 and 1024, and 28672 x 4096, M = 512)
  const double per_ktile = t.consumers == 1 ? 70.0 + t.block_m / 2.0 : t.consumers == 2 ? 55.0 + t.block_m : 50.0 + 1.5 * t.block_m;
  const int64_t row_step = gemm_row_step(m, t.block_m);
  const int64_t tiles = (n + 64 * t.consumers - 1) / (64 * t.consumers) * ((m + row_step - 1) / row_step);
  const int64_t split = gemm_split_tiles(tiles, t.split_k, sm_count);
  auto waves = [&](int64_t ctas) { return double((ctas + sm_count - 1) / sm_count); };
  const int64_t ktiles = (k + 127) / 128;  // 128-deep, whatever the stages' depth
  const double split_ktiles = double((ktiles + t.split_k - 1) / t.split_k) + kReduceKTiles;
  // A split-K grid launches clusters, whose CTAs start together: its whole tiles' waves cost
  // about 2% more (`nvfp4-jit tune` at 28672 x 4096, M = 4096: 27 waves and a split tail 5%
  // slower than unsplit).
  const double whole_ktiles = double(ktiles) * (t.split_k > 1 ? 1.02 : 1.0);
  return per_ktile * (waves(tiles - split) * whole_ktiles + waves(split * t.split_k) * split_ktiles);
}

}  // namespace

namespace {

// Past one 128-row tile the tensor cores bound the time, and the model picks the row tile,
// consumer count and split that waste the least of them on padding rows and idle SMs (the
// cliffs of a fixed 256-row tile, docs/perf.md). Its candidates, in order of preference on a
// tie: two consumers and the taller tile (fewer weight reads), unsplit.
std::vector<GemmTile> list_modelled_candidates(int64_t k, bool prepacked) {
  std::vector<GemmTile> tiles;
  for (int consumers : {2, 1, 3})
    for (int block_m : {256, 224, 192, 160, 128})
      for (int split_k : {1, 2}) {
        GemmTile c;
        c.consumers = consumers, c.block_m = block_m, c.split_k = split_k;
        // one consumer on 128 rows streams 256-deep stages (5-9% faster at N = 2880 and 4096)
        c.block_k = consumers == 1 && block_m == 128 ? 256 : 128;
        c.stages = int(max_stages(c));
        if (three_consumers_fit(c, prepacked) && gemm_tile_problem(c, k).empty() &&
            (split_k == 1 || (k + c.block_k - 1) / c.block_k / (2 * split_k) >= 4))
          tiles.push_back(c);
      }
  return tiles;
}

// The list depends on K and the layout only, and every gemm above 128 rows asks for it: kept
// (its checks format a message for each tile that fails).
const std::vector<GemmTile>& modelled_candidates(int64_t k, bool prepacked) {
  static std::mutex mutex;
  static std::map<std::pair<int64_t, bool>, std::vector<GemmTile>> lists;
  const std::lock_guard<std::mutex> lock(mutex);
  auto [it, added] = lists.try_emplace({k, prepacked});
  if (added) it->second = list_modelled_candidates(k, prepacked);
  return it->second;
}

// The tile's wgmmas as tall as its rows on m rows (in 16s, for the TMA store), the grid
// unchanged: 2-10% faster wherever that trims them (26 points of M = 129-2049 on four shapes;
// M = 513 on 136-row tiles: 144-row wgmmas instead of 160, 8-9%).
int trimmed_height(int block_m, int64_t m) {
  return int(std::min<int64_t>(block_m, (gemm_row_step(m, block_m) + 15) / 16 * 16));
}

GemmTile trimmed_to_rows(GemmTile t, int64_t m) {
  t.block_m = trimmed_height(t.block_m, m);
  return t;
}

GemmTile modelled_tile(const std::vector<GemmTile>& candidates, int64_t n, int64_t k, int64_t m, int sm_count) {
  GemmTile best;
  double best_cost = 0;
  for (const GemmTile& c : candidates) {
    // three consumers' fit rests on three shapes: taken where the model has them save 5%
    const double cost = modelled_cost(c, m, n, k, sm_count) * (c.consumers == 3 ? 1.05 : 1.0);
    if (best.block_m == 0 || cost < best_cost) best = c, best_cost = cost;
  }
  return trimmed_to_rows(best, m);
}

// Up to M = 128: one row tile `rows` high (the bucket's height, or fewer: the rows of an M in
// it, in 16s), the other choices by the bucket.
GemmTile small_m_tile(int64_t n, int64_t k, int bucket, int rows, int sm_count) {
  GemmTile t;
  t.consumers = 2;
  // From `nvfp4-jit tune` (docs/perf.md). Two consumer warpgroups share one CTA's activation
  // stages and producer; one consumer per 64 weight rows gives twice the CTAs, which a grid
  // that would leave SMs idle wants: at M <= 64 wherever one consumer's grid is at most one
  // wave (3-10% faster at N = 2880 to 8192 on the H100), at M = 128 where two consumers would
  // cover at most half the SMs even split in two (24-44% at N = 2880 and 4096).
  const int64_t one_consumer_ctas = (n + 63) / 64;
  if (bucket <= 64 ? one_consumer_ctas <= sm_count : 4 * ((n + 127) / 128) <= sm_count) t.consumers = 1;
  t.block_m = rows;
  // K splits in two (four always lost) where the grid leaves over a tenth of the SMs idle and
  // the split grid still fits one wave (96 one-consumer CTAs at N = 6144, M <= 64: 4-32%
  // faster unsplit).
  const int64_t ctas = (n + 64 * t.consumers - 1) / (64 * t.consumers);
  const bool split = 10 * ctas < 9 * int64_t(sm_count) && 2 * ctas <= sm_count;
  // 256-deep stages, except at M = 128 with two consumers (5 stages instead of 2: 5-7%
  // faster; 15% slower with one consumer). M <= 32 runs best with 4 stages, M = 64 and 128
  // with as many as fit, which a tile trimmed to fewer rows has more of (0-2% faster, 8% at
  // 4096 x 14336, M = 72). (128-deep stages at M <= 64, N = 28672 tune 5-16% faster, but
  // with weights_static, as decode runs, 15-30% slower.)
  t.block_k = bucket <= 64 || t.consumers == 1 ? 256 : 128;
  t.stages = bucket <= 32 ? 4 : int(max_stages(t));
  const int64_t ktiles = (k + t.block_k - 1) / t.block_k;
  if (split && ktiles / 2 >= 4) t.split_k = 2;
  // One consumer per row tile at M <= 64: two k groups give it the warps two consumers would
  // have (7-10% faster at 4096 x 14336, M = 1, 16, 64), with half its k-tiles in stages, at
  // least 4 (a deeper ring than the tiles it holds costs fill time: 9% at 4096 x 4096).
  if (t.consumers == 1 && bucket <= 64) {
    t.k_groups = 2;
    t.stages = int(std::clamp<int64_t>((ktiles + t.split_k - 1) / t.split_k / 2, 4, max_stages(t)));
  }
  return t;
}

// Above it, M picks no tile of its own: the large bucket's (the model's at 4096 rows).
constexpr int64_t kLargestModelledM = 16384;

// The Ms of a bucket that pick tiles of their own: from the previous bucket's end up to the
// bucket's (kLargestModelledM for the large one).
std::pair<int64_t, int64_t> bucket_rows(int bucket) {
  const int* it = std::find(std::begin(kGemmMBuckets), std::end(kGemmMBuckets), bucket);
  return {it == std::begin(kGemmMBuckets) ? 1 : *(it - 1) + 1, bucket == kGemmLargeM ? kLargestModelledM : bucket};
}

}  // namespace

GemmTile gemm_tile_at(Arch arch, int64_t n, int64_t k, int64_t m, int sm_count, bool prepacked) {
  const int bucket = gemm_m_bucket(m);
  if (m > kLargestModelledM) return gemm_heuristic(arch, n, k, bucket, sm_count, prepacked);
  // Up to 128 rows one row tile: the bucket's, as high as m's rows (M = 100 on 112-row wgmmas
  // instead of 128: 8% faster at 6144 x 4096 and 8192^2).
  if (bucket <= 128) return small_m_tile(n, k, bucket, trimmed_height(bucket, m), sm_count);
  // A warm gemm should be a lookup and a launch: the model's last answers, per thread, in a
  // small direct-mapped table (a serving loop repeats its layers' shapes and M).
  struct Memo {
    int64_t n = 0, k = 0, m = 0;
    int sm_count = 0;
    bool prepacked = false;
    GemmTile tile;
  };
  thread_local Memo memo[64];
  Memo& slot = memo[size_t(n * 31 + k * 7 + m + prepacked) % 64];
  if (slot.n != n || slot.k != k || slot.m != m || slot.sm_count != sm_count || slot.prepacked != prepacked)
    slot = {n, k, m, sm_count, prepacked, modelled_tile(modelled_candidates(k, prepacked), n, k, m, sm_count)};
  return slot.tile;
}

GemmTile gemm_tile_choice(const GemmTile* tuned, Arch arch, int64_t n, int64_t k, int64_t m, int sm_count,
                          bool prepacked) {
  // the heuristic's tile for the bucket, through gemm_tile_at's memo (a warm call stays a lookup);
  // a table written before tiles were trimmed to their rows holds it untrimmed
  const int64_t bucket_m = gemm_bucket_m(gemm_m_bucket(m));
  if (tuned && !(trimmed_to_rows(*tuned, bucket_m) == gemm_tile_at(arch, n, k, bucket_m, sm_count, prepacked)))
    return m > kLargestModelledM ? *tuned : trimmed_to_rows(*tuned, m);  // as gemm_tile_at trims its own
  return gemm_tile_at(arch, n, k, m, sm_count, prepacked);
}

std::vector<GemmTile> gemm_bucket_tiles(Arch arch, int64_t n, int64_t k, int bucket, int sm_count, bool prepacked) {
  std::vector<GemmTile> tiles{gemm_heuristic(arch, n, k, bucket, sm_count, prepacked)};
  const auto [first, last] = bucket_rows(bucket);
  for (int64_t m = first; m <= last; ++m) {
    const GemmTile t = gemm_tile_at(arch, n, k, m, sm_count, prepacked);
    if (std::find(tiles.begin(), tiles.end(), t) == tiles.end()) tiles.push_back(t);
  }
  return tiles;
}

std::vector<GemmTile> gemm_tuned_tiles(const GemmTile& tuned, int bucket) {
  std::vector<GemmTile> tiles{tuned};
  const auto [first, last] = bucket_rows(bucket);
  for (int64_t m = first; m <= last; ++m) {
    const GemmTile t = trimmed_to_rows(tuned, m);
    if (std::find(tiles.begin(), tiles.end(), t) == tiles.end()) tiles.push_back(t);
  }
  return tiles;
}

GemmTile gemm_heuristic(Arch /*arch*/, int64_t n, int64_t k, int bucket, int sm_count, bool prepacked) {
  if (bucket > 128) return modelled_tile(modelled_candidates(k, prepacked), n, k, gemm_bucket_m(bucket), sm_count);
  return small_m_tile(n, k, bucket, bucket, sm_count);
}

std::string gemm_tile_problem(const GemmTile& t, int64_t k) {
  if (t.block_m < 8 || t.block_m > 256 || t.block_m % 8) return fmt::format("block_m {} is not a multiple of 8 in 8..256", t.block_m);
  if (t.consumers < 1 || t.consumers > 3) return fmt::format("{} consumer warpgroups (1, 2, or 3 on a prepacked weight)", t.consumers);
  if (t.consumers == 3 && t.k_groups * t.split_k > 1) return "3 consumer warpgroups with split-K or k groups";
  if (t.k_groups != 1 && t.k_groups != 2) return fmt::format("{} k groups (1 or 2)", t.k_groups);
  if (t.k_groups == 2 && t.block_m > 64) return fmt::format("2 k groups at block_m {} (at most 64: registers)", t.block_m);
  if (t.block_k != 128 && t.block_k != 256) return fmt::format("block_k {} (128 or 256)", t.block_k);
  if (t.stages < 2) return fmt::format("{} stages (at least 2)", t.stages);
  if (t.split_k != 1 && t.split_k != 2 && t.split_k != 4 && t.split_k != 8)
    return fmt::format("split_k {} (1, 2, 4 or 8: a portable cluster)", t.split_k);
  if (gemm_shared_bytes(t) > kSm90SharedBytes)
    return fmt::format("{} bytes of shared memory (at most {})", gemm_shared_bytes(t), kSm90SharedBytes);
  if (t.split_k * t.k_groups > 1 && unsigned(64 * t.consumers * t.block_m * 4) > unsigned(t.stages) * stage_bytes(t))
    return "the partial tile does not fit in the stages";
  if (t.split_k > 1 && (k + t.block_k - 1) / t.block_k < 2 * t.split_k) return fmt::format("split_k {} leaves a split under 2 k-tiles", t.split_k);
  return {};
}

std::vector<GemmTile> gemm_candidates(Arch arch, int64_t n, int64_t k, int bucket, int sm_count, bool prepacked) {
  const GemmTile heuristic = gemm_heuristic(arch, n, k, bucket, sm_count, prepacked);
  std::vector<GemmTile> tiles{heuristic};
  // Above 128 rows the row tile's height is a choice too. One consumer warpgroup doubles the
  // CTAs of a grid that would leave SMs idle; two, or two k groups, put twice the warps on each
  // SM (latency hiding at small M); split-K does either for any N.
  std::vector<int> heights{heuristic.block_m};
  if (bucket > 128)
    for (int h : {128, 192, 256})
      if (h != heuristic.block_m) heights.push_back(h);
  for (int block_m : heights)
    for (int k_groups : {1, 2})
      for (int consumers : {1, 2, 3})
        for (int block_k : {128, 256})
          for (bool most_stages : {false, true})
            for (int split_k : {1, 2, 4, 8}) {
              GemmTile t = heuristic;
              t.block_m = block_m;
              t.k_groups = k_groups;
              t.consumers = consumers;
              t.block_k = block_k;
              t.split_k = split_k;
              t.stages = most_stages ? int(max_stages(t)) : 4;
              if (three_consumers_fit(t, prepacked) && gemm_tile_problem(t, k).empty() && std::find(tiles.begin(), tiles.end(), t) == tiles.end())
                tiles.push_back(t);
            }
  return tiles;
}

std::string describe(const GemmTile& t) {
  return fmt::format("bm{} bk{} wg{}{} s{} ks{}", t.block_m, t.block_k, t.consumers,
                     t.k_groups > 1 ? fmt::format(" kg{}", t.k_groups) : "", t.stages, t.split_k);
}

bool operator==(const GemmTile& a, const GemmTile& b) {
  return a.block_m == b.block_m && a.consumers == b.consumers && a.stages == b.stages && a.split_k == b.split_k &&
         a.block_k == b.block_k && a.k_groups == b.k_groups;
}

}  // namespace nvfp4::jit::detail
