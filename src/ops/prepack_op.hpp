// Prepack: a ModelOpt weight rewritten in the sm_90a GEMM's own layout (prepacked_weight.cuh).
#pragma once
#include <string_view>
#include <tuple>

#include "core/codegen.hpp"
#include "core/spec.hpp"
#include "nvfp4/jit.hpp"

namespace nvfp4::jit::detail {

// What a prepack kernel compiles in.
struct PrepackSpec {
  static constexpr Op kOp = Op::prepack;
  static constexpr std::string_view kName = "PrepackSpec";
  static constexpr bool serves(Op op) { return op == kOp; }
  int64_t k = 0;
  ScaleLayout src_scale_layout = ScaleLayout::linear;  // the source weight's
  int threads = 0;
  template <class Self>
  static auto fields(Self& s) { return std::tie(s.k, s.src_scale_layout, s.threads); }
};

// `layout`: the source weight's scale layout.
KernelSpec prepack_spec(Arch arch, int64_t k, ScaleLayout layout);
GeneratedKernel generate_prepack(const KernelSpec& spec);

}  // namespace nvfp4::jit::detail
