// What a GEMM kernel spec compiles in, as the kernels' parameter codes and the parts of kernel
// names every backend spells alike.
#pragma once
#include <cuda.h>

#include <cstdint>
#include <string>

#include "common/params.cuh"
#include "ops/gemm/gemm_spec.hpp"

namespace nvfp4::jit::detail {

// nvfp4k::BiasCode of the spec's bias.
uint8_t gemm_bias_code(const GemmSpec& spec);
// nvfp4k::GemmEpilogueCode of the spec's epilogue.
uint8_t gemm_epilogue_code(const GemmSpec& spec);
// The epilogue's part of a kernel name: "", "_swiglu" or "_combine".
const char* epilogue_name(const GemmSpec& spec);
// nvfp4k::ARmsNormCode of the spec's RMSNorm of A, and its part of a kernel name: "",
// "_rmsnorm" or "_rmsnormf32".
int gemm_a_rmsnorm_code(const GemmSpec& spec);
const char* a_rmsnorm_name(const GemmSpec& spec);
// Whether the spec adds a residual in the epilogue.
inline bool gemm_residual(const GemmSpec& spec) { return spec.flags & kFlagResidual; }
// nvfp4k::ScaleLayoutCode of A's scales (W4A4 problems).
int gemm_a_scale_layout(const GemmSpec& spec);
// "linear", "sw128x4" or "prepacked" for a ScaleLayoutCode.
const char* scale_layout_name(int code);
// The bias's part of a kernel name: "", "_biasbf16" or "_biasfp32".
const char* bias_name(const GemmSpec& spec);
// The grouped layout's part of a kernel name: "", "grouped<G>_", "masked<G>_" or "batched<G>_".
std::string grouped_name(const GemmSpec& spec);
// A parameter block's opaque descriptor holds a CUtensorMap (a launch's TensorMapList writes it).
static_assert(sizeof(nvfp4k::TmaDescriptor) == sizeof(CUtensorMap));

}  // namespace nvfp4::jit::detail
