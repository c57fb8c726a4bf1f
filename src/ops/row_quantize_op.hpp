// Fused quantizers: RMSNorm + quantize, SwiGLU + quantize, MoE staging, mHC + RMSNorm +
// quantize. templates/row_quantize.cuh holds the kernel; this file its specs, checks, launch and
// the CPU reference with the kernel's exact bits.
#pragma once
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
