// KernelSpec: everything a kernel compiles in. M (rows) is always a run-time argument.
#pragma once
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

namespace nvfp4::jit::detail {

enum class Op : uint8_t { dequantize = 1, quantize = 2, row_amax = 3, amax_finalize = 4, convert_scales = 5, gemm = 6,
                          rmsnorm_quantize = 7, swiglu_quantize = 8, moe_stage = 9, prepack = 10,
                          mhc_rmsnorm_quantize = 11, moe_route = 21, moe_combine = 22 };

enum class Arch : uint8_t { sm_90a, sm_100a, sm_103a, sm_120a, sm_121a };
inline constexpr Arch kAllArchs[] = {Arch::sm_90a, Arch::sm_100a, Arch::sm_103a, Arch::sm_120a, Arch::sm_121a};

std::string_view to_string(Arch arch);
std::string_view to_string(Op op);
std::optional<Arch> parse_arch(std::string_view name);
// "sm_90a, sm_100a, ...": every arch, for messages.
std::string arch_names();
// The arch-specific target of a device (sm_90a for compute capability 9.0, ...).
std::optional<Arch> arch_for_compute_capability(int major, int minor);

// Launch shape and inner-loop constants; each op uses the fields it needs, the rest stay 0.
struct TileConfig {
  uint16_t block_m = 0, block_n = 0, block_k = 0;
  uint16_t threads = 0;
  uint8_t stages = 0, cluster_m = 0;
  uint8_t split_k = 0;  // CTAs of a cluster that split K between them (0 or 1: none)
  uint8_t vec = 0;
  bool operator==(const TileConfig&) const = default;
};

inline constexpr uint8_t kNoDType = 0xFF;  // a dtype field the op does not use
enum SpecFlags : uint8_t {
  kFlagPerRow = 1, kFlagBiasBf16 = 2, kFlagBiasFp32 = 4,
  kFlagGroupedContiguous = 8, kFlagGroupedMasked = 16,  // a grouped GEMM of `groups` groups
  kFlagAScalesSwizzled = 32,  // a GEMM on NVFP4 activations (a_dtype nvfp4): their scales swizzled128x4
  kFlagGroupedBatched = 64,   // a grouped GEMM of `groups` groups that every row goes to
};

// Fields are laid out without padding so a spec hashes and compares as raw bytes.
struct KernelSpec {
  int64_t n = 0;
  int64_t k = 0;
  int32_t groups = 0;
  Op op = Op::dequantize;
  Arch arch = Arch::sm_90a;
  uint8_t a_dtype = kNoDType, b_dtype = kNoDType;
  uint8_t out_dtype = kNoDType, scale_layout = 0, gscale_mode = 0, flags = 0;
  TileConfig tile{};

  bool operator==(const KernelSpec& o) const { return std::memcmp(this, &o, sizeof o) == 0; }
  // A readable one-line description (used in messages and sidecars).
  std::string describe() const;
  std::string to_json() const;
};
static_assert(std::has_unique_object_representations_v<KernelSpec>, "KernelSpec must have no padding");

// A spec with the fields every op sets; the op fills in the rest.
KernelSpec base_spec(Op op, Arch arch, int64_t k, uint16_t threads);

struct KernelSpecHash {
  size_t operator()(const KernelSpec& spec) const noexcept;
};

std::string_view dtype_name(uint8_t dtype);

}  // namespace nvfp4::jit::detail
