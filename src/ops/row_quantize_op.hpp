// Fused quantizers with one CTA per row: RMSNorm + quantize, SwiGLU + quantize, MoE staging.
// templates/row_quantize.cuh holds the kernel; this file its specs, checks, launch and the
// CPU reference with the kernel's exact bits.
#pragma once
#include <vector>

#include "core/codegen.hpp"
#include "core/spec.hpp"
#include "nvfp4/jit.hpp"

namespace nvfp4::jit::detail {

// op: rmsnorm_quantize, swiglu_quantize or moe_stage. spec.n holds SwiGLU's interleave
// group (k for the two halves).
KernelSpec row_quantize_spec(Op op, Arch arch, int64_t k, DType in, ScaleLayout layout, int64_t group = 0);
GeneratedKernel generate_row_quantize(const KernelSpec& spec);
// RMSNorm and SwiGLU (two halves) + quantize of BF16 rows of `k`, both scale layouts.
std::vector<KernelSpec> row_quantize_prewarm_specs(Arch arch, int64_t k);

}  // namespace nvfp4::jit::detail
