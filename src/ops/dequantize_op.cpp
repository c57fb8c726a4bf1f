#include "ops/dequantize_op.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <nlohmann/json.hpp>

#include "core/op_registry.hpp"
#include "common/nvfp4_format.cuh"
#include "common/params.cuh"
#include "common/scale_layout.cuh"
#include "core/error.hpp"
#include "core/launcher.hpp"
#include "ops/spec_names.hpp"
#include "ops/validate.hpp"

namespace nvfp4::jit::detail {

static_assert(int(DType::bf16) == nvfp4k::DTYPE_BF16 && int(DType::fp16) == nvfp4k::DTYPE_FP16 &&
              int(DType::fp32) == nvfp4k::DTYPE_FP32);
static_assert(int(ScaleLayout::linear) == nvfp4k::SCALES_LINEAR &&
              int(ScaleLayout::swizzled128x4) == nvfp4k::SCALES_SWIZZLED128X4);

namespace {

constexpr int kThreads = 256;
constexpr int kLoadsPerThread = 4;  // independent 4-byte loads in flight per thread
constexpr const char* kWho = "nvfp4::jit::dequantize";

// The checks shared by the GPU entry point and the CPU reference.
struct Resolved {
  int64_t rows, packed_stride, out_stride;
  int gscale_mode;
};

Resolved resolve(const DequantizeArgs& a) {
  Check check(kWho);
  check.positive_multiple("k", a.k, 16, "the NVFP4 block size");
  check.not_negative("src_rows", a.src_rows);
  check.not_negative("rows", a.rows);
  check.dtype_in("out_dtype", a.out_dtype, {DType::bf16, DType::fp16, DType::fp32});
  check.scale_layout("src.scale_layout", a.src.scale_layout);
  Resolved r{};
  r.rows = a.row_indices ? a.rows : (a.rows ? a.rows : a.src_rows);
  if (!a.row_indices && a.rows && a.rows != a.src_rows)
    check.fail("rows", fmt::format("rows = {} differs from src_rows = {} and no row_indices are given (rows is the "
                                   "number of gathered rows)", a.rows, a.src_rows));
  r.packed_stride = a.src.row_stride_bytes ? a.src.row_stride_bytes : a.k / 2;
  r.out_stride = a.out_row_stride ? a.out_row_stride : a.k;
  if (r.packed_stride < a.k / 2)
    check.fail("src.row_stride_bytes", fmt::format("src.row_stride_bytes = {} is less than k/2 = {}", r.packed_stride, a.k / 2));
  if (r.out_stride < a.k)
    check.fail("out_row_stride", fmt::format("out_row_stride = {} is less than k = {}", r.out_stride, a.k));
  // every byte offset the kernel forms fits in 64 bits
  check.span("src.data", "src_rows", a.src_rows, "src.row_stride_bytes", r.packed_stride, 1);
  check.scale_span("src.scales", "src_rows", a.src_rows, a.k);
  check.span("out", "rows", r.rows, "out_row_stride", r.out_stride, element_bytes(a.out_dtype));
  if (r.rows > 0) {
    check.not_null("src.data", a.src.data);
    check.not_null("src.scales", a.src.scales);
    check.not_null("out", a.out);
    if (a.src_rows == 0) check.fail("src_rows", "src_rows is 0 but rows are requested");
  }
  r.gscale_mode = check.global_scale("src.global_scale", a.src.global_scale);
  return r;
}

}  // namespace

KernelSpec dequantize_spec(Arch arch, int64_t k, DType out, ScaleLayout layout) {
  return KernelSpec::of(arch, DequantizeSpec{k, out, layout, kThreads, kLoadsPerThread});
}

std::vector<KernelSpec> dequantize_prewarm_specs(Arch arch, int64_t k) {
  std::vector<KernelSpec> specs;
  if (k <= 0 || k % 16) return specs;
  for (DType out : {DType::bf16, DType::fp16, DType::fp32})
    for (ScaleLayout layout : {ScaleLayout::linear, ScaleLayout::swizzled128x4})
      specs.push_back(dequantize_spec(arch, k, out, layout));
  return specs;
}

namespace {

std::string dequantize_kernel_name(const KernelSpec& key) {
  const DequantizeSpec spec = key.as<DequantizeSpec>();
  return fmt::format("nvfp4_dequantize_k{}_{}_{}", spec.k, dtype_name(spec.out_dtype), scale_layout_name(spec.scale_layout));
}

nlohmann::ordered_json dequantize_json(const KernelSpec& key) {
  const DequantizeSpec spec = key.as<DequantizeSpec>();
  return {{"k", spec.k}, {"out_dtype", dtype_name(spec.out_dtype)}, {"scale_layout", scale_layout_name(spec.scale_layout)},
          {"threads", spec.threads}, {"loads_per_thread", spec.loads_per_thread}};
}

const bool registered =
    register_op(Op::dequantize, {.generate = generate_dequantize, .kernel_name = dequantize_kernel_name, .to_json = dequantize_json}) &&
    register_prewarm(20, [](Arch arch, const WeightShape& shape, int) { return dequantize_prewarm_specs(arch, shape.k); });

}  // namespace

GeneratedKernel generate_dequantize(const KernelSpec& key) {
  const DequantizeSpec spec = key.as<DequantizeSpec>();
  return entry_point(key, spec.threads, dequantize_kernel_name(key), "dequantize.cuh", "DequantizeParams",
                     fmt::format("nvfp4k::dequantize<{}, {}LL, {}, {}, {}>(p)", int(spec.out_dtype), spec.k,
                                 int(spec.scale_layout), spec.threads, spec.loads_per_thread));
}

}  // namespace nvfp4::jit::detail

namespace nvfp4::jit {

using namespace detail;

void dequantize(const DequantizeArgs& args, CUstream stream) {
  const Resolved r = resolve(args);
  if (r.rows == 0) return;
  Check check(kWho);
  // Each thread reads 4 packed bytes and writes 8 outputs (16 or 32 bytes) at a time.
  check.aligned("src.data", args.src.data, 4);
  if (r.packed_stride % 4)
    check.fail("src.row_stride_bytes", fmt::format("src.row_stride_bytes = {} must be a multiple of 4", r.packed_stride));
  check.aligned("out", args.out, 16);
  const int out_bytes = element_bytes(args.out_dtype);
  if (r.out_stride * out_bytes % 16)
    check.fail("out_row_stride", fmt::format("out_row_stride = {} elements is not a multiple of 16 bytes", r.out_stride));
  check.aligned("row_indices", args.row_indices, 4);
  check.aligned("src.global_scale.device_ptr", args.src.global_scale.device_ptr, 4);

  const CallDevice call_device(stream, args.out, kWho);
  const DeviceInfo& device = call_device.info;
  const KernelSpec spec = dequantize_spec(device.arch, args.k, args.out_dtype, args.src.scale_layout);
  // LOADS passes per thread where that fills the GPU twice over; a small call (decode) takes
  // more blocks and fewer passes each, so that more SMs wait on its few round trips.
  const int64_t groups = r.rows * (args.k / 8), per_block = kThreads * kLoadsPerThread;
  const int64_t blocks = std::max((groups + per_block - 1) / per_block,
                                  std::min<int64_t>((groups + kThreads - 1) / kThreads, 2 * device.sm_count));
  if (blocks > 0x7FFFFFFF) check.fail("rows", fmt::format("rows * k = {} * {} is too large for one launch", r.rows, args.k));

  const CUfunction function = kernel_for(device, spec, stream, [&] {
    return fmt::format("nvfp4-jit prewarm --shape {},{} --arch {}", args.src_rows, args.k, to_string(device.arch));
  });
  nvfp4k::DequantizeParams p{};
  p.packed = static_cast<const unsigned char*>(args.src.data);
  p.packed_stride = r.packed_stride;
  p.scales = static_cast<const unsigned char*>(args.src.scales);
  p.gscale_ptr = args.src.global_scale.device_ptr;
  p.gscale_value = args.src.global_scale.value;
  p.gscale_mode = r.gscale_mode;
  p.out = args.out;
  p.out_stride = r.out_stride;
  p.row_indices = args.row_indices;
  p.src_rows = args.src_rows;
  p.rows = r.rows;
  void* params[] = {&p};
  LaunchShape shape;
  shape.grid[0] = unsigned(blocks);
  shape.block[0] = kThreads;
  launch(function, shape, stream, params);
}

void cpu::dequantize(const DequantizeArgs& args) {
  const Resolved r = resolve(args);
  const int64_t kblocks = args.k / 16;
  const auto* packed = static_cast<const uint8_t*>(args.src.data);
  const auto* scales = static_cast<const uint8_t*>(args.src.scales);
  for (int64_t row = 0; row < r.rows; ++row) {
    const int64_t src = args.row_indices ? args.row_indices[row] : row;
    const bool valid = src >= 0 && src < args.src_rows;
    const float gscale = !valid || r.gscale_mode == nvfp4k::GSCALE_HOST
                             ? args.src.global_scale.value
                             : args.src.global_scale.device_ptr[r.gscale_mode == nvfp4k::GSCALE_DEVICE ? 0 : src];
    for (int64_t e = 0; e < args.k; ++e) {
      float v = std::nanf("");
      if (valid) {
        const uint8_t byte = packed[src * r.packed_stride + e / 2];
        const int64_t off = args.src.scale_layout == ScaleLayout::linear
                                ? nvfp4k::scale_offset_linear(src, e / 16, kblocks)
                                : nvfp4k::scale_offset_swizzled128x4(src, e / 16, kblocks);
        v = (nvfp4k::e2m1_to_float(e % 2 ? byte >> 4 : byte & 15) * nvfp4k::e4m3_to_float(scales[off])) * gscale;
      }
      const int64_t at = row * r.out_stride + e;
      switch (args.out_dtype) {
        case DType::fp32: static_cast<float*>(args.out)[at] = v; break;
        case DType::bf16: static_cast<uint16_t*>(args.out)[at] = nvfp4k::float_to_bf16_bits(v); break;
        default: static_cast<uint16_t*>(args.out)[at] = nvfp4k::float_to_fp16_bits(v); break;
      }
    }
  }
}

}  // namespace nvfp4::jit
