#include "ops/gemm/launch.hpp"

#include <cstring>

#include <fmt/format.h>

namespace nvfp4::jit::detail {

std::string gemm_prewarm_hint(const GemmArgs& args, int32_t groups, const DeviceInfo& device) {
  return fmt::format("nvfp4-jit prewarm --shape {},{}{} --arch {} --sms {}", args.n, args.k,
                     groups > 1 ? fmt::format(",{}", groups) : "", to_string(device.arch), device.sm_count);
}

GemmKernel load_gemm_kernel(const DeviceInfo& device, const GemmBackend& backend, const KernelSpec& spec, int64_t m,
                            CUstream stream, const GemmCall& call) {
  GemmKernel kernel;
  kernel.backend = &backend;
  kernel.spec = spec;
  kernel.function = kernel_for(device, spec, backend.shared_bytes(spec), stream,
                               [&] { return gemm_prewarm_hint(call.args, call.groups, device); });
  kernel.plan = backend.plan(spec, m, device.sm_count);
  return kernel;
}

void launch_gemm(const GemmKernel& kernel, const GemmCall& call, CUstream stream) {
  alignas(64) unsigned char params[GemmPlan::kMaxParamBytes];
  std::memcpy(params, kernel.plan.params, sizeof params);
  kernel.backend->bind(kernel.spec, call, params);
  LaunchShape shape = kernel.plan.shape;
  shape.programmatic = call.args.weights_static && kernel.plan.early_launch;
  void* args[] = {params};
  launch(kernel.function, shape, stream, args);
}

}  // namespace nvfp4::jit::detail
