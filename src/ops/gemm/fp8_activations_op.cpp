#include "ops/gemm/fp8_activations_op.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/params.cuh"
#include "core/launcher.hpp"
#include "core/op_registry.hpp"
#include "ops/spec_names.hpp"

namespace nvfp4::jit::detail {

namespace {

constexpr int kThreads = 256;

std::string fp8_activations_kernel_name(const KernelSpec& key) {
  const Fp8ActivationsSpec spec = key.as<Fp8ActivationsSpec>();
  return fmt::format("nvfp4_fp8_activations_k{}_{}", spec.k, dtype_name(uint8_t(spec.a_dtype)));
}

nlohmann::ordered_json fp8_activations_json(const KernelSpec& key) {
  const Fp8ActivationsSpec spec = key.as<Fp8ActivationsSpec>();
  return {{"k", spec.k}, {"a_dtype", dtype_name(uint8_t(spec.a_dtype))}, {"threads", spec.threads}};
}

// The W4A8 mode's pass exists on sm_90a only (the other archs refuse the mode); a prewarm
// builds it with the GEMM's W4A8 kernels (prewarm.cpp's variants).
const bool registered = register_op(Op::fp8_activations, {.generate = generate_fp8_activations,
                                                         .kernel_name = fp8_activations_kernel_name,
                                                         .to_json = fp8_activations_json});

}  // namespace

KernelSpec fp8_activations_spec(Arch arch, int64_t k, DType a_dtype) {
  return KernelSpec::of(arch, Fp8ActivationsSpec{k, a_dtype, kThreads});
}

GeneratedKernel generate_fp8_activations(const KernelSpec& key) {
  const Fp8ActivationsSpec spec = key.as<Fp8ActivationsSpec>();
  return entry_point(key, spec.threads, fp8_activations_kernel_name(key), "fp8_activations.cuh", "Fp8ActivationParams",
                     fmt::format("nvfp4k::fp8_activations<{}, {}LL, {}>(p)", int(spec.a_dtype), spec.k, spec.threads));
}

int64_t fp8_activation_bytes(int64_t rows, int64_t k) { return fp8_row_scales_offset(rows, k) + rows * 4; }

void launch_fp8_activations(CUfunction function, const void* a, int64_t a_stride, const Fp8ActivationRows& rows, int64_t k,
                            void* workspace, CUstream stream) {
  auto* out = static_cast<unsigned char*>(workspace);
  nvfp4k::Fp8ActivationParams p{a,
                                a_stride,
                                out,
                                reinterpret_cast<float*>(out + fp8_row_scales_offset(rows.rows, k)),
                                rows.rows,
                                rows.row_index,
                                rows.a_rows,
                                rows.group_rows,
                                rows.group_stride};
  void* params[] = {&p};
  LaunchShape shape;
  shape.grid[0] = unsigned(rows.rows);
  shape.block[0] = kThreads;
  launch(function, shape, stream, params);
}

}  // namespace nvfp4::jit::detail
