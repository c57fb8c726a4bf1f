#include "ops/gemm/tile_choice.hpp"

#include <algorithm>

#include "core/driver.hpp"
#include "core/error.hpp"
#include "ops/gemm/call.hpp"
#include "ops/gemm/m_buckets.hpp"

namespace nvfp4::jit::detail {

namespace {

void add_once(std::vector<GemmTile>& tiles, const GemmTile& t) {
  if (std::find(tiles.begin(), tiles.end(), t) == tiles.end()) tiles.push_back(t);
}

}  // namespace

GemmTile gemm_tile_choice(const GemmBackend& backend, const GemmSpec& problem, const GemmTile* tuned, int64_t m,
                            int sm_count, const GemmCall* call) {
  const int64_t bucket_m = gemm_bucket_m(gemm_m_bucket(m));
  // a table written before tiles were trimmed to their rows holds the heuristic's untrimmed
  if (tuned && backend.for_rows(*tuned, bucket_m) != backend.heuristic(problem, bucket_m, sm_count))
    return m > kGemmLargestTrimmedM ? *tuned : backend.for_rows(*tuned, m);
  return call ? backend.call_heuristic(problem, *call, m, sm_count) : backend.heuristic(problem, m, sm_count);
}

std::vector<GemmTile> gemm_bucket_tiles(const GemmBackend& backend, const GemmSpec& problem, int bucket,
                                          int sm_count) {
  std::vector<GemmTile> tiles{backend.heuristic(problem, gemm_bucket_m(bucket), sm_count)};
  const auto [first, last] = gemm_bucket_rows(bucket);
  for (int64_t m = first; m <= last; ++m)
    for (const GemmTile& t : backend.heuristic_tiles(problem, m, sm_count)) add_once(tiles, t);
  return tiles;
}

std::vector<GemmTile> gemm_tuned_tiles(const GemmBackend& backend, const GemmTile& tuned, int bucket) {
  std::vector<GemmTile> tiles{tuned};
  const auto [first, last] = gemm_bucket_rows(bucket);
  for (int64_t m = first; m <= last; ++m) add_once(tiles, backend.for_rows(tuned, m));
  return tiles;
}

TuningTable& gemm_tuning_table(const DeviceInfo& device) {
  thread_local int last_device = -1;
  thread_local TuningTable* last = nullptr;
  if (last_device != int(device.device)) {
    char name[256] = {};
    check_cu(driver().cuDeviceGetName(name, sizeof name, device.device), "cuDeviceGetName");
    last = &tuning_table_for(int(device.device), device.arch, name, device.sm_count);
    last_device = int(device.device);
  }
  return *last;
}

std::optional<GemmTile> gemm_tuned_tile(const DeviceInfo& device, const GemmSpec& problem, int bucket) {
  if (records_specs(device)) return std::nullopt;  // no device to name a tuning table: the heuristic
  // The MoE combine adds to the down GEMM's epilogue only: it runs the plain GEMM's tuned tile
  // (which also keeps its D the bits of the unfused chain's).
  GemmSpec tuned_as = problem;
  tuned_as.flags &= uint16_t(~kFlagEpilogueMoeCombine);
  const std::optional<KernelSpec> tuned = gemm_tuning_table(device).find(gemm_key(tuned_as), bucket);
  if (!tuned) return std::nullopt;
  return gemm_spec_of(*tuned).tile;
}

}  // namespace nvfp4::jit::detail
