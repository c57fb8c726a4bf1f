#include "core/spec.hpp"

#include <fmt/format.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "common/params.cuh"
#include "common/scale_layout.cuh"

namespace nvfp4::jit::detail {

namespace {
constexpr std::string_view kArchNames[] = {"sm_90a", "sm_100a", "sm_103a", "sm_120a", "sm_121a"};
}

std::string_view to_string(Arch arch) { return kArchNames[static_cast<int>(arch)]; }

std::string_view to_string(Op op) {
  switch (op) {
    case Op::dequantize: return "dequantize";
    case Op::quantize: return "quantize";
    case Op::row_amax: return "row_amax";
    case Op::amax_finalize: return "amax_finalize";
    case Op::convert_scales: return "convert_scales";
    case Op::gemm: return "gemm";
    case Op::rmsnorm_quantize: return "rmsnorm_quantize";
    case Op::swiglu_quantize: return "swiglu_quantize";
    case Op::moe_stage: return "moe_stage";
    case Op::prepack: return "prepack";
    case Op::mhc_rmsnorm_quantize: return "mhc_rmsnorm_quantize";
    case Op::moe_route: return "moe_route";
    case Op::moe_combine: return "moe_combine";
  }
  return "unknown";
}

std::optional<Arch> parse_arch(std::string_view name) {
  for (Arch arch : kAllArchs)
    if (to_string(arch) == name) return arch;
  return std::nullopt;
}

std::string arch_names() {
  std::string names;
  for (Arch arch : kAllArchs) names += fmt::format("{}{}", names.empty() ? "" : ", ", to_string(arch));
  return names;
}

std::optional<Arch> arch_for_compute_capability(int major, int minor) {
  const int cc = major * 10 + minor;
  switch (cc) {
    case 90: return Arch::sm_90a;
    case 100: return Arch::sm_100a;
    case 103: return Arch::sm_103a;
    case 120: return Arch::sm_120a;
    case 121: return Arch::sm_121a;
    default: return std::nullopt;
  }
}

std::string_view dtype_name(uint8_t dtype) {
  switch (dtype) {
    case nvfp4k::DTYPE_BF16: return "bf16";
    case nvfp4k::DTYPE_FP16: return "fp16";
    case nvfp4k::DTYPE_FP32: return "fp32";
    case 3: return "nvfp4";
  }
  return "none";
}

KernelSpec base_spec(Op op, Arch arch, int64_t k, uint16_t threads) {
  KernelSpec spec;
  spec.op = op;
  spec.arch = arch;
  spec.k = k;
  spec.tile.threads = threads;
  return spec;
}

size_t KernelSpecHash::operator()(const KernelSpec& spec) const noexcept {
  return static_cast<size_t>(XXH3_64bits(&spec, sizeof spec));
}

std::string KernelSpec::describe() const {
  return fmt::format("{} arch={} N={} K={} groups={} a={} b={} out={} scales={} gscale={} flags={} "
                     "tile={}x{}x{} threads={} stages={} cluster_m={} split_k={} vec={}",
                     to_string(op), to_string(arch), n, k, groups, dtype_name(a_dtype), dtype_name(b_dtype),
                     dtype_name(out_dtype), scale_layout == nvfp4k::SCALES_LINEAR ? "linear" : "swizzled128x4",
                     gscale_mode, flags, tile.block_m, tile.block_n, tile.block_k, tile.threads, tile.stages,
                     tile.cluster_m, tile.split_k, tile.vec);
}

std::string KernelSpec::to_json() const {
  return fmt::format(
      R"({{"op":"{}","arch":"{}","n":{},"k":{},"groups":{},"a_dtype":"{}","b_dtype":"{}","out_dtype":"{}",)"
      R"("scale_layout":{},"gscale_mode":{},"flags":{},"tile":{{"block_m":{},"block_n":{},"block_k":{},)"
      R"("threads":{},"stages":{},"cluster_m":{},"split_k":{},"vec":{}}}}})",
      to_string(op), to_string(arch), n, k, groups, dtype_name(a_dtype), dtype_name(b_dtype), dtype_name(out_dtype),
      scale_layout, gscale_mode, flags, tile.block_m, tile.block_n, tile.block_k, tile.threads, tile.stages,
      tile.cluster_m, tile.split_k, tile.vec);
}

}  // namespace nvfp4::jit::detail
