#include "ops/gemm/prewarm_variants.hpp"

#include <fmt/format.h>

namespace nvfp4::jit::detail {

std::string prewarm_variant_flags(const GemmVariant& v, bool grouped) {
  std::string flags = fmt::format(" --a-dtype {} --d-dtype {} --bias {} --b-layout {}", variant_name(v.a),
                                  variant_name(v.d), bias_variant_name(v.bias), variant_name(v.b));
  if (v.a == DType::nvfp4) flags += fmt::format(" --a-scales {}", variant_name(v.a_scales));
  if (grouped) flags += fmt::format(" --grouped {}", variant_name(v.grouped));
  if (v.epilogue != GemmEpilogue::none) flags += fmt::format(" --epilogue {}", variant_name(v.epilogue));
  if (v.precision != GemmPrecision::exact) flags += fmt::format(" --precision {}", variant_name(v.precision));
  if (v.a_rmsnorm != GemmARmsNorm::none) flags += fmt::format(" --a-rmsnorm {}", variant_name(v.a_rmsnorm));
  if (v.residual != GemmResidual::none) flags += fmt::format(" --residual {}", variant_name(v.residual));
  return flags;
}

}  // namespace nvfp4::jit::detail
