// What a GEMM kernel compiles in: GemmSpec, the GEMM's typed spec, and GemmTile, the tile a
// backend chose (which only that backend interprets). A problem is a GemmSpec whose tile is
// zero: the key of the tuning table and of the front's warm dispatch.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <tuple>

#include <nlohmann/json_fwd.hpp>

#include "core/spec.hpp"

namespace nvfp4::jit::detail {

// (Every field 16 bits wide, so that neither struct has padding: GemmSpec is the warm dispatch's
// key, hashed as bytes.)
struct GemmTile {
  uint16_t block_m = 0, block_n = 0, block_k = 0;
  uint16_t threads = 0;
  uint16_t stages = 0;
  uint16_t split_k = 0;   // CTAs of a cluster that split K between them (0 or 1: none)
  uint16_t k_slices = 0;  // sm_90a: consumer warpgroups per 64 weight rows, each a slice of every stage's k steps
  bool operator==(const GemmTile&) const = default;
  template <class Self>
  static auto fields(Self& s) { return std::tie(s.block_m, s.block_n, s.block_k, s.threads, s.stages, s.split_k, s.k_slices); }
};

enum GemmFlags : uint16_t {
  kFlagBiasBf16 = 2, kFlagBiasFp32 = 4,
  kFlagGroupedContiguous = 8, kFlagGroupedMasked = 16,  // a grouped GEMM of `groups` groups
  kFlagAScalesSwizzled = 32,  // a GEMM on NVFP4 activations (a_dtype nvfp4): their scales swizzled128x4
  kFlagGroupedBatched = 64,   // a grouped GEMM of `groups` groups that every row goes to
  kFlagEpilogueSwiglu = 128,  // D = silu(gate) * up of a gate_up weight (GemmEpilogue::swiglu): sm_90a's prepacked, else as stored
  kFlagW4A8 = 256,            // GemmPrecision::w4a8: E4M3 activations and folded weights, FP8 MMA
  kFlagEpilogueMoeCombine = 512,  // D, then its rows combined into the tokens' rows (GemmEpilogue::moe_combine)
  kFlagARmsNorm = 1024,           // RMSNorm of A in the GEMM (GemmArgs::a_rmsnorm_weight), its weight in a_dtype
  kFlagARmsNormFp32 = 2048,       // the same, its weight in fp32
  kFlagResidual = 4096,           // a residual [m, n] added in the epilogue (GemmArgs::residual)
};

struct GemmSpec {
  static constexpr Op kOp = Op::gemm;
  static constexpr std::string_view kName = "GemmSpec";
  static constexpr bool serves(Op op) { return op == kOp; }

  int64_t n = 0;
  int64_t k = 0;
  int32_t groups = 0;
  GemmTile tile{};
  Arch arch = Arch::sm_90a;      // (KernelSpec's own: not among the fields)
  uint8_t a_dtype = kNoDType;    // the kernel's activations: BF16, FP16, or NVFP4 (an FP4 MMA's)
  uint8_t out_dtype = kNoDType;  // D's
  uint8_t scale_layout = 0;      // the weight's scales: nvfp4k::ScaleLayoutCode (prepacked too)
  uint16_t flags = 0;            // GemmFlags

  bool operator==(const GemmSpec&) const = default;
  template <class Self>
  static auto fields(Self& s) {
    return std::tuple_cat(std::tie(s.n, s.k, s.groups, s.a_dtype, s.out_dtype, s.scale_layout, s.flags), GemmTile::fields(s.tile));
  }
};

// The GEMM spec as the kernel key, and back.
inline KernelSpec gemm_key(const GemmSpec& spec) { return KernelSpec::of(spec.arch, spec); }
inline GemmSpec gemm_spec_of(const KernelSpec& key) {
  GemmSpec spec = key.as<GemmSpec>();
  spec.arch = key.arch;
  return spec;
}

// The spec's fields as a JSON object (the cache sidecar's and tuning table's), and back: each
// field range-checked, as a spec of `arch`; empty, or why not.
nlohmann::ordered_json gemm_spec_json(const GemmSpec& spec);
std::string gemm_spec_from_json(const nlohmann::json& object, Arch arch, GemmSpec* spec);

static_assert(std::has_unique_object_representations_v<GemmSpec>, "GemmSpec must have no padding");

}  // namespace nvfp4::jit::detail
