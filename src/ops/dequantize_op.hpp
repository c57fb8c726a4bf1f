// Dequantize: NVFP4 [rows, K] -> BF16 / FP16 / FP32, full or gathered by row indices.
#pragma once
#include <vector>

#include "core/codegen.hpp"
#include "core/spec.hpp"
#include "nvfp4/jit.hpp"

namespace nvfp4::jit::detail {

GeneratedKernel generate_dequantize(const KernelSpec& spec);
KernelSpec dequantize_spec(Arch arch, int64_t k, DType out, ScaleLayout layout);
// The kernels a model with reduction size `k` may ask for (every output dtype and layout).
std::vector<KernelSpec> dequantize_prewarm_specs(Arch arch, int64_t k);

}  // namespace nvfp4::jit::detail
