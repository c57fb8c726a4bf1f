#include "ops/gemm/launch.hpp"

#include <cstring>

#include <fmt/format.h>

#include "ops/gemm/fp8_activations_op.hpp"
#include "ops/gemm/gather_rows_op.hpp"
#include "ops/gemm/prewarm_variants.hpp"

namespace nvfp4::jit::detail {

std::string gemm_prewarm_hint(const GemmCall& call, const DeviceInfo& device) {
  const GemmArgs& args = call.args;
  GemmVariant v;
  v.a = args.a_dtype, v.d = args.d_dtype, v.bias = args.bias ? uint8_t(args.bias_dtype) : kNoDType;
  v.b = args.b_prepacked ? WeightLayout::prepacked
        : args.b.scale_layout == ScaleLayout::swizzled128x4 ? WeightLayout::swizzled : WeightLayout::linear;
  v.a_scales = args.a_fp4.scale_layout, v.grouped = call.layout, v.epilogue = args.epilogue;
  v.precision = args.precision;
  v.a_rmsnorm = !args.a_rmsnorm_weight        ? GemmARmsNorm::none
                : args.a_rmsnorm_weight_fp32 ? GemmARmsNorm::fp32
                                             : GemmARmsNorm::input;
  v.residual = args.residual ? GemmResidual::add : GemmResidual::none;
  const bool grouped = call.groups > 0;
  return fmt::format("nvfp4-jit prewarm --shape {},{}{} --arch {} --sms {}{}", args.n, args.k,
                     grouped ? fmt::format(",{}", call.groups) : "", to_string(device.arch), device.sm_count,
                     prewarm_variant_flags(v, grouped));
}

GemmKernel load_gemm_kernel(const DeviceInfo& device, const GemmBackend& backend, const GemmSpec& spec, int64_t m,
                            CUstream stream, const GemmCall& call) {
  GemmKernel kernel;
  kernel.backend = &backend;
  kernel.spec = spec;
  kernel.function = kernel_for(device, gemm_key(backend.kernel_spec(spec)), stream,
                               [&] { return gemm_prewarm_hint(call, device); });
  kernel.plan = backend.plan(spec, m, device.sm_count);
  return kernel;
}

GemmKernel with_activation_pass(GemmKernel kernel, const DeviceInfo& device, const GemmCall& call, CUstream stream) {
  const GemmArgs& args = call.args;
  const auto hint = [&] { return gemm_prewarm_hint(call, device); };
  if (args.precision == GemmPrecision::w4a8) {
    kernel.activations = kernel_for(device, fp8_activations_spec(device.arch, args.k, args.a_dtype, args.a_fp4.scale_layout), stream, hint);
  } else if (gathers_rows_first(call)) {
    kernel.activations = kernel_for(device, gather_rows_spec(device.arch, args.k, args.a_dtype), stream, hint);
    kernel.gathers_a = true;
  }
  return kernel;
}

void launch_gemm(const GemmKernel& kernel, const GemmCall& call, CUstream stream) {
  alignas(64) unsigned char params[GemmPlan::kMaxParamBytes];
  std::memcpy(params, kernel.plan.params, sizeof params);
  TensorMapList maps;
  kernel.backend->bind(kernel.plan, call, params, maps);
  LaunchShape shape = kernel.plan.shape;
  shape.programmatic = call.args.weights_static && kernel.plan.early_launch;
  void* args[] = {params};
  launch(kernel.function, shape, stream, args, maps);
}

}  // namespace nvfp4::jit::detail
