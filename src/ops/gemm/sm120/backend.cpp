// The sm_120a / sm_121a GEMM backend: NVFP4 activations x an NVFP4 weight through the
// block-scaled FP4 MMA (templates/sm120/gemm_w4a4.cuh), either scale layout for each; dense,
// or grouped (contiguous, A's rows optionally gathered, or masked).
//
// The same backend, as a test facility, runs its kernels on an sm_90a device: with
// NVFP4_JIT_EMULATE_ARCH=sm_120a (or sm_121a) in the environment it takes the GEMM calls of an
// sm_90a device, and compiles its kernels for sm_90a with the MMA emulated exactly (the spec's
// arch is the device's, so their keys, names and sources differ from the real kernels').
#include <string>

#include <fmt/format.h>

#include "common/scale_layout.cuh"
#include "ops/gemm/backend.hpp"
#include "ops/gemm/schedule.hpp"
#include "ops/gemm/spec_codes.hpp"
#include "ops/gemm/sm120/tiles.hpp"
#include "sm120/gemm_params.cuh"

namespace nvfp4::jit::detail::sm120 {

namespace {

static_assert(sizeof(nvfp4k::GemmW4A4Params) <= GemmPlan::kMaxParamBytes);

class Sm120Backend final : public GemmBackend {
 public:
  std::string_view name() const override { return "sm120"; }
  bool serves(Arch arch) const override { return arch == Arch::sm_120a || arch == Arch::sm_121a; }
  bool native_fp4_activations() const override { return true; }
  bool emulates(Arch arch) const override { return arch == Arch::sm_90a && emulation_requested({Arch::sm_120a, Arch::sm_121a}); }

  std::string unsupported(const KernelSpec& problem) const override {
    if (problem.a_dtype != uint8_t(DType::nvfp4))
      return fmt::format("the sm_120a / sm_121a GEMM takes NVFP4 activations (a_dtype = nvfp4, W4A4) only: a_dtype = {} "
                         "(W4A16) is not implemented on sm_120a / sm_121a yet; quantize the activations first",
                         dtype_name(problem.a_dtype));
    if (gemm_problem_prepacked(problem))
      return "a prepacked weight (sm_90a's layout) does not run on sm_120a / sm_121a: pass the weight as ModelOpt stores it";
    if (gemm_problem_grouped(problem) == nvfp4k::GROUPED_BATCHED)
      return "the batched grouped layout is not implemented on sm_120a / sm_121a yet (contiguous and masked are)";
    return {};
  }

  // (the groups a call reaches do not change these tiles)
  TileConfig heuristic(const KernelSpec& problem, int64_t m, int sm_count, int64_t = 0) const override {
    return to_config(heuristic_tile(problem.n, problem.k, m, sm_count, gemm_problem_groups(problem)));
  }

  std::vector<TileConfig> candidates(const KernelSpec& problem, int bucket, int sm_count) const override {
    std::vector<TileConfig> configs;
    for (const Tile& t : candidate_tiles(problem.n, problem.k, bucket, sm_count, gemm_problem_groups(problem)))
      configs.push_back(to_config(t));
    return configs;
  }

  std::string arch_tile_problem(const KernelSpec& spec) const override {
    const Tile t = from_config(spec.tile);
    if (to_config(t) != spec.tile) return "a tile this backend does not describe";
    return sm120::tile_problem(t, spec.k);
  }

  std::string describe(const TileConfig& tile) const override { return sm120::describe(from_config(tile)); }

  std::string kernel_name(const KernelSpec& spec) const override {
    const Tile t = from_config(spec.tile);
    return fmt::format("nvfp4_gemm_w4a4_{}{}n{}_k{}_{}_a{}_w{}{}_bm{}_bn{}_s{}{}", emulated(spec) ? "sm120emu_" : "",
                       grouped_name(spec), spec.n, spec.k, dtype_name(spec.out_dtype),
                       scale_layout_name(gemm_a_scale_layout(spec)), scale_layout_name(spec.scale_layout), bias_name(spec),
                       t.block_m, t.block_n, t.stages, t.split_k > 1 ? fmt::format("_ks{}", t.split_k) : "");
  }

  GeneratedKernel generate(const KernelSpec& spec) const override {
    const Tile t = from_config(spec.tile);
    const int grouped = gemm_problem_grouped(spec);
    return entry_point(spec, kernel_name(spec), "sm120/gemm_w4a4.cuh", "GemmW4A4Params",
                       fmt::format("nvfp4k::sm120::gemm_w4a4<nvfp4k::sm120::GemmConfig<{}, {}, {}LL, {}LL, {}, {}, {}, {}, "
                                   "{}, {}, {}{}>>(p)",
                                   spec.out_dtype, gemm_bias_code(spec), spec.n, spec.k, gemm_a_scale_layout(spec), spec.scale_layout,
                                   t.block_m, t.block_n, t.stages, emulated(spec) ? "true" : "false", t.split_k,
                                   grouped ? fmt::format(", {}, {}", grouped, spec.groups) : ""));
  }

  unsigned shared_bytes(const KernelSpec& spec) const override { return sm120::shared_bytes(from_config(spec.tile)); }

  GemmPlan plan(const KernelSpec& spec, int64_t m, int sm_count) const override {
    const Tile t = from_config(spec.tile);
    const int grouped = gemm_problem_grouped(spec);
    const GemmGrid grid = grouped ? gemm_grouped_grid(grouped, spec.groups, m, spec.n, t.block_m, t.block_n)
                                  : gemm_grid(m, spec.n, spec.k, t.block_m, t.block_n, t.split_k, sm_count);
    GemmPlan plan;
    auto& p = *reinterpret_cast<nvfp4k::GemmW4A4Params*>(plan.params);
    p.schedule = grid.schedule;
    plan.shape.grid[0] = grid.clusters;
    plan.shape.grid[2] = unsigned(t.split_k);
    if (t.split_k > 1) {  // a cluster of split_k CTAs along z
      plan.shape.cluster[0] = 1;
      plan.shape.cluster[1] = 1;
      plan.shape.cluster[2] = unsigned(t.split_k);
    }
    plan.shape.block[0] = unsigned(threads(t));
    plan.shape.shared_bytes = sm120::shared_bytes(t);
    plan.early_launch = false;  // the kernel makes no programmatic-launch calls
    return plan;
  }

  void bind(const KernelSpec& spec, const GemmCall& call, void* params) const override {
    const GemmArgs& args = call.args;
    auto& p = *static_cast<nvfp4k::GemmW4A4Params*>(params);
    p.a = static_cast<const unsigned char*>(args.a_fp4.data);
    p.a_stride = args.a_fp4.row_stride_bytes ? args.a_fp4.row_stride_bytes : args.k / 2;
    p.a_scales = static_cast<const unsigned char*>(args.a_fp4.scales);
    p.a_rows_16b = reinterpret_cast<uintptr_t>(p.a) % 16 == 0 && p.a_stride % 16 == 0;
    p.a_scale_words = reinterpret_cast<uintptr_t>(p.a_scales) % 4 == 0 &&
                      (gemm_a_scale_layout(spec) == nvfp4k::SCALES_SWIZZLED128X4 || (args.k / 16) % 4 == 0);
    p.w = static_cast<const unsigned char*>(args.b.data);
    p.w_stride = call.b_stride;
    p.w_scales = static_cast<const unsigned char*>(args.b.scales);
    p.w_group_bytes = scale_bytes(args.b.scale_layout, args.n, args.k);
    p.schedule.group_ends = call.group_ends;
    p.schedule.group_rows = call.masked_m;
    p.row_index = call.row_index;
    p.a_rows = call.a_rows;
    bind_epilogue(p, call);
  }

 private:
  // A kernel for an sm_90a device is the emulation's.
  static bool emulated(const KernelSpec& spec) { return spec.arch == Arch::sm_90a; }
};

const Sm120Backend backend;
const bool registered = register_gemm_backend(&backend);

}  // namespace

}  // namespace nvfp4::jit::detail::sm120
