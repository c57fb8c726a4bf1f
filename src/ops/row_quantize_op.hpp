// Fused quantizers: RMSNorm + quantize, SwiGLU + quantize, MoE staging, mHC + RMSNorm +
// quantize. templates/row_quantize.cuh holds their one kernel; this file its spec, how a row is
// spread over a CTA, and the kernels prewarm compiles. Running them: row_quantize_run.hpp; each
// op's arguments and entry points: <op>_op.cpp.
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
  int64_t interleave = 0;      // SwiGLU's gate values before their up values (0: the two halves)
  int n_hc = 0;                // mHC streams
  bool whole_rows = true;      // false: rows in parts of blocks_per_cta blocks (no RMSNorm, global scale not computed)
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
// Whole rows, the norm weight (if any) in the input's dtype.
KernelSpec row_quantize_spec(Op op, Arch arch, int64_t k, DType in, ScaleLayout layout, int64_t interleave = 0);
GeneratedKernel generate_row_quantize(const KernelSpec& spec);
// The fused quantizers that write a weight's activations (`shape.variants.a_from`), rows of its
// K, inputs of `in_dtypes` (empty: BF16), both scale layouts: RMSNorm (its weight in the input's
// dtype), SwiGLU (two halves; rows in parts for a given global scale, whole rows for a computed
// one), mHC of four streams with an fp32 weight; for a grouped weight, the MoE staging of tokens
// (in parts and whole rows).
std::vector<KernelSpec> row_quantize_prewarm_specs(Arch arch, const WeightShape& shape);

// At 1024 threads a thread holds up to 4 blocks of 16 in registers: packed 16-bit values up
// to 65536, fp32 values up to 32768 (2 blocks) without spilling. mHC holds a block's n_hc
// streams too: up to 128 KiB of them a row.
inline constexpr int64_t kRowQuantizeMaxK = 65536, kRowQuantizeMaxKFp32 = 32768, kMhcMaxRowBytes = 131072;

// Whether the op normalizes its rows (RMSNorm, mHC).
constexpr bool normalizes(Op op) { return op == Op::rmsnorm_quantize || op == Op::mhc_rmsnorm_quantize; }

// The norm weight a normalizing op usually takes (what prewarm compiles unless told, and what
// its hint leaves unnamed): RMSNorm's in the input's dtype, mHC's in fp32 (as DeepSeek-V4 keeps
// it); and a norm weight's dtype on input of dtype `in`.
constexpr NormWeight usual_norm_weight(Op op) { return op == Op::mhc_rmsnorm_quantize ? NormWeight::fp32 : NormWeight::input; }
constexpr DType norm_weight_dtype(NormWeight weight, DType in) { return weight == NormWeight::fp32 ? DType::fp32 : in; }

// How a row is spread: `threads` a CTA, each work item `blocks_per_cta` blocks of 16 (a whole row
// or a part of one); `min_ctas` an SM the registers must leave room for (0: as ptxas likes).
// `spread` threads share each thread's blocks after the reduction, whose order stays `threads`'
// (row_quantize.cuh): the CTA has threads * spread threads.
struct RowShape {
  int threads;
  int64_t blocks_per_cta;
  int min_ctas = 0;
  int spread = 1;
};
RowShape row_shape(const RowKernel& kernel);

// The kernel's prologue (common/params.cuh's ROW_*) for `op`.
int row_prologue(Op op);

}  // namespace nvfp4::jit::detail
