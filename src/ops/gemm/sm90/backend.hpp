// What sm_90a's GEMM backend (sm90/backend.cpp) knows beyond the GemmBackend interface.
#pragma once
#include <cstdint>

#include "ops/gemm/gemm_spec.hpp"

namespace nvfp4::jit::detail::sm90 {

// The tile an untuned call with m rows runs where its rows reach `groups_reached` of a
// contiguous grouped problem's groups (gemm_groups_reached; 0: all of them, as a bucket's tile is
// chosen, timed and tuned): fewer groups hold fewer tiles to spread over the SMs, which sizes a
// decode tile. From one group to all the tile changes at most once, so the two ends are every
// tile a bucket's calls run. Other problems (dense, masked, batched) keep the bucket's tile.
GemmTile heuristic(const GemmSpec& problem, int64_t m, int sm_count, int64_t groups_reached);

}  // namespace nvfp4::jit::detail::sm90
