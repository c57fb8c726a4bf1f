// The GEMM tuner: times every candidate tile of a bucket (the device's backend's) on scratch
// buffers with a cold L2 and records the winner in the device's tuning table.
#pragma once
#include <vector>

#include "core/launcher.hpp"
#include "core/spec.hpp"
#include "nvfp4/jit.hpp"

namespace nvfp4::jit::detail {

// `problem`: gemm_problem() of the kernels to tune (BF16 or FP16 activations). Each bucket is
// timed at its largest M, or a grouped problem's at `grouped_m` rows per expert where given.
std::vector<TunedBucket> tune_gemm(const DeviceInfo& device, const KernelSpec& problem, const std::vector<int>& buckets,
                                   int runs, int64_t grouped_m = 0);

}  // namespace nvfp4::jit::detail
