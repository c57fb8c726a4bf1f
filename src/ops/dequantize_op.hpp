// Dequantize: NVFP4 [rows, K] -> BF16 / FP16 / FP32, full or gathered by row indices.
#pragma once
#include <vector>

#include "core/codegen.hpp"
#include <tuple>

#include "core/spec.hpp"
#include "nvfp4/jit.hpp"

namespace nvfp4::jit::detail {

// What a dequantize kernel compiles in.
struct DequantizeSpec {
  static constexpr Op kOp = Op::dequantize;
  static constexpr std::string_view kName = "DequantizeSpec";
  static constexpr bool serves(Op op) { return op == kOp; }
  int64_t k = 0;
  DType out_dtype = DType::bf16;
  ScaleLayout scale_layout = ScaleLayout::linear;
  int threads = 0;
  int loads_per_thread = 0;  // independent 4-byte loads in flight per thread
  template <class Self>
  static auto fields(Self& s) { return std::tie(s.k, s.out_dtype, s.scale_layout, s.threads, s.loads_per_thread); }
};

GeneratedKernel generate_dequantize(const KernelSpec& spec);
KernelSpec dequantize_spec(Arch arch, int64_t k, DType out, ScaleLayout layout);
// The kernels a model with reduction size `k` may ask for (every output dtype and layout).
std::vector<KernelSpec> dequantize_prewarm_specs(Arch arch, int64_t k);

}  // namespace nvfp4::jit::detail
