// The GEMM front's warm path: per thread, (context, problem, M) -> the loaded kernel and its
// launch plan. A miss chooses the tile (tuned, else the backend's heuristic), loads the kernel
// and plans it; a hit is one hash lookup.
#pragma once
#include <cuda.h>

#include <cstdint>

#include "core/launcher.hpp"
#include "ops/gemm/call.hpp"
#include "ops/gemm/launch.hpp"

namespace nvfp4::jit::detail {

// The kernel `call` runs on `device` (call.args.a_dtype BF16 or FP16: W4A4's decoded A).
const GemmKernel& gemm_dispatch(const DeviceInfo& device, const GemmCall& call, CUstream stream);

// Tuning results changed: every thread's warm entries are chosen again.
void gemm_tuning_changed();

}  // namespace nvfp4::jit::detail
