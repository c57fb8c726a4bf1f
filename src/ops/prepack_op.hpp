// Prepack: a ModelOpt weight rewritten in the sm_90a GEMM's own layout (prepacked_weight.cuh).
#pragma once
#include "core/codegen.hpp"
#include "core/spec.hpp"
#include "nvfp4/jit.hpp"

namespace nvfp4::jit::detail {

// scale_layout: the source weight's scale layout.
KernelSpec prepack_spec(Arch arch, int64_t k, ScaleLayout layout);
GeneratedKernel generate_prepack(const KernelSpec& spec);

}  // namespace nvfp4::jit::detail
