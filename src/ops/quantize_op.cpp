#include "ops/quantize_op.hpp"

#include <cstring>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/op_registry.hpp"
#include "common/nvfp4_quantize.cuh"
#include "common/params.cuh"
#include "common/scale_layout.cuh"
#include "core/driver.hpp"
#include "core/error.hpp"
#include "core/launcher.hpp"
#include "ops/spec_names.hpp"
#include "ops/validate.hpp"

namespace nvfp4::jit::detail {

static_assert(int(GlobalScaleMode::given) == 0 && int(GlobalScaleMode::compute_per_row) == 2);

namespace {

constexpr int kThreads = 256;
constexpr const char* kWho = "nvfp4::jit::quantize";

struct Resolved {
  int64_t in_stride, out_stride;
  int gscale_mode;  // GlobalScaleCode of args.global_scale (scale_mode == given)
};

// Checks shared by the GPU entry point and the CPU reference.
Resolved resolve(const QuantizeArgs& a) {
  Check check(kWho);
  check.positive_multiple("k", a.k, 16, "the NVFP4 block size");
  check.not_negative("rows", a.rows);
  check.dtype_in("in_dtype", a.in_dtype, {DType::bf16, DType::fp16, DType::fp32});
  check.scale_layout("scale_layout", a.scale_layout);
  Resolved r{a.in_row_stride ? a.in_row_stride : a.k, a.out_row_stride_bytes ? a.out_row_stride_bytes : a.k / 2,
             nvfp4k::GSCALE_HOST};
  if (r.in_stride < a.k) check.fail("in_row_stride", fmt::format("in_row_stride = {} is less than k = {}", r.in_stride, a.k));
  if (r.out_stride < a.k / 2)
    check.fail("out_row_stride_bytes", fmt::format("out_row_stride_bytes = {} is less than k/2 = {}", r.out_stride, a.k / 2));
  // every byte offset the kernels form fits in 64 bits
  check.span("in", "rows", a.rows, "in_row_stride", r.in_stride, element_bytes(a.in_dtype));
  check.span("out", "rows", a.rows, "out_row_stride_bytes", r.out_stride, 1);
  check.scale_span("scales", "rows", a.rows, a.k);
  switch (a.scale_mode) {
    case GlobalScaleMode::given:
      if (!a.global_scale.device_ptr && !(a.global_scale.value > 0.0f && std::isfinite(a.global_scale.value)))
        check.fail("global_scale", fmt::format("global_scale.value = {} must be positive and finite", a.global_scale.value));
      r.gscale_mode = check.global_scale("global_scale", a.global_scale);
      break;
    case GlobalScaleMode::compute_per_tensor:
    case GlobalScaleMode::compute_per_row:
      if (a.rows > 0) check.not_null("global_scale_out", a.global_scale_out);
      if (a.global_scale.device_ptr)
        check.fail("global_scale", "global_scale.device_ptr is set but scale_mode computes the global scale");
      break;
    default:
      check.fail("scale_mode", fmt::format("scale_mode = {} is not a GlobalScaleMode", int(a.scale_mode)));
  }
  if (a.rows > 0) {
    check.not_null("in", a.in);
    check.not_null("out", a.out);
    check.not_null("scales", a.scales);
  }
  return r;
}


}  // namespace

float host_value(const void* base, DType dtype, int64_t index) {
  const char* bytes = static_cast<const char*>(base);
  switch (dtype) {
    case DType::fp32: { float f; std::memcpy(&f, bytes + index * 4, 4); return f; }
    case DType::bf16: { uint16_t h; std::memcpy(&h, bytes + index * 2, 2); return nvfp4k::bf16_bits_to_float(h); }
    default: { uint16_t h; std::memcpy(&h, bytes + index * 2, 2); return nvfp4k::fp16_bits_to_float(h); }
  }
}

void store_host_value(void* base, DType dtype, int64_t index, float v) {
  char* bytes = static_cast<char*>(base);
  switch (dtype) {
    case DType::fp32: std::memcpy(bytes + index * 4, &v, 4); break;
    case DType::bf16: { const uint16_t h = nvfp4k::float_to_bf16_bits(v); std::memcpy(bytes + index * 2, &h, 2); break; }
    default: { const uint16_t h = nvfp4k::float_to_fp16_bits(v); std::memcpy(bytes + index * 2, &h, 2); break; }
  }
}

KernelSpec quantize_spec(Arch arch, int64_t k, DType in, ScaleLayout layout) {
  return KernelSpec::of(arch, QuantizeSpec{k, in, layout, kThreads});
}

KernelSpec row_amax_spec(Arch arch, int64_t k, DType in, bool per_row) {
  return KernelSpec::of(arch, RowAmaxSpec{k, in, per_row, kThreads});
}

KernelSpec amax_finalize_spec(Arch arch) { return KernelSpec::of(arch, AmaxFinalizeSpec{32}); }

std::vector<KernelSpec> quantize_prewarm_specs(Arch arch, int64_t k, const std::vector<DType>& in_dtypes) {
  std::vector<KernelSpec> specs;
  if (k <= 0 || k % 16) return specs;
  for (DType in : in_dtypes.empty() ? std::vector<DType>{DType::bf16, DType::fp16} : in_dtypes) {
    for (ScaleLayout layout : {ScaleLayout::linear, ScaleLayout::swizzled128x4}) specs.push_back(quantize_spec(arch, k, in, layout));
    for (bool per_row : {false, true}) specs.push_back(row_amax_spec(arch, k, in, per_row));
  }
  specs.push_back(amax_finalize_spec(arch));
  return specs;
}

namespace {

std::string quantize_kernel_name(const KernelSpec& key) {
  const QuantizeSpec spec = key.as<QuantizeSpec>();
  return fmt::format("nvfp4_quantize_k{}_{}_{}", spec.k, dtype_name(spec.in_dtype), scale_layout_name(spec.scale_layout));
}

std::string amax_kernel_name(const KernelSpec& key) {
  if (key.op == Op::amax_finalize) return "nvfp4_amax_to_global_scale";
  const RowAmaxSpec spec = key.as<RowAmaxSpec>();
  return fmt::format("nvfp4_row_amax_k{}_{}_{}", spec.k, dtype_name(spec.in_dtype), spec.per_row ? "per_row" : "per_tensor");
}

nlohmann::ordered_json quantize_json(const KernelSpec& key) {
  const QuantizeSpec spec = key.as<QuantizeSpec>();
  return {{"k", spec.k}, {"in_dtype", dtype_name(spec.in_dtype)}, {"scale_layout", scale_layout_name(spec.scale_layout)},
          {"threads", spec.threads}};
}

nlohmann::ordered_json row_amax_json(const KernelSpec& key) {
  const RowAmaxSpec spec = key.as<RowAmaxSpec>();
  return {{"k", spec.k}, {"in_dtype", dtype_name(spec.in_dtype)}, {"per_row", spec.per_row}, {"threads", spec.threads}};
}

nlohmann::ordered_json amax_finalize_json(const KernelSpec& key) { return {{"threads", key.as<AmaxFinalizeSpec>().threads}}; }

const bool registered =
    register_op(Op::quantize, {.generate = generate_quantize, .kernel_name = quantize_kernel_name, .to_json = quantize_json}) &&
    register_op(Op::row_amax, {.generate = generate_amax, .kernel_name = amax_kernel_name, .to_json = row_amax_json}) &&
    register_op(Op::amax_finalize, {.generate = generate_amax, .kernel_name = amax_kernel_name, .to_json = amax_finalize_json}) &&
    register_prewarm(30, [](Arch arch, const WeightShape& shape, int) {
      if (!shape.variants.writes_a(AFrom::quantize)) return std::vector<KernelSpec>{};
      return quantize_prewarm_specs(arch, shape.k, shape.variants.in_dtypes);
    });

}  // namespace

GeneratedKernel generate_quantize(const KernelSpec& key) {
  const QuantizeSpec spec = key.as<QuantizeSpec>();
  return entry_point(key, spec.threads, quantize_kernel_name(key), "quantize.cuh", "QuantizeParams",
                     fmt::format("nvfp4k::quantize<{}, {}LL, {}, {}>(p)", int(spec.in_dtype), spec.k, int(spec.scale_layout),
                                 spec.threads));
}

GeneratedKernel generate_amax(const KernelSpec& key) {
  if (key.op == Op::amax_finalize)
    return entry_point(key, key.as<AmaxFinalizeSpec>().threads, amax_kernel_name(key), "amax.cuh", "AmaxParams",
                       "nvfp4k::amax_to_global_scale(p)");
  const RowAmaxSpec spec = key.as<RowAmaxSpec>();
  return entry_point(key, spec.threads, amax_kernel_name(key), "amax.cuh", "AmaxParams",
                     fmt::format("nvfp4k::row_amax<{}, {}LL, {}, {}>(p)", int(spec.in_dtype), spec.k,
                                 spec.per_row ? "true" : "false", spec.threads));
}

}  // namespace nvfp4::jit::detail

namespace nvfp4::jit {

using namespace detail;

int64_t scale_bytes(ScaleLayout layout, int64_t rows, int64_t k) {
  Check check("nvfp4::jit::scale_bytes");
  check.positive_multiple("k", k, 16, "the NVFP4 block size");
  check.not_negative("rows", rows);
  check.scale_layout("layout", layout);
  check.bytes("scale_bytes(rows, k)", {rows / 128 + 1, 128, k / 64 + 1, 4});  // a bound of either layout's size
  return nvfp4k::scale_bytes(int(layout), rows, k / 16);
}

void quantize(const QuantizeArgs& args, CUstream stream) {
  const Resolved r = resolve(args);
  if (args.rows == 0) return;
  Check check(kWho);
  const int esize = element_bytes(args.in_dtype);
  check.aligned("in", args.in, 16);
  if (r.in_stride * esize % 16)
    check.fail("in_row_stride", fmt::format("in_row_stride = {} elements is not a multiple of 16 bytes", r.in_stride));
  check.aligned("out", args.out, 8);
  if (r.out_stride % 8)
    check.fail("out_row_stride_bytes", fmt::format("out_row_stride_bytes = {} must be a multiple of 8", r.out_stride));
  check.aligned("global_scale.device_ptr", args.global_scale.device_ptr, 4);
  check.aligned("global_scale_out", args.global_scale_out, 4);

  const CallDevice call_device(stream, args.out, kWho);
  const DeviceInfo& device = call_device.info;
  auto hint = [&] {
    return fmt::format("nvfp4-jit prewarm --shape {},{} --arch {} --in-dtype {}", std::max<int64_t>(args.rows, 1), args.k,
                       to_string(device.arch), dtype_name(uint8_t(args.in_dtype)));
  };
  // Every kernel is resolved before anything is enqueued, so a capture error leaves nothing behind.
  const KernelSpec qspec = quantize_spec(device.arch, args.k, args.in_dtype, args.scale_layout);
  const CUfunction quantize_fn = kernel_for(device, qspec, stream, hint);
  const bool per_row = args.scale_mode == GlobalScaleMode::compute_per_row;
  CUfunction amax_fn = nullptr, finalize_fn = nullptr;
  if (args.scale_mode != GlobalScaleMode::given)
    amax_fn = kernel_for(device, row_amax_spec(device.arch, args.k, args.in_dtype, per_row), stream, hint);
  if (args.scale_mode == GlobalScaleMode::compute_per_tensor)
    finalize_fn = kernel_for(device, amax_finalize_spec(device.arch), stream, hint);

  nvfp4k::QuantizeParams p{};
  p.in = args.in;
  p.in_stride = r.in_stride;
  p.packed = static_cast<unsigned char*>(args.out);
  p.packed_stride = r.out_stride;
  p.scales = static_cast<unsigned char*>(args.scales);
  p.rows = args.rows;
  p.gscale_value = args.global_scale.value;
  p.gscale_ptr = args.global_scale.device_ptr;
  p.gscale_mode = r.gscale_mode;

  nvfp4k::AmaxParams a{args.in, r.in_stride, args.global_scale_out, args.rows};
  void* amax_params[] = {&a};
  LaunchShape amax_shape;
  amax_shape.grid[0] = unsigned((args.rows + kThreads / 32 - 1) / (kThreads / 32));
  amax_shape.block[0] = kThreads;
  if (per_row) {
    launch(amax_fn, amax_shape, stream, amax_params);
    p.gscale_mode = nvfp4k::GSCALE_DEVICE_PER_ROW;
    p.gscale_ptr = args.global_scale_out;
  } else if (finalize_fn) {
    if (!load_only())
      check_cu(driver().cuMemsetD32Async(reinterpret_cast<CUdeviceptr>(args.global_scale_out), 0, 1, stream),
               "cuMemsetD32Async(global_scale_out)");
    launch(amax_fn, amax_shape, stream, amax_params);
    p.gscale_mode = nvfp4k::GSCALE_FROM_AMAX;
    p.gscale_ptr = args.global_scale_out;
  }

  // One thread per scale position, padding included.
  const int64_t threads = nvfp4k::scale_bytes(int(args.scale_layout), args.rows, args.k / 16);
  if ((threads + kThreads - 1) / kThreads > 0x7FFFFFFF) check.fail("rows", "rows * k is too large for one launch");
  LaunchShape shape;
  shape.grid[0] = unsigned((threads + kThreads - 1) / kThreads);
  shape.block[0] = kThreads;
  void* params[] = {&p};
  launch(quantize_fn, shape, stream, params);

  if (finalize_fn) {
    LaunchShape one;
    one.block[0] = 32;
    launch(finalize_fn, one, stream, amax_params);
  }
}

void cpu::quantize(const QuantizeArgs& args) {
  const Resolved r = resolve(args);
  const int64_t kblocks = args.k / 16;
  auto load = [&](int64_t row, int64_t e) { return host_value(args.in, args.in_dtype, row * r.in_stride + e); };
  auto row_amax = [&](int64_t row) {
    float m = 0;
    for (int64_t e = 0; e < args.k; ++e) {
      const float x = load(row, e);
      if (nvfp4k::is_finite(x)) m = std::max(m, std::fabs(x));
    }
    return m;
  };
  float tensor_gscale = args.global_scale.value;
  if (args.scale_mode == GlobalScaleMode::compute_per_tensor && args.rows > 0) {
    float m = 0;
    for (int64_t row = 0; row < args.rows; ++row) m = std::max(m, row_amax(row));
    tensor_gscale = args.global_scale_out[0] = nvfp4k::global_scale_from_amax(m);
  } else if (args.scale_mode == GlobalScaleMode::given && args.global_scale.device_ptr && !args.global_scale.per_row) {
    tensor_gscale = args.global_scale.device_ptr[0];
  }
  auto* scales = static_cast<uint8_t*>(args.scales);
  std::memset(scales, 0, size_t(nvfp4k::scale_bytes(int(args.scale_layout), args.rows, kblocks)));
  for (int64_t row = 0; row < args.rows; ++row) {
    float gscale = tensor_gscale;
    if (args.scale_mode == GlobalScaleMode::compute_per_row)
      gscale = args.global_scale_out[row] = nvfp4k::global_scale_from_amax(row_amax(row));
    else if (args.scale_mode == GlobalScaleMode::given && args.global_scale.per_row)
      gscale = args.global_scale.device_ptr[row];
    for (int64_t kb = 0; kb < kblocks; ++kb) {
      float x[16];
      for (int i = 0; i < 16; ++i) x[i] = load(row, kb * 16 + i);
      unsigned packed[2];
      const int64_t off = args.scale_layout == ScaleLayout::linear ? nvfp4k::scale_offset_linear(row, kb, kblocks)
                                                                  : nvfp4k::scale_offset_swizzled128x4(row, kb, kblocks);
      scales[off] = nvfp4k::quantize_block16(x, gscale, packed);
      std::memcpy(static_cast<char*>(args.out) + row * r.out_stride + kb * 8, packed, 8);
    }
  }
}

}  // namespace nvfp4::jit
