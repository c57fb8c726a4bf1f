#include "ops/prepack_op.hpp"

#include <nlohmann/json.hpp>

#include "core/op_registry.hpp"
#include "common/params.cuh"
#include "sm90/prepacked_weight.cuh"
#include "core/launcher.hpp"
#include "ops/spec_names.hpp"
#include "ops/validate.hpp"

namespace nvfp4::jit::detail {

namespace {

constexpr int kThreads = 256;
constexpr const char* kWho = "nvfp4::jit::prepack";

// Returns the source's row stride in bytes.
int64_t validate(const PrepackArgs& a) {
  Check check(kWho);
  check.positive("n", a.n);
  check.positive_multiple("k", a.k, 32, "what gemm accepts");
  check.scale_layout("weight.scale_layout", a.weight.scale_layout);
  const int64_t stride = a.weight.row_stride_bytes ? a.weight.row_stride_bytes : a.k / 2;
  if (stride < a.k / 2)
    check.fail("weight.row_stride_bytes",
               fmt::format("weight.row_stride_bytes = {} is less than k/2 = {}", stride, a.k / 2));
  if (a.swiglu_interleave < -1)
    check.fail("swiglu_interleave", fmt::format("swiglu_interleave = {} is not -1 (none), 0 (gate rows then up rows) or "
                                                "a group size g > 0", a.swiglu_interleave));
  if (a.swiglu_interleave >= 0 && a.n % 16)
    check.fail("n", fmt::format("n = {} with swiglu_interleave: a gate_up weight's 2 x I rows need I = n/2 a multiple of 8",
                                a.n));
  if (a.swiglu_interleave > 0 && (a.n / 2) % a.swiglu_interleave)
    check.fail("swiglu_interleave", fmt::format("swiglu_interleave = {} does not divide I = n/2 = {} (whole groups of gate "
                                                "and up rows)", a.swiglu_interleave, a.n / 2));
  check.not_null("weight.data", a.weight.data);
  check.not_null("weight.scales", a.weight.scales);
  check.buffer("out", a.out, 16);
  return stride;
}

// One thread per (chunk, wgmma thread), then one per padded row.
int64_t chunk_threads(const PrepackArgs& a) {
  return nvfp4k::prepacked::nan_rows_offset(a.n, a.k) / nvfp4k::prepacked::CHUNK_BYTES * 128;
}

}  // namespace

KernelSpec prepack_spec(Arch arch, int64_t k, ScaleLayout layout) {
  return KernelSpec::of(arch, PrepackSpec{k, layout, kThreads});
}

namespace {

std::string prepack_kernel_name(const KernelSpec& key) {
  const PrepackSpec spec = key.as<PrepackSpec>();
  return fmt::format("nvfp4_prepack_k{}_{}", spec.k, scale_layout_name(spec.src_scale_layout));
}

nlohmann::ordered_json prepack_json(const KernelSpec& key) {
  const PrepackSpec spec = key.as<PrepackSpec>();
  return {{"k", spec.k}, {"src_scale_layout", scale_layout_name(spec.src_scale_layout)}, {"threads", spec.threads}};
}

// The sm_90a GEMM's own weight layout; the other archs have no prepacked form.
const bool registered =
    register_op(Op::prepack, {.generate = generate_prepack, .kernel_name = prepack_kernel_name, .to_json = prepack_json}) &&
    register_prewarm(60, [](Arch arch, const WeightShape& shape, int) {
      std::vector<KernelSpec> specs;
      if (arch == Arch::sm_90a) specs.push_back(prepack_spec(arch, shape.k, ScaleLayout::linear));
      return specs;
    });

}  // namespace

GeneratedKernel generate_prepack(const KernelSpec& key) {
  const PrepackSpec spec = key.as<PrepackSpec>();
  return entry_point(key, spec.threads, prepack_kernel_name(key), "prepack.cuh", "PrepackParams",
                     fmt::format("nvfp4k::prepack<{}, {}LL, {}>(p)", int(spec.src_scale_layout), spec.k, spec.threads));
}

}  // namespace nvfp4::jit::detail

namespace nvfp4::jit {

using namespace detail;

int64_t prepacked_bytes(int64_t n, int64_t k) {
  const Check check("nvfp4::jit::prepacked_bytes");
  check.positive("n", n);
  check.positive_multiple("k", k, 32, "what gemm accepts");
  return nvfp4k::prepacked::bytes(n, k);
}

void prepack(const PrepackArgs& args, CUstream stream) {
  const int64_t stride = validate(args);
  const CallDevice call_device(stream, args.out, kWho);
  const DeviceInfo& device = call_device.info;
  const KernelSpec spec = prepack_spec(device.arch, args.k, args.weight.scale_layout);
  const CUfunction function = kernel_for(device, spec, stream, [&] {
    return fmt::format("nvfp4-jit prewarm --shape {},{} --arch {}", args.n, args.k, to_string(device.arch));
  });
  nvfp4k::PrepackParams p{static_cast<const unsigned char*>(args.weight.data), stride,
                          static_cast<const unsigned char*>(args.weight.scales), static_cast<unsigned char*>(args.out),
                          args.n, args.swiglu_interleave};
  void* params[] = {&p};
  LaunchShape shape;
  const int64_t threads = chunk_threads(args) + nvfp4k::prepacked::padded_rows(args.n);
  shape.grid[0] = unsigned((threads + kThreads - 1) / kThreads);
  shape.block[0] = kThreads;
  launch(function, shape, stream, params);
}

void cpu::prepack(const PrepackArgs& args) {
  const int64_t stride = validate(args);
  const int64_t threads = chunk_threads(args), chunks = nvfp4k::prepacked::chunks_per_row_tile(args.k);
  const auto* scales = static_cast<const unsigned char*>(args.weight.scales);
  auto* out = static_cast<unsigned char*>(args.out);
  for (int64_t i = 0; i < threads; ++i) {
    const int64_t chunk = i / 128;
    nvfp4k::prepacked::prepack_thread(static_cast<const unsigned char*>(args.weight.data), stride, scales,
                                      int(args.weight.scale_layout), args.n, args.k, chunk / chunks, chunk % chunks,
                                      int(i % 128), out, args.swiglu_interleave);
  }
  for (int64_t row = 0; row < nvfp4k::prepacked::padded_rows(args.n); ++row)
    nvfp4k::prepacked::prepack_row_bytes(scales, int(args.weight.scale_layout), args.n, args.k, row, out,
                                         args.swiglu_interleave);
}

}  // namespace nvfp4::jit
