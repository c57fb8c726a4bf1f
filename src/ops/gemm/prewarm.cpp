// The GEMM's part of a prewarm: every kernel (GemmBackend::kernel_spec: shapes may share one)
// of every tile any M of every bucket runs, for every variant of the
// shape (activation and output dtypes, bias, weight layout, W4A4 A's scale layout, grouped
// layout, epilogue, precision) the arch's backend serves. A backend with an FP4 MMA takes W4A4's
// NVFP4 A as it is; one whose GEMM decodes it as it loads it runs dense buckets of few rows
// so (w4a4_runs_one_launch) and the others' BF16 kernel on A decoded first (the decode is
// dequantize's, prewarmed there), as does a backend with neither.
#include <utility>
#include <vector>

#include "core/op_registry.hpp"
#include "ops/gemm/backend.hpp"
#include "ops/gemm/call.hpp"
#include "ops/gemm/fp8_activations_op.hpp"
#include "ops/gemm/gather_rows_op.hpp"
#include "ops/gemm/m_buckets.hpp"
#include "ops/gemm/prewarm_variants.hpp"
#include "ops/gemm/tile_choice.hpp"

namespace nvfp4::jit::detail {

namespace {

// The problem one variant compiles in.
GemmSpec variant_problem(Arch arch, const GemmBackend& backend, const WeightShape& shape, const GemmVariant& v) {
  GemmSpec problem = gemm_problem(arch, shape.n, shape.k, v.a, v.d,
                                    v.b == WeightLayout::swizzled ? ScaleLayout::swizzled128x4 : ScaleLayout::linear,
                                    v.b == WeightLayout::prepacked, v.bias);
  if (shape.groups > 1) {
    problem.groups = shape.groups;
    problem.flags |= v.grouped == GroupedLayout::masked ? kFlagGroupedMasked : kFlagGroupedContiguous;
  }
  if (v.a == DType::nvfp4 && (backend.native_fp4_activations() || backend.decodes_fp4_activations()))
    problem = gemm_fp4_problem(problem, v.a_scales);
  const GemmSpec fused = with_a_rmsnorm(with_epilogue(problem, v.epilogue), v.a_rmsnorm != GemmARmsNorm::none,
                                        v.a_rmsnorm == GemmARmsNorm::fp32);
  return gemm_with_precision(with_residual(fused, v.residual == GemmResidual::add), v.precision);
}

// Every combination of the shape's variant lists, in the order of the lists (the first field
// slowest): A's scale layout only for W4A4 (the others take the list's first), SwiGLU only on a
// gate_up weight (n a multiple of 16), NVFP4 D only as SwiGLU's (whole blocks: n a multiple of
// 32), RMSNorm and the residual not for W4A4 (its A is NVFP4).
std::vector<GemmVariant> gemm_variants(const WeightShape& shape) {
  const PrewarmVariants& lists = shape.variants;
  std::vector<GemmVariant> variants{GemmVariant{}};
  auto times = [&](auto field, const auto& values) {
    std::vector<GemmVariant> product;
    for (const GemmVariant& v : variants)
      for (const auto& value : values) {
        GemmVariant w = v;
        w.*field = value;
        product.push_back(w);
      }
    variants = std::move(product);
  };
  times(&GemmVariant::a, lists.a_dtypes);
  times(&GemmVariant::d, lists.d_dtypes);
  times(&GemmVariant::bias, lists.biases);
  times(&GemmVariant::b, lists.b_layouts);
  times(&GemmVariant::grouped, shape.groups > 1 ? lists.grouped : std::vector<GroupedLayout>{GroupedLayout::contiguous});
  times(&GemmVariant::a_scales, lists.a_scales);
  times(&GemmVariant::epilogue, lists.epilogues);
  times(&GemmVariant::precision, lists.precisions);
  times(&GemmVariant::a_rmsnorm, lists.a_rmsnorms);
  times(&GemmVariant::residual, lists.residuals);
  std::erase_if(variants, [&](const GemmVariant& v) {
    const bool w4a4 = v.a == DType::nvfp4;
    return (!w4a4 && !lists.a_scales.empty() && v.a_scales != lists.a_scales.front()) ||
           (v.epilogue == GemmEpilogue::swiglu && shape.n % 16) ||
           (v.d == DType::nvfp4 && (v.epilogue != GemmEpilogue::swiglu || shape.n % 32)) ||
           (w4a4 && (v.a_rmsnorm != GemmARmsNorm::none || v.residual != GemmResidual::none));
  });
  return variants;
}

std::vector<KernelSpec> gemm_prewarm_specs(Arch arch, const WeightShape& shape, int sm_count) {
  std::vector<KernelSpec> specs;
  const GemmBackend* backend = find_gemm_backend(arch);
  if (!backend || shape.n <= 0 || shape.k <= 0 || shape.k % 32) return specs;
  std::vector<GemmSpec> problems;
  for (const GemmVariant& v : gemm_variants(shape)) {
    const GemmSpec problem = variant_problem(arch, *backend, shape, v);
    // (W4A8's GEMM is the same on any A: its problem is the BF16 call's; W4A4 that a backend
    // runs only on A decoded first, the BF16 call's too)
    const GemmSpec runs_as = gemm_problem_w4a8(problem)                                 ? gemm_fp8_problem(problem)
                             : v.a == DType::nvfp4 && !backend->native_fp4_activations() ? gemm_decoded_a_problem(problem)
                                                                                          : problem;
    if (!backend->unsupported(runs_as).empty()) continue;
    problems.push_back(problem);
    // the W4A8 activation pass of its K and A (NVFP4 A's: per scale layout)
    if (v.precision == GemmPrecision::w4a8) specs.push_back(fp8_activations_spec(arch, shape.k, v.a, v.a_scales));
    // the row gather of a contiguous W4A16 call through row_index (gathers_rows_first)
    if (shape.groups > 1 && v.grouped == GroupedLayout::contiguous && v.a != DType::nvfp4)
      specs.push_back(gather_rows_spec(arch, shape.k, v.a));
  }
  for (int bucket : kGemmMBuckets)
    for (const GemmSpec& variant : problems) {
      // A W4A8 call of the bucket's rows may run the exact mode (w4a8_runs_exact): the kernels
      // of the mode its calls run.
      std::vector<GemmSpec> runs{variant};
      if (gemm_problem_w4a8(variant) &&
          w4a8_runs_exact(gemm_problem_groups(variant) > 0, gemm_bucket_m(bucket), variant.n))
        runs = {gemm_with_precision(variant, GemmPrecision::exact)};
      // the kernels those runs load: W4A8's GEMM reads E4M3 whatever A was; W4A4 runs on NVFP4 A
      // up to the one-launch rows and on A decoded first past them (and grouped), so a bucket
      // whose rows straddle that bound loads both
      std::vector<GemmSpec> kernels;
      for (const GemmSpec& run : runs) {
        if (gemm_problem_w4a8(run)) {
          kernels.push_back(gemm_fp8_problem(run));
        } else if (run.a_dtype != uint8_t(DType::nvfp4) || backend->native_fp4_activations()) {
          kernels.push_back(run);
        } else {
          const bool grouped = gemm_problem_groups(run) > 0;
          const auto [first, last] = gemm_bucket_rows(bucket);
          if (w4a4_runs_one_launch(grouped, first, run.k)) kernels.push_back(run);
          if (!w4a4_runs_one_launch(grouped, last, run.k)) kernels.push_back(gemm_decoded_a_problem(run));
        }
      }
      for (const GemmSpec& problem : kernels)
        for (const GemmTile& tile : gemm_bucket_tiles(*backend, problem, bucket, sm_count))
          specs.push_back(gemm_key(gemm_kernel_spec(*backend, problem, tile)));
    }
  return specs;
}

const bool registered = register_prewarm(10, gemm_prewarm_specs);

}  // namespace

}  // namespace nvfp4::jit::detail
