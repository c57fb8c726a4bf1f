#include "ops/gemm/spec_codes.hpp"

#include <fmt/format.h>

#include "common/scale_layout.cuh"
#include "common/tile_scheduler.cuh"
#include "ops/gemm/call.hpp"

namespace nvfp4::jit::detail {

uint8_t gemm_bias_code(const GemmSpec& spec) {
  return spec.flags & kFlagBiasBf16 ? nvfp4k::BIAS_BF16 : spec.flags & kFlagBiasFp32 ? nvfp4k::BIAS_FP32 : nvfp4k::BIAS_NONE;
}

uint8_t gemm_epilogue_code(const GemmSpec& spec) {
  return spec.flags & kFlagEpilogueSwiglu        ? nvfp4k::EPILOGUE_SWIGLU
         : spec.flags & kFlagEpilogueMoeCombine ? nvfp4k::EPILOGUE_MOE_COMBINE
                                                 : nvfp4k::EPILOGUE_NONE;
}

const char* epilogue_name(const GemmSpec& spec) {
  switch (gemm_epilogue_code(spec)) {
    case nvfp4k::EPILOGUE_SWIGLU: return "_swiglu";
    case nvfp4k::EPILOGUE_MOE_COMBINE: return "_combine";
    default: return "";
  }
}

int gemm_a_rmsnorm_code(const GemmSpec& spec) {
  return spec.flags & kFlagARmsNormFp32 ? nvfp4k::A_RMSNORM_FP32
         : spec.flags & kFlagARmsNorm   ? nvfp4k::A_RMSNORM_16BIT
                                        : nvfp4k::A_RMSNORM_NONE;
}

const char* a_rmsnorm_name(const GemmSpec& spec) {
  switch (gemm_a_rmsnorm_code(spec)) {
    case nvfp4k::A_RMSNORM_16BIT: return "_rmsnorm";
    case nvfp4k::A_RMSNORM_FP32: return "_rmsnormf32";
    default: return "";
  }
}

int gemm_a_scale_layout(const GemmSpec& spec) {
  return spec.flags & kFlagAScalesSwizzled ? nvfp4k::SCALES_SWIZZLED128X4 : nvfp4k::SCALES_LINEAR;
}

const char* scale_layout_name(int code) {
  return code == nvfp4k::SCALES_SWIZZLED128X4 ? "sw128x4" : code == nvfp4k::SCALES_PREPACKED ? "prepacked" : "linear";
}

const char* bias_name(const GemmSpec& spec) {
  const uint8_t bias = gemm_bias_code(spec);
  return bias == nvfp4k::BIAS_BF16 ? "_biasbf16" : bias == nvfp4k::BIAS_FP32 ? "_biasfp32" : "";
}

std::string grouped_name(const GemmSpec& spec) {
  switch (gemm_problem_grouped(spec)) {
    case nvfp4k::GROUPED_NONE: return "";
    case nvfp4k::GROUPED_MASKED: return fmt::format("masked{}_", spec.groups);
    case nvfp4k::GROUPED_BATCHED: return fmt::format("batched{}_", spec.groups);
    default: return fmt::format("grouped{}_", spec.groups);
  }
}

}  // namespace nvfp4::jit::detail
