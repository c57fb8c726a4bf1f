// The sm_120a / sm_121a GEMM backend: the block-scaled family's (ops/gemm/block_scaled/) through
// the warp-level block-scaled FP4 MMA (templates/sm120/gemm_w4a4.cuh), K optionally split over a
// cluster.
#include <bit>
#include <string>

#include <fmt/format.h>

#include "common/scale_layout.cuh"
#include "ops/gemm/block_scaled/backend.hpp"
#include "ops/gemm/schedule.hpp"
#include "ops/gemm/spec_codes.hpp"
#include "ops/gemm/sm120/tiles.hpp"
#include "sm120/gemm_params.cuh"

namespace nvfp4::jit::detail::sm120 {

namespace {

struct Family : Tiles {
  static constexpr block_scaled::ArchPair pair{"sm120", {Arch::sm_120a, Arch::sm_121a}, "", "GemmW4A4Params"};
  using Params = nvfp4k::GemmW4A4Params;

  static std::string name_tile(const Tile& t) {
    return fmt::format("bm{}_bn{}_s{}{}", t.block_m, t.block_n, t.stages, t.split_k > 1 ? fmt::format("_ks{}", t.split_k) : "");
  }
  static std::string config_args(const Tile& t, bool emulated) {
    return fmt::format("{}, {}, {}, {}, {}", t.block_m, t.block_n, t.stages, emulated ? "true" : "false", t.split_k);
  }
};

// What bind takes of the spec, worked out by plan (GemmPlan::binding).
struct Binding {
  bool a_scales_swizzled;
};

class Sm120Backend final : public block_scaled::Backend<Family> {
 public:
  GemmPlan plan(const GemmSpec& spec, int64_t m, int sm_count) const override {
    const Tile t = Tiles::from_config(spec.tile);
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
    plan.shape.block[0] = unsigned(Tiles::threads(t));
    plan.shape.shared_bytes = Tiles::shared_bytes(t);
    plan.early_launch = false;  // the kernel makes no programmatic-launch calls
    p.w_group_bytes = scale_bytes(ScaleLayout(spec.scale_layout), spec.n, spec.k);
    plan_binding<Binding>(plan).a_scales_swizzled = gemm_a_scale_layout(spec) == nvfp4k::SCALES_SWIZZLED128X4;
    return plan;
  }

  void bind(const GemmPlan& plan, const GemmCall& call, void* params, TensorMapList&) const override {
    const Binding& b = plan_binding<Binding>(plan);
    const GemmArgs& args = call.args;
    auto& p = *static_cast<nvfp4k::GemmW4A4Params*>(params);
    p.a = static_cast<const unsigned char*>(args.a_fp4.data);
    p.a_stride = args.a_fp4.row_stride_bytes ? args.a_fp4.row_stride_bytes : args.k / 2;
    p.a_scales = static_cast<const unsigned char*>(args.a_fp4.scales);
    p.a_rows_16b = reinterpret_cast<uintptr_t>(p.a) % 16 == 0 && p.a_stride % 16 == 0;
    p.a_scale_words = reinterpret_cast<uintptr_t>(p.a_scales) % 4 == 0 &&
                      (b.a_scales_swizzled || (args.k / 16) % 4 == 0);
    p.w = static_cast<const unsigned char*>(args.b.data);
    p.w_stride = call.b_stride;
    p.w_scales = static_cast<const unsigned char*>(args.b.scales);
    p.schedule.group_ends = call.group_ends;
    p.schedule.group_rows = call.masked_m;
    p.row_index = call.row_index;
    p.a_rows = call.a_rows;
    p.swiglu_shift = args.b_swiglu_interleave ? std::countr_zero(uint64_t(args.b_swiglu_interleave)) : -1;
    bind_epilogue(p, call);
  }
};

const Sm120Backend backend;
const bool registered = register_gemm_backend(&backend);

}  // namespace

}  // namespace nvfp4::jit::detail::sm120
