// The GEMM's part of a prewarm: every kernel (GemmBackend::kernel_spec: shapes may share one)
// of every tile any M of every bucket runs, for every variant of the
// shape (activation and output dtypes, bias, weight layout, W4A4 A's scale layout, grouped
// layout, epilogue, precision) the arch's backend serves. A backend with an FP4 MMA takes W4A4's
// NVFP4 A as it is; one whose GEMM decodes it as it loads it runs dense buckets of few rows
// so (w4a4_runs_one_launch) and the others' BF16 kernel on A decoded first (the decode is
// dequantize's, prewarmed there), as does a backend with neither.
#include "core/op_registry.hpp"
#include "ops/gemm/backend.hpp"
#include "ops/gemm/call.hpp"
#include "ops/gemm/fp8_activations_op.hpp"
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

std::vector<KernelSpec> gemm_prewarm_specs(Arch arch, const WeightShape& shape, int sm_count) {
  std::vector<KernelSpec> specs;
  const GemmBackend* backend = find_gemm_backend(arch);
  if (!backend || shape.n <= 0 || shape.k <= 0 || shape.k % 32) return specs;
  const PrewarmVariants& variants = shape.variants;
  const std::vector<GroupedLayout> grouped =
      shape.groups > 1 ? variants.grouped : std::vector<GroupedLayout>{GroupedLayout::contiguous};
  std::vector<GemmSpec> problems;
  for (DType a : variants.a_dtypes)
    for (DType d : variants.d_dtypes)
      for (uint8_t bias : variants.biases)
        for (WeightLayout b : variants.b_layouts)
          for (GroupedLayout g : grouped)
            for (ScaleLayout a_scales : variants.a_scales) {
              for (GemmEpilogue e : variants.epilogues) {
                if (e == GemmEpilogue::swiglu && shape.n % 16) continue;  // no gate_up weight
                for (GemmPrecision precision : variants.precisions)
                  for (GemmARmsNorm rmsnorm : variants.a_rmsnorms)
                    for (GemmResidual residual : variants.residuals) {
                      // (W4A4 takes neither in the GEMM so far: its A is NVFP4)
                      if ((rmsnorm != GemmARmsNorm::none || residual != GemmResidual::none) && a == DType::nvfp4) continue;
                      const GemmSpec problem = variant_problem(arch, *backend, shape,
                                                               {a, d, bias, b, a_scales, g, e, precision, rmsnorm, residual});
                      // (W4A8's GEMM is the same on any A: its problem is the BF16 call's; W4A4
                      // that a backend runs only on A decoded first, the BF16 call's too)
                      const GemmSpec runs_as = gemm_problem_w4a8(problem) ? gemm_fp8_problem(problem)
                                               : a == DType::nvfp4 && !backend->native_fp4_activations()
                                                   ? gemm_decoded_a_problem(problem)
                                                   : problem;
                      if (!backend->unsupported(runs_as).empty()) continue;
                      problems.push_back(problem);
                      // the W4A8 activation pass of its K and A (NVFP4 A's: per scale layout)
                      if (precision == GemmPrecision::w4a8) specs.push_back(fp8_activations_spec(arch, shape.k, a, a_scales));
                    }
              }
              if (a != DType::nvfp4) break;  // A's scale layout is W4A4's only
            }
  for (int bucket : kGemmMBuckets)
    for (const GemmSpec& variant : problems) {
      // A W4A8 call of the bucket's rows may run the exact mode (w4a8_runs_exact; a grouped one
      // as its rows are gathered or not): the kernels of each mode its calls run.
      std::vector<GemmSpec> runs{variant};
      if (gemm_problem_w4a8(variant)) {
        const bool grouped = gemm_problem_groups(variant) > 0;
        const int64_t rows = gemm_bucket_m(bucket);
        const bool sorted_exact = w4a8_runs_exact(grouped, false, rows), gathered_exact = w4a8_runs_exact(grouped, true, rows);
        runs.clear();
        if (sorted_exact || gathered_exact) runs.push_back(gemm_with_precision(variant, GemmPrecision::exact));
        if (!sorted_exact || !gathered_exact) runs.push_back(variant);
      }
      // W4A8's GEMM reads E4M3 whatever A was; W4A4 past the one-launch rows (and grouped) runs
      // the BF16 kernel on A decoded first, and a bucket whose rows straddle that bound runs both
      for (size_t i = 0, n = runs.size(); i < n; ++i) {
        GemmSpec& run = runs[i];
        if (gemm_problem_w4a8(run)) {
          run = gemm_fp8_problem(run);
        } else if (run.a_dtype == uint8_t(DType::nvfp4) && !backend->native_fp4_activations()) {
          const bool grouped = gemm_problem_groups(run) > 0;
          const auto [first, last] = gemm_bucket_rows(bucket);
          if (w4a4_runs_one_launch(grouped, last, run.k)) continue;
          const bool some_in_one_launch = w4a4_runs_one_launch(grouped, first, run.k);
          const GemmSpec decoded = gemm_decoded_a_problem(run);
          if (some_in_one_launch) runs.push_back(decoded);
          else run = decoded;
        }
      }
      for (const GemmSpec& problem : runs)
        for (const GemmTile& tile : gemm_bucket_tiles(*backend, problem, bucket, sm_count))
          specs.push_back(gemm_key(gemm_kernel_spec(*backend, problem, tile)));
    }
  return specs;
}

const bool registered = register_prewarm(10, gemm_prewarm_specs);

}  // namespace

}  // namespace nvfp4::jit::detail
