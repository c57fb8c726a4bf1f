#include "ops/gemm/sm90/tiles.hpp"

#include <algorithm>
#include <map>
#include <mutex>

#include <fmt/format.h>

#include "common/tile_scheduler.cuh"
#include "ops/gemm/m_buckets.hpp"
#include "ops/gemm/schedule.hpp"

namespace nvfp4::jit::detail::sm90 {

namespace {
constexpr unsigned kSm90SharedBytes = 227 * 1024;  // opt-in maximum per block
// each of several CTAs on an SM: 228 KiB an SM, of which the system takes 1 KiB a CTA
constexpr unsigned kSm90SharedBytesPerSm = 228 * 1024;
// an 8-row tile of a prepacked weight runs three CTAs an SM up to this K (grouped_persistent_ctas)
constexpr int64_t kThreeCtasMostK = 4096;
// activation boxes, packed weights, block scales: the template's STAGE_BYTES
unsigned stage_bytes(const Tile& t) {
  return unsigned(t.block_k / (t.fp8 ? 128 : 64) * t.block_m * 128 + 64 * t.consumers * t.block_k / 2 + (t.consumers == 3 ? 16 : 8) * t.block_k);
}
// a persistent kernel's k slices add up in a region after the stages (GemmConfig::PARTIAL_BYTES)
unsigned partial_bytes(const Tile& t) { return t.persistent > 0 && t.k_slices > 1 ? unsigned(t.block_m * 64 * t.consumers * 4) : 0u; }
// RMSNorm of A: each row's 1 / rms, after them (GemmConfig::RMS_BYTES)
unsigned a_rmsnorm_bytes(const Tile& t) { return t.a_rmsnorm ? unsigned(t.block_m * 4) : 0u; }
// NVFP4 D: each consumer warpgroup's staged values, after them in a persistent CTA, else in
// the stages (GemmConfig::STAGING_BYTES: two warp pairs' chunks of up to 32 rows, 64 bytes a row)
unsigned d_fp4_bytes(const Tile& t) {
  return t.d_fp4 && t.persistent > 0 ? unsigned(t.consumers * 2 * std::min(t.block_m, 32) * 64) : 0u;
}
unsigned shared_budget(const Tile& t) {
  return ctas_per_sm(t) == 1 ? kSm90SharedBytes : kSm90SharedBytesPerSm / unsigned(ctas_per_sm(t)) - 1024;
}
unsigned max_stages(const Tile& t) {
  return std::min(8u, (shared_budget(t) - 1024 - 128 - partial_bytes(t) - a_rmsnorm_bytes(t) - d_fp4_bytes(t)) /
                           stage_bytes(t));
}
// Three consumers: on a prepacked weight only (the ModelOpt layout stages scales with 128
// producer threads), at most 192 rows (ptxas fits each wgmma in the 128 registers a thread of
// 16 warps starts with: 96 accumulators fit, 112 do not); tile_problem rules out split-K
// and k slices.
bool three_consumers_fit(const Tile& t, bool prepacked) { return t.consumers != 3 || (prepacked && t.block_m <= 192); }
}  // namespace

int threads(const Tile& tile) { return 128 * (tile.consumers * tile.k_slices + 1); }

unsigned shared_bytes(const Tile& tile) {
  return 1024 + unsigned(tile.stages) * stage_bytes(tile) + 16u * unsigned(tile.stages) + partial_bytes(tile) +
         a_rmsnorm_bytes(tile) + d_fp4_bytes(tile);
}

Tile with_a_rmsnorm(Tile tile) {
  tile.a_rmsnorm = true;
  tile.stages = std::min(tile.stages, int(max_stages(tile)));
  return tile;
}

Tile with_d_fp4(Tile tile) {
  tile.d_fp4 = true;
  tile.stages = std::min(tile.stages, int(max_stages(tile)));
  return tile;
}

int grouped_persistent_ctas(int layout, const Tile& tile, bool prepacked, int64_t k) {
  if ((layout != nvfp4k::GROUPED_CONTIGUOUS && layout != nvfp4k::GROUPED_MASKED) || tile.block_m > 64) return 0;
  if (prepacked && tile.block_m <= 8 && threads(tile) <= 384 && k <= kThreeCtasMostK) return 3;
  return tile.block_m <= (prepacked ? 16 : 8) ? 2 : 1;
}

Tile persistent_tile(Tile tile, int ctas) {
  tile.persistent = ctas;
  tile.stages = int(max_stages(tile));
  return tile;
}

bool stores_through_smem(const Tile& tile, int d_bytes) {
  return tile.persistent == 0 && tile.block_m % 16 == 0 &&
         unsigned(64 * tile.consumers * tile.block_m * d_bytes) <= unsigned(tile.stages) * stage_bytes(tile);
}

namespace {

// The time of tile `t` on m rows, in MMA k-tiles of one activation row, fitted on an H100
// (docs/perf.md says on which shapes): with two consumer warpgroups a CTA's k-tile costs its
// rows plus the weight decode, worth about 55 rows; one consumer does half the rows' tensor
// work, but its decode, with half the warps to hide latency, is worth about 70. A split-K
// reduction costs about 10 k-tiles; the grid runs in whole waves. A grouped grid (groups > 0)
// holds each group's tiles of m rows.
double modelled_cost(const Tile& t, int64_t m, int64_t n, int64_t k, int sm_count, int groups) {
  constexpr double kReduceKTiles = 10;
  // three consumers (a prepacked weight): half again the rows of two, and a decode worth about 50
  const double per_ktile = t.consumers == 1 ? 70.0 + t.block_m / 2.0 : t.consumers == 2 ? 55.0 + t.block_m : 50.0 + 1.5 * t.block_m;
  const int64_t row_step = gemm_row_step(m, t.block_m);
  const int64_t tiles = (n + 64 * t.consumers - 1) / (64 * t.consumers) * ((m + row_step - 1) / row_step) * std::max(groups, 1);
  const int64_t split = gemm_split_tiles(tiles, t.split_k, sm_count);
  auto waves = [&](int64_t ctas) { return double((ctas + sm_count - 1) / sm_count); };
  const int64_t ktiles = (k + 127) / 128;  // 128-deep, whatever the stages' depth
  const double split_ktiles = double((ktiles + t.split_k - 1) / t.split_k) + kReduceKTiles;
  // A split-K grid launches clusters, whose CTAs start together: its whole tiles' waves cost
  // about 2% more.
  const double whole_ktiles = double(ktiles) * (t.split_k > 1 ? 1.02 : 1.0);
  return per_ktile * (waves(tiles - split) * whole_ktiles + waves(split * t.split_k) * split_ktiles);
}

}  // namespace

namespace {

// Past one 128-row tile the tensor cores bound the time, and the model picks the row tile,
// consumer count and split that waste the least of them on padding rows and idle SMs (the
// cliffs of a fixed 256-row tile, docs/perf.md). Its candidates, in order of preference on a
// tie: two consumers and the taller tile (fewer weight reads), unsplit.
std::vector<Tile> list_modelled_candidates(int64_t k, bool prepacked) {
  std::vector<Tile> tiles;
  for (int consumers : {2, 1, 3})
    for (int block_m : {256, 224, 192, 160, 128})
      for (int split_k : {1, 2}) {
        Tile c;
        c.consumers = consumers, c.block_m = block_m, c.split_k = split_k;
        // one consumer on 128 rows streams 256-deep stages: longer weight reads per row
        c.block_k = consumers == 1 && block_m == 128 ? 256 : 128;
        c.stages = int(max_stages(c));
        if (three_consumers_fit(c, prepacked) && tile_problem(c, k).empty() &&
            (split_k == 1 || (k + c.block_k - 1) / c.block_k / (2 * split_k) >= 4))
          tiles.push_back(c);
      }
  return tiles;
}

// The list depends on K and the layout only, and every gemm above 128 rows asks for it: kept
// (its checks format a message for each tile that fails).
const std::vector<Tile>& modelled_candidates(int64_t k, bool prepacked) {
  static std::mutex mutex;
  static std::map<std::pair<int64_t, bool>, std::vector<Tile>> lists;
  const std::lock_guard<std::mutex> lock(mutex);
  auto [it, added] = lists.try_emplace({k, prepacked});
  if (added) it->second = list_modelled_candidates(k, prepacked);
  return it->second;
}

Tile modelled_tile(const std::vector<Tile>& candidates, int64_t n, int64_t k, int64_t m, int sm_count, int groups) {
  Tile best;
  double best_cost = 0;
  for (const Tile& c : candidates) {
    if (groups > 0 && c.split_k > 1) continue;  // the groups' tiles fill the grid
    // three consumers' fit rests on three shapes: taken where the model has them save 5%
    const double cost = modelled_cost(c, m, n, k, sm_count, groups) * (c.consumers == 3 ? 1.05 : 1.0);
    if (best.block_m == 0 || cost < best_cost) best = c, best_cost = cost;
  }
  best.block_m = gemm_trimmed_height(best.block_m, m);
  return best;
}

// Up to M = 128: one row tile `rows` high (the bucket's height, or fewer: the rows of an M in
// it, in 16s), the other choices by the bucket. `may_split`: false for a grouped grid, which
// runs unsplit (the kernel has no grouped split-K).
Tile small_m_tile(int64_t n, int64_t k, int bucket, int rows, int sm_count, bool may_split) {
  Tile t;
  t.consumers = 2;
  // The choices below come from `nvfp4-jit tune` (docs/perf.md). Two consumer warpgroups
  // share one CTA's activation stages and producer; one consumer per 64 weight rows gives twice
  // the CTAs, which a grid that would leave SMs idle wants: at M <= 64 wherever one consumer's
  // grid is at most one wave, at M = 128 where two consumers would cover at most half the SMs
  // even split in two.
  const int64_t one_consumer_ctas = (n + 63) / 64;
  if (bucket <= 64 ? one_consumer_ctas <= sm_count : 4 * ((n + 127) / 128) <= sm_count) t.consumers = 1;
  t.block_m = rows;
  // K splits in two (four always lost) where the grid leaves over a tenth of the SMs idle and
  // the split grid still fits one wave.
  const int64_t ctas = (n + 64 * t.consumers - 1) / (64 * t.consumers);
  const bool split = may_split && 10 * ctas < 9 * int64_t(sm_count) && 2 * ctas <= sm_count;
  // 256-deep stages, except at M = 128 with two consumers (5 stages instead of 2). M <= 32
  // runs best with 4 stages, M = 64 and 128 with as many as fit, which a tile trimmed to fewer
  // rows has more of. (128-deep stages at M <= 64 tune faster at N = 28672, but run slower
  // with weights_static, as decode runs.)
  t.block_k = bucket <= 64 || t.consumers == 1 ? 256 : 128;
  t.stages = bucket <= 32 ? 4 : int(max_stages(t));
  const int64_t ktiles = (k + t.block_k - 1) / t.block_k;
  if (split && ktiles / 2 >= 4) t.split_k = 2;
  // One consumer per row tile at M <= 64: two k slices give it the warps two consumers would
  // have, with half its k-tiles in stages, at least 4 (a deeper ring than the tiles it holds
  // costs fill time).
  if (t.consumers == 1 && bucket <= 64) {
    t.k_slices = 2;
    t.stages = int(std::clamp<int64_t>((ktiles + t.split_k - 1) / t.split_k / 2, 4, max_stages(t)));
  }
  return t;
}

// Whether `groups` groups of n weight rows make a grid of at least two waves of the widest
// tiles (192 weight rows): then no SM waits for a tile, whatever the tile's width.
bool groups_fill_grid(int64_t n, int groups, int sm_count) { return groups * ((n + 191) / 192) >= 2 * int64_t(sm_count); }

// A grouped problem's row tile past 16 rows per group where the groups fill the grid: the
// tile that decodes the weight best, with no SM left idle to trade for. From a sweep of the
// tuner's candidates on the four expert shapes of `bench grouped` (docs/perf-log.md): three
// consumers on a prepacked weight, two with two k slices on the ModelOpt layout (its decode
// wants the warps), one k slice from 128 rows (registers); 256-deep stages up to 32 rows (64
// prepacked). As few row tiles of at most kGroupedTallest rows as m rows need, each as high as
// they hold: every row tile decodes the group's weight again (256 +- 16 rows an expert on
// 128-row tiles gave half the experts a third, nearly empty tile), and a tile narrows its MMA
// to a group's last rows.
constexpr int kGroupedTallest = 192;
Tile grouped_tile(int bucket, int rows, bool prepacked) {
  Tile t;
  t.block_m = rows;
  t.consumers = prepacked ? 3 : 2;
  t.k_slices = !prepacked && bucket <= 64 ? 2 : 1;
  t.block_k = bucket <= (prepacked ? 64 : 32) ? 256 : 128;
  t.stages = int(max_stages(t));
  return t;
}

// Whether the 192-row tiles of `groups` groups of n weight rows give the two CTAs an SM of a
// persistent grid six tiles each: enough that no SM waits long for one.
bool groups_fill_grid_six_times(int64_t n, int64_t groups, int sm_count) {
  return groups * ((n + 191) / 192) >= 6 * 2 * int64_t(sm_count);
}

// A grouped decode tile (up to 16 rows an expert) where the groups fill the grid. Its warps are
// for decoding, three to six consumer warpgroups an SM: one a CTA at three CTAs an SM (a
// prepacked 8-row tile up to K = 4096: grouped_persistent_ctas), two at two, two in two k slices
// at one. The dense tile's k slices are for one weight whose few 64-row tiles leave SMs idle (or
// a few groups', the batched wo_a's); here the groups' tiles fill them. Where the call's rows
// can reach groups whose 192-row tiles fill the grid six times over (many tokens' rows, not one
// token's), the three-CTA tile takes three consumers at two CTAs: twice the decoding warps an
// SM, 4-10% nearer the byte floor there, while one token's few tiles would leave SMs idle. From
// the tuner's candidates on the four expert shapes, both weight layouts (docs/perf-log.md).
// Past that K, two consumers at two CTAs, or three where their tiles fill the grid in one round
// where two consumers' take a second (one token's 9 DeepSeek-V3 gate_up experts with the
// shared one: 288 tiles of 128 rows on 264 CTAs, 198 of 192 rows; 6% faster). Over more rounds
// three measured no faster.
Tile grouped_decode_tile(int64_t n, int64_t k, int rows, bool prepacked, int64_t groups_reached, int sm_count) {
  Tile t;
  t.block_m = rows;
  t.consumers = 1;
  t.block_k = 256;
  auto ctas = [&] { return grouped_persistent_ctas(nvfp4k::GROUPED_CONTIGUOUS, t, prepacked, k); };
  // the rounds of a two-CTA persistent grid over the groups' tiles of `consumers` x 64 rows
  auto rounds = [&](int consumers) {
    const int64_t tiles = groups_reached * ((n + 64 * consumers - 1) / (64 * consumers));
    return (tiles + 2 * sm_count - 1) / (2 * sm_count);
  };
  if (ctas() == 3) {
    if (groups_fill_grid_six_times(n, groups_reached, sm_count)) t.consumers = 3;  // (at two CTAs an SM)
  } else {
    t.consumers = 2;
    if (ctas() < 2) t.k_slices = 2;
    else if (prepacked && rounds(3) < rounds(2) && rounds(2) <= 2) t.consumers = 3;
  }
  t.stages = int(max_stages(t));  // (a persistent grid's ring: as_grouped)
  return t;
}

// The exact mode's tile `t` as the W4A8 mode's (E4M3 stages).
Tile with_fp8_stages(Tile t) {
  const bool most = t.stages == int(max_stages(t));
  t.fp8 = true;
  if (most) t.stages = int(max_stages(t));
  return t;
}

}  // namespace

Tile heuristic_tile(int64_t n, int64_t k, int64_t m, int sm_count, bool prepacked, int groups, int64_t groups_reached,
                    bool fp8) {
  if (fp8) return with_fp8_stages(heuristic_tile(n, k, m, sm_count, prepacked, groups, groups_reached));
  const int bucket = gemm_m_bucket(m);
  if (m > kGemmLargestTrimmedM) m = gemm_bucket_m(bucket);
  if (groups > 0 && groups_fill_grid(n, groups, sm_count))
    return bucket > kGroupedDecodeMostRows ? grouped_tile(bucket, gemm_trimmed_height(std::min(bucket, kGroupedTallest), m), prepacked)
                       : grouped_decode_tile(n, k, gemm_trimmed_height(bucket, m), prepacked, groups_reached, sm_count);
  if (bucket > 128) return modelled_tile(modelled_candidates(k, prepacked), n, k, m, sm_count, groups);
  // Up to 128 rows one row tile: the bucket's, as high as m's rows.
  return small_m_tile(n, k, bucket, gemm_trimmed_height(bucket, m), sm_count, groups == 0);
}

Tile bucket_tile(int64_t n, int64_t k, int bucket, int sm_count, bool prepacked, int groups, bool fp8) {
  return heuristic_tile(n, k, gemm_bucket_m(bucket), sm_count, prepacked, groups, 0, fp8);
}

std::string tile_problem(const Tile& t, int64_t k) {
  if (t.block_m < 8 || t.block_m > 256 || t.block_m % 8) return fmt::format("block_m {} is not a multiple of 8 in 8..256", t.block_m);
  if (t.consumers < 1 || t.consumers > 3) return fmt::format("{} consumer warpgroups (1, 2, or 3 on a prepacked weight)", t.consumers);
  if (t.consumers == 3 && t.k_slices * t.split_k > 1) return "3 consumer warpgroups with split-K or k slices";
  if (t.k_slices != 1 && t.k_slices != 2) return fmt::format("{} k slices (1 or 2)", t.k_slices);
  if (t.k_slices == 2 && t.block_m > 64) return fmt::format("2 k slices at block_m {} (at most 64: registers)", t.block_m);
  if (t.block_k != 128 && t.block_k != 256) return fmt::format("block_k {} (128 or 256)", t.block_k);
  if (t.stages < 2) return fmt::format("{} stages (at least 2)", t.stages);
  if (t.split_k != 1 && t.split_k != 2 && t.split_k != 4 && t.split_k != 8)
    return fmt::format("split_k {} (1, 2, 4 or 8: a portable cluster)", t.split_k);
  if (shared_bytes(t) > shared_budget(t))
    return fmt::format("{} bytes of shared memory (at most {}{})", shared_bytes(t), shared_budget(t),
                       ctas_per_sm(t) > 1 ? fmt::format(" for each of {} CTAs an SM", ctas_per_sm(t)) : "");
  if (t.split_k * t.k_slices > 1 && unsigned(64 * t.consumers * t.block_m * 4) > unsigned(t.stages) * stage_bytes(t))
    return "the partial tile does not fit in the stages";
  if (t.split_k > 1 && (k + t.block_k - 1) / t.block_k < 2 * t.split_k) return fmt::format("split_k {} leaves a split under 2 k-tiles", t.split_k);
  return {};
}

std::vector<Tile> candidate_tiles(int64_t n, int64_t k, int bucket, int sm_count, bool prepacked, int groups, bool fp8) {
  const Tile heuristic = bucket_tile(n, k, bucket, sm_count, prepacked, groups, fp8);
  std::vector<Tile> tiles{heuristic};
  // Above 128 rows the row tile's height is a choice too. One consumer warpgroup doubles the
  // CTAs of a grid that would leave SMs idle; two, or two k slices, put twice the warps on each
  // SM (latency hiding at small M); split-K does either for any N.
  std::vector<int> heights{heuristic.block_m};
  if (bucket > 128)
    for (int h : {128, 192, 256})
      if (h != heuristic.block_m) heights.push_back(h);
  for (int block_m : heights)
    for (int k_slices : {1, 2})
      for (int consumers : {1, 2, 3})
        for (int block_k : {128, 256})
          for (bool most_stages : {false, true})
            for (int split_k : {1, 2, 4, 8}) {
              if (groups > 0 && split_k > 1) continue;  // a grouped grid runs unsplit
              Tile t = heuristic;
              t.block_m = block_m;
              t.k_slices = k_slices;
              t.consumers = consumers;
              t.block_k = block_k;
              t.split_k = split_k;
              t.stages = most_stages ? int(max_stages(t)) : 4;
              if (three_consumers_fit(t, prepacked) && tile_problem(t, k).empty() && std::find(tiles.begin(), tiles.end(), t) == tiles.end())
                tiles.push_back(t);
            }
  return tiles;
}

std::string describe(const Tile& t) {
  return fmt::format("bm{} bk{} wg{}{} s{} ks{}", t.block_m, t.block_k, t.consumers,
                     t.k_slices > 1 ? fmt::format("x{}", t.k_slices) : "", t.stages, t.split_k);
}

GemmTile to_config(const Tile& t) {
  GemmTile c;
  c.block_m = uint16_t(t.block_m);
  c.block_n = uint16_t(64 * t.consumers);
  c.block_k = uint16_t(t.block_k);
  c.threads = uint16_t(threads(t));
  c.stages = uint8_t(t.stages);
  c.split_k = uint8_t(t.split_k);
  c.k_slices = uint8_t(t.k_slices);
  return c;
}

Tile from_config(const GemmTile& c) {
  Tile t{c.block_m, c.block_n / 64, c.stages, c.split_k, c.block_k};
  t.k_slices = c.k_slices;
  return t;
}

}  // namespace nvfp4::jit::detail::sm90
