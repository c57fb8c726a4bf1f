#include "ops/row_quantize_op.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/params.cuh"
#include "common/row_plan.cuh"
#include "core/op_registry.hpp"
#include "ops/spec_names.hpp"
#include "ops/validate.hpp"

namespace nvfp4::jit::detail {

// Whole rows: about two blocks of 16 per thread, enough loads in flight and few registers
// (mHC too, whose sum of squares must add up in RMSNorm's order). RMSNorm on 16-bit input and
// weights is held to 48 registers (40 warps an SM; on sm_90a only: row_quantize_spec); fp32
// input or weights would spill at 48 (or 64) and run free. SwiGLU spreads a row widest
// instead: one block per thread up to 1024 threads (RMSNorm loses that way).
// Rows in parts: 128 threads with one (SwiGLU) or two blocks each, so that 16 rows of 8192 still make
// 64 or 32 CTAs. SwiGLU's 16-bit parts get up to 64 registers (8 CTAs an SM): their estimate
// paths (common/silu_bf16.cuh, silu_fp16.cuh) then issue all four loads at once without
// spilling. The measurements behind each choice: docs/perf-log.md.
RowShape row_shape(const RowKernel& kernel) {
  const int64_t blocks = kernel.k / 16;
  const int64_t per_thread = kernel.op == Op::swiglu_quantize ? 1 : 2;
  // warps enough for `per` blocks a thread, at most `most` threads
  auto threads_for = [&](int64_t most, int64_t per) { return int(std::clamp<int64_t>((blocks + 32 * per - 1) / (32 * per) * 32, 32, most)); };
  if (kernel.whole_rows) {
    const int threads = threads_for(1024, per_thread);
    // Few rows (a CTA a row, SMs idle): a row's two blocks a thread go to two threads after the
    // sum of squares, which halves each warp's serial chain of instructions. Up to 512 threads
    // (more spill at 64 registers), and not for fp32 mHC (spills at 128).
    const bool spreads = normalizes(kernel.op) && nvfp4k::row_per_thread(blocks, threads) == 2 && 2 * threads <= 512 &&
                         !(kernel.op == Op::mhc_rmsnorm_quantize && kernel.in == DType::fp32);
    if (kernel.few_rows && spreads) return {threads, blocks, 0, 2};
    const bool held_to_48 =
        kernel.op == Op::rmsnorm_quantize && kernel.in != DType::fp32 && kernel.weight != DType::fp32 && threads >= 128;
    return {threads, blocks, held_to_48 ? 1280 / threads : 0};
  }
  const bool sixteen_bit_swiglu = kernel.op == Op::swiglu_quantize && kernel.in != DType::fp32;
  // Few rows of 16-bit tokens (MoE staging) or SwiGLU whose gates and ups come in blocks of
  // their own: two threads a block, parts of up to 64 blocks (SwiGLU: twice the CTAs of 128
  // threads, each warp half the chain; staging: four times, a quarter).
  const bool halves = kernel.in != DType::fp32 &&
                      (kernel.op == Op::moe_stage || (kernel.op == Op::swiglu_quantize && (kernel.interleave == 0 || kernel.interleave >= 16)));
  if (kernel.few_rows && halves) {
    const int threads = threads_for(64, 1);
    return {threads, std::min<int64_t>(blocks, threads), 512 / threads, 2};
  }
  const int threads = threads_for(128, per_thread);
  return {threads, std::min<int64_t>(blocks, threads * per_thread), sixteen_bit_swiglu ? 1024 / threads : 0};
}

int row_prologue(Op op) {
  return op == Op::rmsnorm_quantize       ? nvfp4k::ROW_RMSNORM
         : op == Op::swiglu_quantize      ? nvfp4k::ROW_SWIGLU
         : op == Op::mhc_rmsnorm_quantize ? nvfp4k::ROW_MHC
                                          : nvfp4k::ROW_PLAIN;
}

KernelSpec row_quantize_spec(Arch arch, const RowKernel& kernel) {
  const RowShape row = row_shape(kernel);
  RowQuantizeSpec spec;
  spec.k = kernel.k;
  spec.in_dtype = kernel.in;
  spec.norm_weight_dtype = normalizes(kernel.op) ? kernel.weight : kernel.in;
  spec.scale_layout = kernel.layout;
  spec.swiglu_interleave = kernel.op == Op::swiglu_quantize ? (kernel.interleave ? kernel.interleave : kernel.k) : 1;
  spec.mhc_streams = kernel.op == Op::mhc_rmsnorm_quantize ? kernel.n_hc : 0;
  spec.blocks_per_cta = int(row.blocks_per_cta);
  spec.threads = row.threads;
  spec.spread = row.spread;
  // RMSNorm's hold to 48 registers was measured on sm_90a; sm_100a and sm_120a spill under it.
  spec.min_ctas_per_sm = kernel.op == Op::rmsnorm_quantize && arch != Arch::sm_90a ? 0 : row.min_ctas;
  return KernelSpec::of(arch, kernel.op, spec);
}

KernelSpec row_quantize_spec(Op op, Arch arch, int64_t k, DType in, ScaleLayout layout, int64_t interleave) {
  RowKernel kernel;
  kernel.op = op, kernel.k = k, kernel.in = kernel.weight = in, kernel.layout = layout, kernel.interleave = interleave;
  return row_quantize_spec(arch, kernel);
}

namespace {

std::string row_quantize_kernel_name(const KernelSpec& key) {
  const RowQuantizeSpec spec = key.as<RowQuantizeSpec>();
  std::string name = fmt::format("nvfp4_{}_k{}_{}_{}", to_string(key.op), spec.k, dtype_name(spec.in_dtype),
                                 scale_layout_name(spec.scale_layout));
  if (key.op == Op::swiglu_quantize) name += fmt::format("_interleave{}", spec.swiglu_interleave);
  if (key.op == Op::mhc_rmsnorm_quantize) name += fmt::format("_hc{}", spec.mhc_streams);
  if (spec.norm_weight_dtype != spec.in_dtype) name += fmt::format("_w{}", dtype_name(spec.norm_weight_dtype));
  if (spec.blocks_per_cta != spec.k / 16) name += fmt::format("_blocks{}", spec.blocks_per_cta);
  if (spec.min_ctas_per_sm) name += fmt::format("_min{}", spec.min_ctas_per_sm);
  if (spec.spread > 1) name += fmt::format("_spread{}", spec.spread);
  return name;
}

nlohmann::ordered_json row_quantize_json(const KernelSpec& key) {
  const RowQuantizeSpec spec = key.as<RowQuantizeSpec>();
  nlohmann::ordered_json j{{"k", spec.k}, {"in_dtype", dtype_name(spec.in_dtype)}};
  if (normalizes(key.op)) j["norm_weight_dtype"] = dtype_name(spec.norm_weight_dtype);
  j["scale_layout"] = scale_layout_name(spec.scale_layout);
  if (key.op == Op::swiglu_quantize) j["swiglu_interleave"] = spec.swiglu_interleave;
  if (key.op == Op::mhc_rmsnorm_quantize) j["mhc_streams"] = spec.mhc_streams;
  j.update({{"blocks_per_cta", spec.blocks_per_cta}, {"threads", spec.threads}, {"spread", spec.spread},
            {"min_ctas_per_sm", spec.min_ctas_per_sm}});
  return j;
}

constexpr OpKernels kRowQuantizeKernels{.generate = generate_row_quantize, .kernel_name = row_quantize_kernel_name,
                                        .to_json = row_quantize_json};
const bool registered =
    register_op(Op::rmsnorm_quantize, kRowQuantizeKernels) && register_op(Op::swiglu_quantize, kRowQuantizeKernels) &&
    register_op(Op::moe_stage, kRowQuantizeKernels) && register_op(Op::mhc_rmsnorm_quantize, kRowQuantizeKernels) &&
    register_prewarm(40, [](Arch arch, const WeightShape& shape, int) { return row_quantize_prewarm_specs(arch, shape); });

}  // namespace

GeneratedKernel generate_row_quantize(const KernelSpec& key) {
  const RowQuantizeSpec spec = key.as<RowQuantizeSpec>();
  return entry_point(key, spec.threads * spec.spread, row_quantize_kernel_name(key), "row_quantize.cuh", "RowQuantizeParams",
                     fmt::format("nvfp4k::row_quantize<{}, {}, {}, {}LL, {}LL, {}, {}, {}, {}LL, {}>(p)", row_prologue(key.op),
                                 int(spec.in_dtype), int(spec.norm_weight_dtype), spec.k, spec.swiglu_interleave,
                                 spec.mhc_streams, int(spec.scale_layout), spec.threads, spec.blocks_per_cta, spec.spread),
                     spec.min_ctas_per_sm);
}

std::vector<KernelSpec> row_quantize_prewarm_specs(Arch arch, const WeightShape& shape) {
  std::vector<KernelSpec> specs;
  const int64_t k = shape.k;
  if (k <= 0 || k % 16 || k > kRowQuantizeMaxK) return specs;
  const PrewarmVariants& v = shape.variants;
  for (DType in : v.in_dtypes.empty() ? std::vector<DType>{DType::bf16} : v.in_dtypes) {
    if (in == DType::fp32 && k > kRowQuantizeMaxKFp32) continue;
    for (ScaleLayout layout : {ScaleLayout::linear, ScaleLayout::swizzled128x4}) {
      RowKernel kernel;
      kernel.k = k, kernel.layout = layout, kernel.in = in, kernel.weight = in;
      // RMSNorm and mHC: for many rows and for few (row_shape), where the two differ
      auto push_rows_both_ways = [&](RowKernel rows_kernel) {
        specs.push_back(row_quantize_spec(arch, rows_kernel));
        rows_kernel.few_rows = true;
        if (const KernelSpec few = row_quantize_spec(arch, rows_kernel); !(few == specs.back())) specs.push_back(few);
      };
      // the norm weight's dtypes a variant names, or the op's usual one
      auto norm_weights = [&](Op op) {
        std::vector<DType> dtypes;
        for (NormWeight w : v.norm_weights.empty() ? std::vector<NormWeight>{usual_norm_weight(op)} : v.norm_weights) {
          const DType dtype = norm_weight_dtype(w, in);  // (fp32 input: one dtype either way)
          if (std::find(dtypes.begin(), dtypes.end(), dtype) == dtypes.end()) dtypes.push_back(dtype);
        }
        return dtypes;
      };
      kernel.op = Op::rmsnorm_quantize;
      if (v.writes_a(AFrom::rmsnorm))
        for (DType weight : norm_weights(kernel.op)) kernel.weight = weight, push_rows_both_ways(kernel);
      kernel.weight = in;
      for (auto [op, from] : {std::pair{Op::swiglu_quantize, AFrom::swiglu}, std::pair{Op::moe_stage, AFrom::moe_stage}}) {
        if (!v.writes_a(from) || (op == Op::moe_stage && shape.groups <= 1)) continue;
        kernel.op = op;
        for (bool whole_rows : {true, false}) {
          kernel.whole_rows = whole_rows;
          push_rows_both_ways(kernel);
        }
      }
      kernel.op = Op::mhc_rmsnorm_quantize, kernel.n_hc = 4, kernel.whole_rows = true;
      if (v.writes_a(AFrom::mhc) && 4 * k * element_bytes(in) <= kMhcMaxRowBytes)
        for (DType weight : norm_weights(kernel.op)) kernel.weight = weight, push_rows_both_ways(kernel);
    }
  }
  return specs;
}

}  // namespace nvfp4::jit::detail
