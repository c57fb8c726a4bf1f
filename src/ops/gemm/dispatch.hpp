// The GEMM front's warm path: per thread, (context, problem, M) -> the loaded kernel and its
// launch plan. A miss chooses the tile (tuned, else the backend's heuristic), loads the kernel
// and plans it; a hit is one hash lookup. Tuning results (gemm_tuning_generation) empty the table.
#pragma once
#include <cuda.h>

#include <cstdint>

#include "core/launcher.hpp"
#include "ops/gemm/call.hpp"
#include "ops/gemm/launch.hpp"

namespace nvfp4::jit::detail {

// The kernel `call` runs on `device` (GemmKernel::decodes_a: W4A4's BF16 kernel, A decoded
// first). Valid until the thread's next gemm_dispatch.
const GemmKernel& gemm_dispatch(const DeviceInfo& device, const GemmCall& call, CUstream stream);

}  // namespace nvfp4::jit::detail
