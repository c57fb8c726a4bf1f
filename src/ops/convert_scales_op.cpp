#include "ops/convert_scales_op.hpp"

#include <nlohmann/json.hpp>

#include "core/op_registry.hpp"
#include "common/params.cuh"
#include "common/scale_layout.cuh"
#include "core/launcher.hpp"
#include "ops/spec_names.hpp"
#include "ops/validate.hpp"

namespace nvfp4::jit::detail {

namespace {

constexpr int kThreads = 256;
constexpr const char* kWho = "nvfp4::jit::convert_scales";

void validate(const ConvertScalesArgs& a) {
  Check check(kWho);
  check.positive_multiple("k", a.k, 16, "the NVFP4 block size");
  check.not_negative("rows", a.rows);
  check.scale_layout("src_layout", a.src_layout);
  check.scale_layout("dst_layout", a.dst_layout);
  if (a.rows > 0) {
    check.not_null("src", a.src);
    check.not_null("dst", a.dst);
  }
}

}  // namespace

KernelSpec convert_scales_spec(Arch arch, int64_t k, ScaleLayout src, ScaleLayout dst) {
  return KernelSpec::of(arch, ConvertScalesSpec{k, src, dst, kThreads});
}

namespace {

std::string convert_scales_kernel_name(const KernelSpec& key) {
  const ConvertScalesSpec spec = key.as<ConvertScalesSpec>();
  return fmt::format("nvfp4_convert_scales_k{}_{}_to_{}", spec.k, scale_layout_name(spec.src_layout),
                     scale_layout_name(spec.dst_layout));
}

nlohmann::ordered_json convert_scales_json(const KernelSpec& key) {
  const ConvertScalesSpec spec = key.as<ConvertScalesSpec>();
  return {{"k", spec.k}, {"src_layout", scale_layout_name(spec.src_layout)}, {"dst_layout", scale_layout_name(spec.dst_layout)},
          {"threads", spec.threads}};
}

// Weights may arrive with linear (ModelOpt) scales; other GEMM libraries read them swizzled.
const bool registered =
    register_op(Op::convert_scales, {.generate = generate_convert_scales, .kernel_name = convert_scales_kernel_name,
                                       .to_json = convert_scales_json}) &&
    register_prewarm(50, [](Arch arch, const WeightShape& shape, int) {
      return std::vector<KernelSpec>{convert_scales_spec(arch, shape.k, ScaleLayout::linear, ScaleLayout::swizzled128x4)};
    });

}  // namespace

GeneratedKernel generate_convert_scales(const KernelSpec& key) {
  const ConvertScalesSpec spec = key.as<ConvertScalesSpec>();
  return entry_point(key, spec.threads, convert_scales_kernel_name(key), "convert_scales.cuh", "ConvertScalesParams",
                     fmt::format("nvfp4k::convert_scales<{}, {}, {}LL, {}>(p)", int(spec.src_layout), int(spec.dst_layout),
                                 spec.k, spec.threads));
}

}  // namespace nvfp4::jit::detail

namespace nvfp4::jit {

using namespace detail;

void convert_scales(const ConvertScalesArgs& args, CUstream stream) {
  validate(args);
  if (args.rows == 0) return;
  const CallDevice call_device(stream, args.dst, kWho);
  const DeviceInfo& device = call_device.info;
  const KernelSpec spec = convert_scales_spec(device.arch, args.k, args.src_layout, args.dst_layout);
  const CUfunction function = kernel_for(device, spec, stream, [&] {
    return fmt::format("nvfp4-jit prewarm --shape {},{} --arch {}", args.rows, args.k, to_string(device.arch));
  });
  const int64_t threads = nvfp4k::scale_bytes(int(args.dst_layout), args.rows, args.k / 16);  // one per destination byte
  nvfp4k::ConvertScalesParams p{static_cast<const unsigned char*>(args.src), static_cast<unsigned char*>(args.dst), args.rows};
  void* params[] = {&p};
  LaunchShape shape;
  shape.grid[0] = unsigned((threads + kThreads - 1) / kThreads);
  shape.block[0] = kThreads;
  launch(function, shape, stream, params);
}

void cpu::convert_scales(const ConvertScalesArgs& args) {
  validate(args);
  const int64_t kblocks = args.k / 16;
  auto offset = [&](ScaleLayout layout, int64_t r, int64_t kb) {
    return layout == ScaleLayout::linear ? nvfp4k::scale_offset_linear(r, kb, kblocks)
                                         : nvfp4k::scale_offset_swizzled128x4(r, kb, kblocks);
  };
  const auto* src = static_cast<const uint8_t*>(args.src);
  auto* dst = static_cast<uint8_t*>(args.dst);
  const int64_t bytes = nvfp4k::scale_bytes(int(args.dst_layout), args.rows, kblocks);
  for (int64_t i = 0; i < bytes; ++i) dst[i] = 0;
  for (int64_t r = 0; r < args.rows; ++r)
    for (int64_t kb = 0; kb < kblocks; ++kb) dst[offset(args.dst_layout, r, kb)] = src[offset(args.src_layout, r, kb)];
}

}  // namespace nvfp4::jit
