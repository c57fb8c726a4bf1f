#include "ops/gemm/gather_rows_op.hpp"

#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/params.cuh"
#include "core/op_registry.hpp"
#include "ops/spec_names.hpp"

namespace nvfp4::jit::detail {

namespace {

constexpr int kThreads = 256;

std::string gather_rows_kernel_name(const KernelSpec& key) {
  const GatherRowsSpec spec = key.as<GatherRowsSpec>();
  return fmt::format("nvfp4_gather_rows_k{}_{}", spec.k, dtype_name(spec.a_dtype));
}

nlohmann::ordered_json gather_rows_json(const KernelSpec& key) {
  const GatherRowsSpec spec = key.as<GatherRowsSpec>();
  return {{"k", spec.k}, {"a_dtype", dtype_name(uint8_t(spec.a_dtype))}, {"threads", spec.threads}};
}

// sm_90a's W4A16 grouped GEMM runs it (the other archs refuse W4A16); a prewarm builds it with
// the grouped W4A16 kernels (prewarm.cpp's variants).
const bool registered = register_op(Op::gather_rows, {.generate = generate_gather_rows,
                                                      .kernel_name = gather_rows_kernel_name,
                                                      .to_json = gather_rows_json});

}  // namespace

KernelSpec gather_rows_spec(Arch arch, int64_t k, DType a_dtype) {
  return KernelSpec::of(arch, GatherRowsSpec{k, a_dtype, kThreads});
}

GeneratedKernel generate_gather_rows(const KernelSpec& key) {
  const GatherRowsSpec spec = key.as<GatherRowsSpec>();
  return entry_point(key, spec.threads, gather_rows_kernel_name(key), "gather_rows.cuh", "GatherRowsParams",
                     fmt::format("nvfp4k::gather_rows<{}, {}LL, {}>(p)", int(spec.a_dtype), spec.k, spec.threads));
}

void launch_gather_rows(CUfunction function, const void* a, int64_t a_stride, int64_t a_rows, const int32_t* row_index,
                        int64_t rows, void* out, CUstream stream) {
  nvfp4k::GatherRowsParams p{a, a_stride, a_rows, row_index, out};
  void* params[] = {&p};
  LaunchShape shape;
  shape.grid[0] = unsigned(rows);
  shape.block[0] = kThreads;
  launch(function, shape, stream, params);
}

}  // namespace nvfp4::jit::detail
