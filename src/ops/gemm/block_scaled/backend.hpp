// The block-scaled GEMM family's backend, written once for its two arch pairs (sm_100a /
// sm_103a: tcgen05; sm_120a / sm_121a: the warp-level FP4 MMA): NVFP4 activations x an NVFP4
// weight, either scale layout for each, dense or grouped (contiguous, A's rows optionally
// gathered, or masked). What the pairs share lives here: the problems they refuse, their
// emulation on sm_90a, the front's tile calls, the kernel's name and source; each pair's folder
// keeps what differs: its tiles and kernel names (its Family), its launch and parameter binding.
//
// Emulation, a test facility: with NVFP4_JIT_EMULATE_ARCH naming one of a pair's archs, its
// backend takes the GEMM calls of an sm_90a device and compiles its kernels for sm_90a with its
// MMA emulated exactly (the spec's arch is the device's, so their keys, names and sources differ
// from the real kernels').
#pragma once
#include <algorithm>
#include <concepts>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "ops/gemm/backend.hpp"
#include "ops/gemm/m_buckets.hpp"
#include "ops/gemm/spec_codes.hpp"

namespace nvfp4::jit::detail::block_scaled {

// An arch pair of the family: its backend's name, which also names its template folder
// (templates/<name>/gemm_w4a4.cuh) and namespace (nvfp4k::<name>).
struct ArchPair {
  std::string_view name;    // "sm100"
  Arch archs[2];            // the archs it serves
  std::string_view prefix;  // its kernel names' after "nvfp4_gemm_w4a4_": "sm100_" (an emulated one's: "<name>emu_")
  std::string_view params;  // its kernel's parameter block, in nvfp4k: "GemmSm100Params"
};

// Why the family cannot run `problem` on `pair`; empty when it can (an arch's own rules follow).
std::string family_problem(const ArchPair& pair, const GemmSpec& problem);
// "nvfp4_gemm_w4a4_<prefix><grouped>n<N>_k<K>_<out>_a<layout>_w<layout><bias>_<tile>[_swiglu]"
std::string family_kernel_name(const ArchPair& pair, const GemmSpec& spec, bool emulated, std::string_view tile);
// The entry point calling nvfp4k::<name>::gemm_w4a4<nvfp4k::<name>::GemmConfig<out, bias, N, K,
// A's layout, W's layout, <tile_args>[, grouped layout, groups[, epilogue]]>>(p).
GeneratedKernel family_kernel(const ArchPair& pair, const GemmSpec& spec, std::string name, std::string_view tile_args);

// A kernel for an sm_90a device is the emulation's.
inline bool emulated(const GemmSpec& spec) { return spec.arch == Arch::sm_90a; }

// What an arch pair's folder gives its backend: the pair, its kernel's parameter block, its
// tiles (the Tile a GemmTile stands for; heuristic and search space, taking K where the pair's
// depend on it), the kernel name's tail for a tile ("bn128_s6") and GemmConfig's tile arguments.
// Optionally k_problem: the pair's own rule on K (empty: K fits).
template <class F>
concept FamilyFacts = requires(const typename F::Tile& t, const GemmTile& c, int64_t n, int i, bool b) {
  { F::pair } -> std::convertible_to<ArchPair>;
  typename F::Params;
  { t == t } -> std::convertible_to<bool>;
  { F::to_config(t) } -> std::same_as<GemmTile>;
  { F::from_config(c) } -> std::same_as<typename F::Tile>;
  { F::shared_bytes(t) } -> std::same_as<unsigned>;
  { F::describe(t) } -> std::same_as<std::string>;
  { F::tile_problem(t, n) } -> std::same_as<std::string>;
  { F::heuristic_tile(n, n, n, i, i) } -> std::same_as<typename F::Tile>;
  { F::candidate_tiles(n, n, i, i, i) } -> std::same_as<std::vector<typename F::Tile>>;
  { F::name_tile(t) } -> std::same_as<std::string>;
  { F::config_args(t, b) } -> std::same_as<std::string>;
};

// One arch pair's backend; the backend derived from it adds its plan and bind (its launch and
// parameter block).
template <FamilyFacts Family>
class Backend : public GemmBackend {
 public:
  using Tile = typename Family::Tile;
  static_assert(sizeof(typename Family::Params) <= GemmPlan::kMaxParamBytes);

  std::string_view name() const final { return Family::pair.name; }
  bool serves(Arch arch) const final { return arch == Family::pair.archs[0] || arch == Family::pair.archs[1]; }
  bool native_fp4_activations() const final { return true; }
  bool emulates(Arch arch) const final {
    return arch == Arch::sm_90a && emulation_requested({Family::pair.archs[0], Family::pair.archs[1]});
  }

  std::string unsupported(const GemmSpec& problem) const final {
    if (gemm_problem_w4a8(problem))
      return "precision = w4a8 is Hopper's (sm_90a) mode, refused here: this arch's exact mode already runs NVFP4 on its "
             "native FP4 tensor cores, faster and exact (use precision = exact)";
    if (gemm_a_rmsnorm_code(problem) != nvfp4k::A_RMSNORM_NONE)
      return fmt::format("RMSNorm of A in the GEMM (a_rmsnorm_weight) runs on sm_90a only so far, not on {} (run "
                         "rmsnorm_quantize's normed output, then gemm)", to_string(problem.arch));
    if (gemm_residual(problem))
      return fmt::format("the residual add in the GEMM's epilogue (residual) runs on sm_90a only so far, not on {}",
                         to_string(problem.arch));
    std::string why = family_problem(Family::pair, problem);
    if constexpr (requires { Family::k_problem(problem); })
      if (why.empty()) why = Family::k_problem(problem);
    return why;
  }

  GemmTile heuristic(const GemmSpec& problem, int64_t m, int sm_count) const final {
    const Tile t = Family::heuristic_tile(problem.n, problem.k, m, sm_count, gemm_problem_groups(problem));
    if constexpr (requires { Family::with_d_fp4(t); })
      if (problem.out_dtype == uint8_t(DType::nvfp4)) return Family::to_config(Family::with_d_fp4(t));
    return Family::to_config(t);
  }

  std::vector<GemmTile> candidates(const GemmSpec& problem, int bucket, int sm_count) const final {
    // the heuristic's tile first (candidate_tiles' own first, unless NVFP4 D moved it)
    std::vector<GemmTile> configs{heuristic(problem, gemm_bucket_m(bucket), sm_count)};
    for (const Tile& t : Family::candidate_tiles(problem.n, problem.k, bucket, sm_count, gemm_problem_groups(problem))) {
      const GemmTile c = Family::to_config(t);
      if (d_fp4_problem(problem, t).empty() && std::find(configs.begin(), configs.end(), c) == configs.end())
        configs.push_back(c);
    }
    return configs;
  }

  std::string arch_tile_problem(const GemmSpec& spec) const final {
    const Tile t = Family::from_config(spec.tile);
    if (Family::to_config(t) != spec.tile) return "a tile this backend does not describe";
    const std::string why = Family::tile_problem(t, spec.k);
    return why.empty() ? d_fp4_problem(spec, t) : why;
  }

  std::string describe(const GemmTile& tile) const final { return Family::describe(Family::from_config(tile)); }

  std::string kernel_name(const GemmSpec& spec) const final {
    return family_kernel_name(Family::pair, spec, emulated(spec), Family::name_tile(Family::from_config(spec.tile)));
  }

  GeneratedKernel generate(const GemmSpec& spec) const final {
    return family_kernel(Family::pair, spec, kernel_name(spec), Family::config_args(Family::from_config(spec.tile), emulated(spec)));
  }

  unsigned shared_bytes(const GemmSpec& spec) const final { return Family::shared_bytes(Family::from_config(spec.tile)); }

 private:
  // The pair's rule on the tiles that write NVFP4 D, where it has one.
  static std::string d_fp4_problem(const GemmSpec& problem, const Tile& t) {
    if constexpr (requires { Family::d_fp4_tile_problem(t); })
      if (problem.out_dtype == uint8_t(DType::nvfp4)) return Family::d_fp4_tile_problem(t);
    return {};
  }
};

}  // namespace nvfp4::jit::detail::block_scaled
