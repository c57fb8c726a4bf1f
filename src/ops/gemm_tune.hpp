// GEMM tile tuning: time every candidate tile of a bucket on scratch buffers with a cold L2,
// remember the winner in the device's tuning table; and the dispatcher's tile choice (tuned
// entry, else on-first-use tuning with NVFP4_JIT_AUTOTUNE=1, else the heuristic).
#pragma once
#include <cuda.h>

#include <vector>

#include "core/launcher.hpp"
#include "core/spec.hpp"
#include "nvfp4/jit.hpp"
#include "ops/gemm_tiles.hpp"

namespace nvfp4::jit::detail {

// The tuning table's key for a problem: the spec without a tile.
KernelSpec gemm_problem(Arch arch, const GemmProblem& problem);

// Tunes the given buckets on the current device and records the winners.
std::vector<TunedBucket> tune_gemm(const DeviceInfo& device, const GemmProblem& problem, const std::vector<int>& buckets,
                                   int runs);

// The tile gemm() runs for `args` on `device`.
GemmTile gemm_tile_for(const DeviceInfo& device, const GemmArgs& args, CUstream stream);

}  // namespace nvfp4::jit::detail
