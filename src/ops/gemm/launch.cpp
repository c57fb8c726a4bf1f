#include "ops/gemm/launch.hpp"

#include <cstring>

#include <fmt/format.h>

namespace nvfp4::jit::detail {

std::string gemm_prewarm_hint(const GemmArgs& args, Arch arch) {
  return fmt::format("nvfp4-jit prewarm --shape {},{} --arch {}", args.n, args.k, to_string(arch));
}

GemmKernel load_gemm_kernel(const DeviceInfo& device, const GemmBackend& backend, const KernelSpec& spec, int64_t m,
                            CUstream stream, const GemmArgs& args) {
  GemmKernel kernel;
  kernel.backend = &backend;
  kernel.spec = spec;
  kernel.function = kernel_for(device, spec, backend.shared_bytes(spec), stream,
                               [&] { return gemm_prewarm_hint(args, device.arch); });
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
