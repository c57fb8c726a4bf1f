// The block-scaled GEMM family's backend, written once for its two arch pairs (sm_100a /
// sm_103a: tcgen05; sm_120a / sm_121a: the warp-level FP4 MMA): NVFP4 activations x an NVFP4
// weight, either scale layout for each, dense or grouped (contiguous, A's rows optionally
// gathered, or masked). What the pairs share lives here: the problems they refuse, their
// emulation on sm_90a, the front's tile calls, the kernel's name and source; each arch's folder
// keeps what differs (its Family: tiles, launch shape, parameter binding, template names).
//
// Emulation, a test facility: with NVFP4_JIT_EMULATE_ARCH naming one of a pair's archs, its
// backend takes the GEMM calls of an sm_90a device and compiles its kernels for sm_90a with its
// MMA emulated exactly (the spec's arch is the device's, so their keys, names and sources differ
// from the real kernels').
#pragma once
#include <string>
#include <vector>

#include <fmt/format.h>

#include "common/scale_layout.cuh"
#include "ops/gemm/backend.hpp"
#include "ops/gemm/spec_codes.hpp"

namespace nvfp4::jit::detail::block_scaled {

// What an arch pair of the family is called and where its kernel lives.
struct ArchPair {
  std::string_view name;     // the backend's: "sm100"
  Arch archs[2];             // the archs it serves
  std::string_view label;    // in messages: "sm_100a / sm_103a"
  std::string_view prefix;   // the kernel name's after "nvfp4_gemm_w4a4_": "sm100_"
  std::string_view emulated_prefix;  // an emulated kernel's: "sm100emu_"
  std::string_view header;   // the template's: "sm100/gemm_w4a4.cuh"
  std::string_view params;   // its parameter block, in nvfp4k: "GemmSm100Params"
  std::string_view space;    // its kernel and GemmConfig's namespace: "nvfp4k::sm100"
};

// Why the family cannot run `problem` on `pair`; empty when it can (an arch's own rules follow).
std::string family_problem(const ArchPair& pair, const KernelSpec& problem);
// "nvfp4_gemm_w4a4_<prefix><grouped>n<N>_k<K>_<out>_a<layout>_w<layout><bias>_<tile>"
std::string family_kernel_name(const ArchPair& pair, const KernelSpec& spec, bool emulated, std::string_view tile);
// The entry point calling <space>::gemm_w4a4<<space>::GemmConfig<out, bias, N, K, A's layout,
// W's layout, <tile_args>[, grouped layout, groups]>>(p).
GeneratedKernel family_kernel(const ArchPair& pair, const KernelSpec& spec, std::string name, std::string_view tile_args);

// A kernel for an sm_90a device is the emulation's.
inline bool emulated(const KernelSpec& spec) { return spec.arch == Arch::sm_90a; }

// One arch pair's backend. Family, what the pair's folder provides:
//   static constexpr ArchPair pair;
//   using Tile (comparable); using Params (the kernel's parameter block);
//   static TileConfig to_config(const Tile&); static Tile from_config(const TileConfig&);
//   static std::string k_problem(const KernelSpec& problem): the pair's own rule on K, or empty;
//   static Tile heuristic(int64_t n, int64_t k, int64_t m, int sm_count, int groups);
//   static std::vector<Tile> candidates(int64_t n, int64_t k, int bucket, int sm_count, int groups);
//   static std::string tile_problem(const Tile&, int64_t k); static std::string describe(const Tile&);
//   static unsigned shared_bytes(const Tile&);
//   static std::string name_tile(const Tile&): the kernel name's tail ("bn128_s6");
//   static std::string config_args(const Tile&, bool emulated): GemmConfig's tile arguments;
// and the backend's plan and bind (the launch and the parameter block, which differ).
template <class Family>
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

  std::string unsupported(const KernelSpec& problem) const final {
    std::string why = family_problem(Family::pair, problem);
    return why.empty() ? Family::k_problem(problem) : why;
  }

  // (the groups a call reaches do not change these tiles)
  TileConfig heuristic(const KernelSpec& problem, int64_t m, int sm_count, int64_t = 0) const final {
    return Family::to_config(Family::heuristic(problem.n, problem.k, m, sm_count, gemm_problem_groups(problem)));
  }

  std::vector<TileConfig> candidates(const KernelSpec& problem, int bucket, int sm_count) const final {
    std::vector<TileConfig> configs;
    for (const Tile& t : Family::candidates(problem.n, problem.k, bucket, sm_count, gemm_problem_groups(problem)))
      configs.push_back(Family::to_config(t));
    return configs;
  }

  std::string arch_tile_problem(const KernelSpec& spec) const final {
    const Tile t = Family::from_config(spec.tile);
    if (Family::to_config(t) != spec.tile) return "a tile this backend does not describe";
    return Family::tile_problem(t, spec.k);
  }

  std::string describe(const TileConfig& tile) const final { return Family::describe(Family::from_config(tile)); }

  std::string kernel_name(const KernelSpec& spec) const final {
    return family_kernel_name(Family::pair, spec, emulated(spec), Family::name_tile(Family::from_config(spec.tile)));
  }

  GeneratedKernel generate(const KernelSpec& spec) const final {
    return family_kernel(Family::pair, spec, kernel_name(spec), Family::config_args(Family::from_config(spec.tile), emulated(spec)));
  }

  unsigned shared_bytes(const KernelSpec& spec) const final { return Family::shared_bytes(Family::from_config(spec.tile)); }
};

}  // namespace nvfp4::jit::detail::block_scaled
