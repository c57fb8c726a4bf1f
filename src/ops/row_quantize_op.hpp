// Fused quantizers: RMSNorm + quantize, SwiGLU + quantize, MoE staging, mHC + RMSNorm +
// quantize. templates/row_quantize.cuh holds the kernel; this file its specs, checks, launch and
// the CPU reference with the kernel's exact bits.
#pragma once
#include <string_view>
#include <tuple>
#include <vector>

#include "core/codegen.hpp"
#include "core/manifest.hpp"
#include "core/spec.hpp"
#include "nvfp4/jit.hpp"

namespace nvfp4::jit::detail {

// What a fused quantizer's kernel is compiled for.
struct RowKernel {
  Op op = Op::moe_stage;  // rmsnorm_quantize, swiglu_quantize, moe_stage or mhc_rmsnorm_quantize
  int64_t k = 0;
  DType in = DType::bf16;
  DType weight = DType::bf16;  // RMSNorm's weight: in, or fp32
  ScaleLayout layout = ScaleLayout::linear;
  int64_t group = 0;           // SwiGLU's interleave group (0: the two halves)
  int n_hc = 0;                // mHC streams
  bool whole_rows = true;      // false: slices of rows (no RMSNorm, global scale not computed)
  bool few_rows = false;       // rows that leave SMs idle: each thread's work goes to two (row_shape)
};

// What a fused quantizer's kernel compiles in (RowKernel's choices, resolved to a row plan).
struct RowQuantizeSpec {
  static constexpr std::string_view kName = "RowQuantizeSpec";
  static constexpr bool serves(Op op) {
    return op == Op::rmsnorm_quantize || op == Op::swiglu_quantize || op == Op::moe_stage || op == Op::mhc_rmsnorm_quantize;
  }
  int64_t k = 0;
  DType in_dtype = DType::bf16;
  DType norm_weight_dtype = DType::bf16;  // RMSNorm's weight; in_dtype for the ops without one
  ScaleLayout scale_layout = ScaleLayout::linear;
  int64_t swiglu_interleave = 1;  // SwiGLU: gate values before their up values (k: the two halves); 1 otherwise
  int mhc_streams = 0;             // mHC: streams a row; 0 otherwise
  int blocks_per_cta = 0;          // 16-value blocks of a row one CTA quantizes (k / 16: whole rows)
  int threads = 0;                 // threads the row's reduction runs on, in their order
  int spread = 1;                  // CTA threads per reduction thread after the reduction (the CTA: threads * spread)
  int min_ctas_per_sm = 0;         // the launch bounds' CTAs an SM must hold at once (0: none asked)
  template <class Self>
  static auto fields(Self& s) {
    return std::tie(s.k, s.in_dtype, s.norm_weight_dtype, s.scale_layout, s.swiglu_interleave, s.mhc_streams, s.blocks_per_cta,
                    s.threads, s.spread, s.min_ctas_per_sm);
  }
};

KernelSpec row_quantize_spec(Arch arch, const RowKernel& kernel);
// Whether `rows` rows are few on a GPU of `sm_count` SMs (RowKernel::few_rows).
inline bool row_quantize_few_rows(int64_t rows, int sm_count) { return rows <= sm_count; }
// Whole rows of bf16 weights, as before the slices existed.
KernelSpec row_quantize_spec(Op op, Arch arch, int64_t k, DType in, ScaleLayout layout, int64_t group = 0);
GeneratedKernel generate_row_quantize(const KernelSpec& spec);
// The fused quantizers that write a weight's activations (`shape.variants.a_from`), rows of its
// K, inputs of `in_dtypes` (empty: BF16), both scale layouts: RMSNorm (its weight in the input's
// dtype), SwiGLU (two halves; sliced for a given global scale, whole rows for a computed one),
// mHC of four streams with an fp32 weight; for a grouped weight, the MoE staging of tokens
// (sliced and whole rows).
std::vector<KernelSpec> row_quantize_prewarm_specs(Arch arch, const WeightShape& shape);

}  // namespace nvfp4::jit::detail
