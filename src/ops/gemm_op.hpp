// Dense GEMM with NVFP4 weights: spec, codegen and prewarm expansion.
#pragma once
#include <vector>

#include "core/codegen.hpp"
#include "core/spec.hpp"
#include "nvfp4/jit.hpp"
#include "ops/gemm_tiles.hpp"

namespace nvfp4::jit::detail {

// The weight layout a GEMM kernel is compiled for (its spec's scale_layout): the weight's scale
// layout, or nvfp4k::SCALES_PREPACKED for a prepack()ed weight.
ScaleLayout gemm_weight_layout(ScaleLayout scales, bool prepacked);
// bias: kNoDType or the bias DType
KernelSpec gemm_spec(Arch arch, int64_t n, int64_t k, DType a, DType d, ScaleLayout layout, uint8_t bias,
                     const GemmTile& tile);
GemmTile gemm_tile_of(const KernelSpec& spec);
GeneratedKernel generate_gemm(const KernelSpec& spec);
// gemm with a given tile instead of the heuristic's (the tuner and the benchmarks).
void gemm_with_tile(const GemmArgs& args, const GemmTile& tile, CUstream stream);
// Every M bucket's kernel for a weight [n, k] (BF16 activations and output, both scale layouts).
std::vector<KernelSpec> gemm_prewarm_specs(Arch arch, int64_t n, int64_t k, int sm_count);

}  // namespace nvfp4::jit::detail
