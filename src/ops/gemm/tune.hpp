// The GEMM tuner: times every candidate tile of a bucket (the device's backend's) on scratch
// buffers with a cold L2 and records the winner in the device's tuning table.
#pragma once
#include <random>
#include <vector>

#include "core/launcher.hpp"
#include "ops/gemm/gemm_spec.hpp"
#include "nvfp4/jit.hpp"

namespace nvfp4::jit::detail {

// A grouped problem's buckets stop at 512 rows per expert: past that its scratch rows (every
// expert's) would take gigabytes, and the tile is the dense one's for as many rows.
inline constexpr int64_t kMaxTunedGroupedM = 512;

// The most rows `groups` experts can hold for the default expected_m to be at most m
// (grouped_default_expected_m): the heaviest routing whose calls a bucket of m rows serves.
int64_t grouped_rows_for_expected_m(int32_t groups, int64_t m);
// The rows per expert of the routings a grouped bucket of m rows per expert is timed on. First
// a uniform routing of grouped_rows_for_expected_m rows, each row to a random expert as tokens'
// top-k ids land; where that is more than max_rows, the same rows an expert on as few experts
// as max_rows hold, spread over the groups (the tiles a call decodes stay the bucket's).
// The decode bucket (m <= kTunedOneTokenM) serves single tokens too, whose few experts hold a
// row each: a tile that streams every expert's weight fastest can cut a few experts' into too
// few tiles to fill the SMs (docs/perf-log.md), so it is also timed on one row in each of
// kTunedOneTokenExperts experts spread over the groups.
inline constexpr int64_t kTunedOneTokenM = 8;
inline constexpr int32_t kTunedOneTokenExperts = 8;  // a top-8 token's
std::vector<std::vector<int32_t>> grouped_tuning_routings(int32_t groups, int64_t m, int64_t max_rows, std::mt19937_64& rng);

// `problem`: gemm_problem() of the kernels to tune (BF16 or FP16 activations). Each bucket is
// timed at its largest M, or a grouped problem's at `grouped_m` rows per expert where given.
std::vector<TunedBucket> tune_gemm(const DeviceInfo& device, const GemmSpec& problem, const std::vector<int>& buckets,
                                   int runs, int64_t grouped_m = 0);

}  // namespace nvfp4::jit::detail
