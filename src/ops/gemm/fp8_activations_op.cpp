#include "ops/gemm/fp8_activations_op.hpp"

#include <string>

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
  const std::string scales = spec.a_dtype == DType::nvfp4 ? fmt::format("_{}", scale_layout_name(spec.a_scales)) : "";
  return fmt::format("nvfp4_fp8_activations_k{}_{}{}", spec.k, dtype_name(spec.a_dtype), scales);
}

nlohmann::ordered_json fp8_activations_json(const KernelSpec& key) {
  const Fp8ActivationsSpec spec = key.as<Fp8ActivationsSpec>();
  nlohmann::ordered_json j = {{"k", spec.k}, {"a_dtype", dtype_name(uint8_t(spec.a_dtype))}, {"threads", spec.threads}};
  if (spec.a_dtype == DType::nvfp4) j["a_scales"] = scale_layout_name(spec.a_scales);
  return j;
}

// The W4A8 mode's pass exists on sm_90a only (the other archs refuse the mode); a prewarm
// builds it with the GEMM's W4A8 kernels (prewarm.cpp's variants), NVFP4 A's per scale layout.
const bool registered = register_op(Op::fp8_activations, {.generate = generate_fp8_activations,
                                                         .kernel_name = fp8_activations_kernel_name,
                                                         .to_json = fp8_activations_json});

}  // namespace

KernelSpec fp8_activations_spec(Arch arch, int64_t k, DType a_dtype, ScaleLayout a_scales) {
  // (a 16-bit A has no scales: one kernel whatever the caller's layout field holds)
  return KernelSpec::of(arch, Fp8ActivationsSpec{k, a_dtype, kThreads, a_dtype == DType::nvfp4 ? a_scales : ScaleLayout::linear});
}

GeneratedKernel generate_fp8_activations(const KernelSpec& key) {
  const Fp8ActivationsSpec spec = key.as<Fp8ActivationsSpec>();
  const std::string call =
      spec.a_dtype == DType::nvfp4
          ? fmt::format("nvfp4k::fp8_activations_nvfp4<{}LL, {}, {}>(p)", spec.k, int(spec.a_scales), spec.threads)
          : fmt::format("nvfp4k::fp8_activations<{}, {}LL, {}>(p)", int(spec.a_dtype), spec.k, spec.threads);
  return entry_point(key, spec.threads, fp8_activations_kernel_name(key), "fp8_activations.cuh", "Fp8ActivationParams", call);
}

int64_t fp8_activation_bytes(int64_t rows, int64_t k) { return fp8_row_scales_offset(rows, k) + rows * 4; }

namespace {

// `p` (its source fields set) for `rows` into `workspace`: the E4M3 rows, then their scales.
void launch_pass(CUfunction function, nvfp4k::Fp8ActivationParams p, const Fp8ActivationRows& rows, int64_t k,
                 void* workspace, CUstream stream) {
  auto* out = static_cast<unsigned char*>(workspace);
  p.out = out;
  p.row_scales = reinterpret_cast<float*>(out + fp8_row_scales_offset(rows.rows, k));
  p.rows = rows.rows;
  p.row_index = rows.row_index;
  p.a_rows = rows.a_rows;
  p.group_rows = rows.group_rows;
  p.group_stride = rows.group_stride;
  p.group_ends = rows.group_ends;
  p.groups = rows.groups;
  void* params[] = {&p};
  LaunchShape shape;
  shape.grid[0] = unsigned(rows.rows);
  shape.block[0] = kThreads;
  launch(function, shape, stream, params);
}

}  // namespace

void launch_fp8_activations(CUfunction function, const void* a, int64_t a_stride, const Fp8ActivationRows& rows, int64_t k,
                            void* workspace, CUstream stream) {
  nvfp4k::Fp8ActivationParams p{};
  p.a = a;
  p.a_stride = a_stride;
  launch_pass(function, p, rows, k, workspace, stream);
}

void launch_fp8_activations(CUfunction function, const Nvfp4Tensor& a, int gscale_mode, const Fp8ActivationRows& rows,
                            int64_t k, void* workspace, CUstream stream) {
  nvfp4k::Fp8ActivationParams p{};
  p.a = a.data;
  p.a_stride = a.row_stride_bytes ? a.row_stride_bytes : k / 2;
  p.a_scales = static_cast<const unsigned char*>(a.scales);
  p.gscale_ptr = a.global_scale.device_ptr;
  p.gscale_value = a.global_scale.value;
  p.gscale_mode = gscale_mode;
  launch_pass(function, p, rows, k, workspace, stream);
}

}  // namespace nvfp4::jit::detail
