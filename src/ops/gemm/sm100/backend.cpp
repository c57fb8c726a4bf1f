// The sm_100a / sm_103a GEMM backend: NVFP4 activations x an NVFP4 weight through the
// block-scaled tcgen05 MMA with accumulators in tensor memory (templates/sm100/gemm_w4a4.cuh),
// either scale layout for each; dense or grouped (contiguous, A's rows optionally gathered, or
// masked), persistent; a tile of one CTA or of a CTA pair (a cluster of 2, .cta_group::2).
//
// The same backend, as a test facility, runs its kernels on an sm_90a device: with
// NVFP4_JIT_EMULATE_ARCH=sm_100a (or sm_103a) in the environment it takes the GEMM calls of an
// sm_90a device, and compiles its kernels for sm_90a with the tcgen05 instructions emulated
// exactly (the spec's arch is the device's, so their keys, names and sources differ from the
// real kernels').
#include <algorithm>
#include <string>

#include <fmt/format.h>

#include "common/scale_layout.cuh"
#include "core/error.hpp"
#include "ops/gemm/backend.hpp"
#include "ops/gemm/schedule.hpp"
#include "ops/gemm/spec_codes.hpp"
#include "ops/gemm/sm100/tiles.hpp"
#include "sm100/gemm_params.cuh"
#include "sm100/gemm_tile.cuh"

namespace nvfp4::jit::detail::sm100 {

namespace {

static_assert(sizeof(nvfp4k::GemmSm100Params) <= GemmPlan::kMaxParamBytes);

class Sm100Backend final : public GemmBackend {
 public:
  std::string_view name() const override { return "sm100"; }
  bool serves(Arch arch) const override { return arch == Arch::sm_100a || arch == Arch::sm_103a; }
  bool native_fp4_activations() const override { return true; }
  bool emulates(Arch arch) const override { return arch == Arch::sm_90a && emulation_requested({Arch::sm_100a, Arch::sm_103a}); }

  std::string unsupported(const KernelSpec& problem) const override {
    if (problem.a_dtype != uint8_t(DType::nvfp4))
      return fmt::format("the sm_100a / sm_103a GEMM takes NVFP4 activations (a_dtype = nvfp4, W4A4) only: a_dtype = {} "
                         "(W4A16) is not implemented on sm_100a / sm_103a yet; quantize the activations first",
                         dtype_name(problem.a_dtype));
    if (gemm_problem_prepacked(problem))
      return "a prepacked weight (sm_90a's layout) does not run on sm_100a / sm_103a: pass the weight as ModelOpt stores it";
    if (gemm_problem_grouped(problem) == nvfp4k::GROUPED_BATCHED)
      return "the batched grouped layout is not implemented on sm_100a / sm_103a yet (contiguous and masked are)";
    if (problem.k % nvfp4k::sm100::GEMM_MMA_K)
      return fmt::format("k = {}: the sm_100a / sm_103a GEMM takes K in whole MMAs of 64", problem.k);
    return {};
  }

  // (the groups a call reaches do not change these tiles)
  TileConfig heuristic(const KernelSpec& problem, int64_t m, int sm_count, int64_t = 0) const override {
    return to_config(heuristic_tile(problem.n, m, sm_count, gemm_problem_groups(problem)));
  }

  std::vector<TileConfig> candidates(const KernelSpec& problem, int bucket, int sm_count) const override {
    std::vector<TileConfig> configs;
    for (const Tile& t : candidate_tiles(problem.n, bucket, sm_count, gemm_problem_groups(problem)))
      configs.push_back(to_config(t));
    return configs;
  }

  std::string arch_tile_problem(const KernelSpec& spec) const override {
    const Tile t = from_config(spec.tile);
    if (to_config(t) != spec.tile) return "a tile this backend does not describe";
    return sm100::tile_problem(t);
  }

  std::string describe(const TileConfig& tile) const override { return sm100::describe(from_config(tile)); }

  std::string kernel_name(const KernelSpec& spec) const override {
    const Tile t = from_config(spec.tile);
    return fmt::format("nvfp4_gemm_w4a4_{}{}n{}_k{}_{}_a{}_w{}{}_{}bn{}_s{}", emulated(spec) ? "sm100emu_" : "sm100_",
                       grouped_name(spec), spec.n, spec.k, dtype_name(spec.out_dtype),
                       scale_layout_name(gemm_a_scale_layout(spec)), scale_layout_name(spec.scale_layout), bias_name(spec),
                       t.ctas == 2 ? "bm256_" : "", t.block_n, t.stages);
  }

  GeneratedKernel generate(const KernelSpec& spec) const override {
    const Tile t = from_config(spec.tile);
    const int grouped = gemm_problem_grouped(spec);
    return entry_point(spec, kernel_name(spec), "sm100/gemm_w4a4.cuh", "GemmSm100Params",
                       fmt::format("nvfp4k::sm100::gemm_w4a4<nvfp4k::sm100::GemmConfig<{}, {}, {}LL, {}LL, {}, {}, {}, {}, "
                                   "{}, {}{}>>(p)",
                                   spec.out_dtype, gemm_bias_code(spec), spec.n, spec.k, gemm_a_scale_layout(spec), spec.scale_layout,
                                   t.block_n, t.stages, t.ctas, emulated(spec) ? "true" : "false",
                                   grouped ? fmt::format(", {}, {}", grouped, spec.groups) : ""));
  }

  unsigned shared_bytes(const KernelSpec& spec) const override { return sm100::shared_bytes(from_config(spec.tile)); }

  GemmPlan plan(const KernelSpec& spec, int64_t m, int sm_count) const override {
    const Tile t = from_config(spec.tile);
    const int grouped = gemm_problem_grouped(spec);
    const int block_m = nvfp4k::sm100::GEMM_BM * t.ctas;
    const GemmGrid grid = grouped ? gemm_grouped_grid(grouped, spec.groups, m, spec.n, block_m, t.block_n)
                                  : gemm_grid(m, spec.n, spec.k, block_m, t.block_n, 1, sm_count);
    GemmPlan plan;
    auto& p = *reinterpret_cast<nvfp4k::GemmSm100Params*>(plan.params);
    p.schedule = grid.schedule;
    // persistent: a CTA (pair) a tile up to one CTA per SM, each walking the tiles its count apart
    plan.shape.grid[0] = unsigned(t.ctas) * std::min<unsigned>(grid.clusters, unsigned(std::max(sm_count / t.ctas, 1)));
    if (t.ctas == 2) plan.shape.cluster[0] = 2, plan.shape.cluster[1] = plan.shape.cluster[2] = 1;
    plan.shape.block[0] = unsigned(nvfp4k::sm100::GEMM_THREADS);
    plan.shape.shared_bytes = sm100::shared_bytes(t);
    plan.early_launch = false;  // the kernel makes no programmatic-launch calls
    return plan;
  }

  void bind(const KernelSpec& spec, const GemmCall& call, void* params) const override {
    const Tile t = from_config(spec.tile);
    const GemmArgs& args = call.args;
    auto& p = *static_cast<nvfp4k::GemmSm100Params*>(params);
    const int64_t a_stride = args.a_fp4.row_stride_bytes ? args.a_fp4.row_stride_bytes : args.k / 2;
    // TMA reads A's rows: 16-byte aligned (W's are, by the front's checks)
    if (reinterpret_cast<uintptr_t>(args.a_fp4.data) % 16 || a_stride % 16)
      fail(Status::invalid_argument,
           "a_fp4.data / a_fp4.row_stride_bytes: the sm_100a / sm_103a GEMM reads A's rows through TMA, which needs them "
           "16-byte aligned (data % 16 = {}, row_stride_bytes = {})",
           reinterpret_cast<uintptr_t>(args.a_fp4.data) % 16, a_stride);
    // (gathered rows are copied by the kernel: the map then spans A's a_rows rows, unread)
    const int64_t a_rows = std::max<int64_t>(1, call.row_index ? call.a_rows : call.rows);
    copy_tensor_map(p.tma_a, make_tensor_map_2d(args.a_fp4.data, CU_TENSOR_MAP_DATA_TYPE_UINT8, uint64_t(a_rows),
                                                uint64_t(args.k / 2), uint64_t(a_stride), uint32_t(nvfp4k::sm100::GEMM_BM),
                                                128, CU_TENSOR_MAP_SWIZZLE_128B));
    const int64_t groups = std::max(1, spec.groups);  // the groups' weights one after the other
    copy_tensor_map(p.tma_w, make_tensor_map_2d(args.b.data, CU_TENSOR_MAP_DATA_TYPE_UINT8, uint64_t(groups * args.n),
                                         uint64_t(args.k / 2),
                                         uint64_t(call.b_stride), uint32_t(nvfp4k::sm100::gemm_w_rows(t.block_n, t.ctas)), 128,
                                         CU_TENSOR_MAP_SWIZZLE_128B));
    p.a_scales = static_cast<const unsigned char*>(args.a_fp4.scales);
    p.w_scales = static_cast<const unsigned char*>(args.b.scales);
    p.a_scale_words = reinterpret_cast<uintptr_t>(p.a_scales) % 4 == 0;
    p.w_scale_words = reinterpret_cast<uintptr_t>(p.w_scales) % 4 == 0;
    p.w_group_bytes = scale_bytes(args.b.scale_layout, args.n, args.k);
    p.schedule.group_ends = call.group_ends;
    p.schedule.group_rows = call.masked_m;
    p.row_index = call.row_index;
    p.a = static_cast<const unsigned char*>(args.a_fp4.data);
    p.a_stride = a_stride;
    p.a_rows = call.a_rows;
    bind_epilogue(p, call);
    const int64_t d_bytes = spec.out_dtype == uint8_t(DType::fp32) ? 4 : 2;
    p.d_vec = reinterpret_cast<uintptr_t>(args.d) % 16 == 0 && call.d_stride * d_bytes % 16 == 0;
  }

 private:
  // A kernel for an sm_90a device is the emulation's.
  static bool emulated(const KernelSpec& spec) { return spec.arch == Arch::sm_90a; }
};

const Sm100Backend backend;
const bool registered = register_gemm_backend(&backend);

}  // namespace

}  // namespace nvfp4::jit::detail::sm100
