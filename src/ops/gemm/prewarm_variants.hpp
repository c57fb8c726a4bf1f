// One GEMM call's variant in the prewarm vocabulary (core/prewarm_variants.hpp): the combination
// of a shape's variant lists a prewarm compiles one problem for, and the prewarm flags that
// select exactly it (a call's missing-kernel message names them).
#pragma once
#include <cstdint>
#include <string>

#include "core/prewarm_variants.hpp"

namespace nvfp4::jit::detail {

struct GemmVariant {
  DType a = DType::bf16, d = DType::bf16;
  uint8_t bias = kNoDType;
  WeightLayout b = WeightLayout::linear;
  ScaleLayout a_scales = ScaleLayout::linear;
  GroupedLayout grouped = GroupedLayout::contiguous;
  GemmEpilogue epilogue = GemmEpilogue::none;
  GemmPrecision precision = GemmPrecision::exact;
  GemmARmsNorm a_rmsnorm = GemmARmsNorm::none;
  GemmResidual residual = GemmResidual::none;
};

// " --a-dtype fp16 --d-dtype fp32 --bias none --b-layout linear", with --a-scales for W4A4,
// --grouped for a grouped weight, --epilogue for a fused one, --precision w4a8 for the W4A8
// mode, --a-rmsnorm for RMSNorm of A in the GEMM and --residual for the residual add.
std::string prewarm_variant_flags(const GemmVariant& v, bool grouped);

}  // namespace nvfp4::jit::detail
