#include "core/spec.hpp"

#include <fmt/format.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <nlohmann/json.hpp>

#include "common/params.cuh"
#include "core/error.hpp"
#include "core/op_registry.hpp"

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
    case Op::fp8_activations: return "fp8_activations";
    case Op::gather_rows: return "gather_rows";
  }
  return "unknown";
}

std::optional<Arch> parse_arch(std::string_view name) {
  for (Arch arch : kAllArchs)
    if (to_string(arch) == name) return arch;
  return std::nullopt;
}

std::optional<Op> parse_op(std::string_view name) {
  for (int code = 0; code < 256; ++code)
    if (to_string(Op(code)) == name) return Op(code);
  return std::nullopt;
}

std::string arch_names() { return arch_names(kAllArchs, ", "); }

std::string arch_names(std::span<const Arch> archs, std::string_view separator) {
  std::string names;
  for (Arch arch : archs) names += fmt::format("{}{}", names.empty() ? "" : separator, to_string(arch));
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

void fail_spec_op(Op op, std::string_view spec_type) {
  fail(Status::internal, "a spec of op {} read as a {}", to_string(op), spec_type);
}

size_t hash_bytes(const void* data, size_t size) noexcept { return static_cast<size_t>(XXH3_64bits(data, size)); }

namespace {

// `object`'s fields as " name=value" (strings bare, a nested object's fields as "outer.name").
void describe_fields(std::string& out, const nlohmann::ordered_json& object, const std::string& prefix) {
  for (const auto& [name, value] : object.items()) {
    if (value.is_object())
      describe_fields(out, value, prefix + name + ".");
    else
      out += fmt::format(" {}{}={}", prefix, name, value.is_string() ? value.get<std::string>() : value.dump());
  }
}

}  // namespace

std::string KernelSpec::describe() const {
  std::string out = fmt::format("{} arch={}", to_string(op), to_string(arch));
  describe_fields(out, op_kernels(op).to_json(*this), "");
  return out;
}

std::string KernelSpec::to_json() const {
  nlohmann::ordered_json j{{"op", to_string(op)}, {"arch", to_string(arch)}};
  j.update(op_kernels(op).to_json(*this));
  return j.dump();
}

}  // namespace nvfp4::jit::detail
