// Scale-layout conversion: E4M3 block scales from one layout to another (prepack step).
#pragma once
#include <string_view>
#include <tuple>

#include "core/codegen.hpp"
#include "core/spec.hpp"
#include "nvfp4/jit.hpp"

namespace nvfp4::jit::detail {

// What a scale-layout conversion kernel compiles in.
struct ConvertScalesSpec {
  static constexpr Op kOp = Op::convert_scales;
  static constexpr std::string_view kName = "ConvertScalesSpec";
  static constexpr bool serves(Op op) { return op == kOp; }
  int64_t k = 0;
  ScaleLayout src_layout = ScaleLayout::linear;
  ScaleLayout dst_layout = ScaleLayout::swizzled128x4;
  int threads = 0;
  template <class Self>
  static auto fields(Self& s) { return std::tie(s.k, s.src_layout, s.dst_layout, s.threads); }
};

KernelSpec convert_scales_spec(Arch arch, int64_t k, ScaleLayout src, ScaleLayout dst);
GeneratedKernel generate_convert_scales(const KernelSpec& spec);

}  // namespace nvfp4::jit::detail
