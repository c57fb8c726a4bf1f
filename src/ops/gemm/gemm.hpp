// The GEMM front's entry points besides the public ones in nvfp4/jit.hpp.
#pragma once
#include <cuda.h>

#include "ops/gemm/gemm_spec.hpp"
#include "nvfp4/jit.hpp"

namespace nvfp4::jit::detail {

// gemm (grouped_gemm) with a given tile instead of the chosen one (the tuner's checks, the
// benchmarks and the tests).
// Throws Error(unsupported) where the device's backend cannot build or run it.
void gemm_with_tile(const GemmArgs& args, const GemmTile& tile, CUstream stream);
void grouped_gemm_with_tile(const GroupedGemmArgs& args, const GemmTile& tile, CUstream stream);

}  // namespace nvfp4::jit::detail
