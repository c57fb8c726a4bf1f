// The GEMM's part of a prewarm: every tile any M of every bucket runs, for each weight layout
// the arch's backend supports (BF16 activations and output: W4A16 and W4A4 alike; a backend with
// an FP4 MMA, NVFP4 activations with swizzled scales and BF16 output); for a
// grouped weight (groups > 1), the contiguous grouped GEMM's for every rows-per-group bucket.
#include "core/op_registry.hpp"
#include "ops/gemm/backend.hpp"
#include "ops/gemm/m_buckets.hpp"
#include "ops/gemm/tile_choice.hpp"

namespace nvfp4::jit::detail {

namespace {

std::vector<KernelSpec> gemm_prewarm_specs(Arch arch, const WeightShape& shape, int sm_count) {
  std::vector<KernelSpec> specs;
  const GemmBackend* backend = find_gemm_backend(arch);
  if (!backend || shape.n <= 0 || shape.k <= 0 || shape.k % 32) return specs;
  for (int bucket : kGemmMBuckets)
    for (const auto& [layout, prepacked] : {std::pair{ScaleLayout::linear, false}, std::pair{ScaleLayout::swizzled128x4, false},
                                            std::pair{ScaleLayout::linear, true}}) {
      KernelSpec problem = gemm_problem(arch, shape.n, shape.k, DType::bf16, DType::bf16, layout, prepacked, kNoDType);
      if (shape.groups > 1) {
        problem.groups = shape.groups;
        problem.flags |= kFlagGroupedContiguous;
      }
      // a backend with an FP4 MMA: NVFP4 activations as the quantizers write them (swizzled scales)
      if (backend->native_fp4_activations()) problem = gemm_fp4_problem(problem, ScaleLayout::swizzled128x4);
      if (!backend->unsupported(problem).empty()) continue;
      for (const TileConfig& tile : gemm_bucket_tiles(*backend, problem, bucket, sm_count))
        specs.push_back(gemm_spec(problem, tile));
    }
  return specs;
}

const bool registered = register_prewarm(10, gemm_prewarm_specs);

}  // namespace

}  // namespace nvfp4::jit::detail
