// Which tile a GEMM runs: its bucket's tuned tile where the tuner found one faster than the
// backend's heuristic (trimmed to the call's rows), else the heuristic's for the call's M.
#pragma once
#include <atomic>
#include <cstdint>
#include <optional>
#include <vector>

#include "core/launcher.hpp"
#include "ops/gemm/gemm_spec.hpp"
#include "core/tuning_table.hpp"
#include "ops/gemm/backend.hpp"

namespace nvfp4::jit::detail {

// `tuned`: the bucket's entry in the tuning table, if any. An entry holding the heuristic's own
// tile (timed at the bucket's largest M) leaves every M its own heuristic tile, and one whose
// tile the backend refuses (tile_problem) is passed over. `call`, where one is at hand: an
// untuned call runs the tile the backend fits to it (GemmBackend::call_heuristic).
GemmTile gemm_tile_choice(const GemmBackend& backend, const GemmSpec& problem, const GemmTile* tuned, int64_t m,
                            int sm_count, const GemmCall* call = nullptr);

// Every tile an untuned call with an M of `bucket` runs (the bucket's first): what prewarm
// compiles, so no M meets a kernel it lacks.
std::vector<GemmTile> gemm_bucket_tiles(const GemmBackend& backend, const GemmSpec& problem, int bucket,
                                          int sm_count);
// Every tile gemm_tile_choice runs for an M of `bucket` where `tuned` won it (`tuned` first):
// what `tune` compiles before it records the winner.
std::vector<GemmTile> gemm_tuned_tiles(const GemmBackend& backend, const GemmTile& tuned, int bucket);

// Bumped where a tuning result is recorded: every thread's warm GEMM entries (dispatch.cpp) are
// chosen again. (A variable, so the warm path reads it without a call.)
inline std::atomic<uint64_t> gemm_tuning_generation{0};

// The tuning table of `device` (loaded once per device and process).
TuningTable& gemm_tuning_table(const DeviceInfo& device);
// The tuned tile of `problem`'s bucket on `device`, if any (the MoE combine's: its GEMM's without it).
std::optional<GemmTile> gemm_tuned_tile(const DeviceInfo& device, const GemmSpec& problem, int bucket);

}  // namespace nvfp4::jit::detail
