// Quantize: BF16 / FP16 / FP32 [rows, K] -> NVFP4, with the global scale given or computed on
// the device (row amax kernel, then quantize; per tensor also a finalize kernel).
#pragma once
#include <vector>

#include "core/codegen.hpp"
#include <tuple>

#include "core/spec.hpp"
#include "nvfp4/jit.hpp"

namespace nvfp4::jit::detail {

// What a quantize kernel compiles in.
struct QuantizeSpec {
  static constexpr Op kOp = Op::quantize;
  static constexpr std::string_view kName = "QuantizeSpec";
  static constexpr bool serves(Op op) { return op == kOp; }
  int64_t k = 0;
  DType in_dtype = DType::bf16;
  ScaleLayout scale_layout = ScaleLayout::linear;
  int threads = 0;
  template <class Self>
  static auto fields(Self& s) { return std::tie(s.k, s.in_dtype, s.scale_layout, s.threads); }
};

// What a row amax kernel compiles in (the amax of each row, or of the tensor).
struct RowAmaxSpec {
  static constexpr Op kOp = Op::row_amax;
  static constexpr std::string_view kName = "RowAmaxSpec";
  static constexpr bool serves(Op op) { return op == kOp; }
  int64_t k = 0;
  DType in_dtype = DType::bf16;
  bool per_row = false;
  int threads = 0;
  template <class Self>
  static auto fields(Self& s) { return std::tie(s.k, s.in_dtype, s.per_row, s.threads); }
};

// What the kernel that turns a tensor's amax into its global scale compiles in.
struct AmaxFinalizeSpec {
  static constexpr Op kOp = Op::amax_finalize;
  static constexpr std::string_view kName = "AmaxFinalizeSpec";
  static constexpr bool serves(Op op) { return op == kOp; }
  int threads = 0;
  template <class Self>
  static auto fields(Self& s) { return std::tie(s.threads); }
};

KernelSpec quantize_spec(Arch arch, int64_t k, DType in, ScaleLayout layout);
KernelSpec row_amax_spec(Arch arch, int64_t k, DType in, bool per_row);
KernelSpec amax_finalize_spec(Arch arch);
GeneratedKernel generate_quantize(const KernelSpec& spec);
GeneratedKernel generate_amax(const KernelSpec& spec);  // row_amax and amax_finalize
// Element `index` of a host BF16 / FP16 / FP32 array, as float (CPU references).
float host_value(const void* base, DType dtype, int64_t index);
// Stores `v` rounded to `dtype` (round to nearest even, as the kernels' conversions).
void store_host_value(void* base, DType dtype, int64_t index, float v);
// The kernels activations of reduction size `k` may need (inputs of `in_dtypes`, or BF16 and
// FP16 when empty; both layouts; amax).
std::vector<KernelSpec> quantize_prewarm_specs(Arch arch, int64_t k, const std::vector<DType>& in_dtypes = {});

}  // namespace nvfp4::jit::detail
