// The sm_100a / sm_103a GEMM backend: the block-scaled family's (ops/gemm/block_scaled/) through
// the tcgen05 MMA with accumulators in tensor memory (templates/sm100/gemm_w4a4.cuh), persistent;
// a tile of one CTA or of a CTA pair (a cluster of 2, .cta_group::2).
#include <algorithm>
#include <bit>
#include <string>

#include <fmt/format.h>

#include "common/scale_layout.cuh"
#include "core/error.hpp"
#include "ops/gemm/block_scaled/backend.hpp"
#include "ops/gemm/schedule.hpp"
#include "ops/gemm/spec_codes.hpp"
#include "ops/gemm/sm100/tiles.hpp"
#include "sm100/gemm_params.cuh"
#include "sm100/gemm_tile.cuh"

namespace nvfp4::jit::detail::sm100 {

namespace {

struct Family : Tiles {
  static constexpr block_scaled::ArchPair pair{"sm100", {Arch::sm_100a, Arch::sm_103a}, "sm100_", "GemmSm100Params"};
  using Params = nvfp4k::GemmSm100Params;

  static std::string k_problem(const GemmSpec& problem) {
    if (problem.k % nvfp4k::sm100::GEMM_MMA_K)
      return fmt::format("k = {}: the sm_100a / sm_103a GEMM takes K in whole MMAs of 64", problem.k);
    return {};
  }
  // K changes neither the tiles that build nor the heuristic's
  static std::string tile_problem(const Tile& t, int64_t) { return Tiles::tile_problem(t); }
  static Tile heuristic_tile(int64_t n, int64_t, int64_t m, int sm_count, int groups) {
    return Tiles::heuristic_tile(n, m, sm_count, groups);
  }
  static std::vector<Tile> candidate_tiles(int64_t n, int64_t, int bucket, int sm_count, int groups) {
    return Tiles::candidate_tiles(n, bucket, sm_count, groups);
  }
  static std::string name_tile(const Tile& t) { return fmt::format("{}bn{}_s{}", t.ctas == 2 ? "bm256_" : "", t.block_n, t.stages); }
  static std::string config_args(const Tile& t, bool emulated) {
    return fmt::format("{}, {}, {}, {}", t.block_n, t.stages, t.ctas, emulated ? "true" : "false");
  }
};

// What bind takes of the spec, worked out by plan (GemmPlan::binding).
struct Binding {
  int64_t groups;  // the groups' weights one after the other
  uint32_t w_box_rows;
  int32_t d_bytes;
  bool swiglu;
};

// SwiGLU's gate_up weight as stored, g gate rows then g up rows in each group of 2g (ModelOpt's
// halves: g = I, one group a weight): tma_w and tma_w_up pick its gate and its up rows as 3D
// tensors {K/2 bytes, g rows, the groups of 2g}, in boxes of BN / 2 rows (w_box_rows): g rows
// by BN / 2g groups where g is smaller (an interleaved weight), else BN / 2 rows of one group
// (rows past I read as zeros).
void bind_swiglu_weight(nvfp4k::GemmSm100Params& p, const Binding& b, const GemmCall& call, TensorMapList& maps) {
  const GemmArgs& args = call.args;
  const int64_t interleave = args.b_swiglu_interleave, g = interleave ? interleave : args.n / 2;
  const uint32_t box_rows = interleave && g < b.w_box_rows ? uint32_t(g) : b.w_box_rows;
  TensorMapKey key = tensor_map_3d(args.b.data, CU_TENSOR_MAP_DATA_TYPE_UINT8, uint64_t(b.groups * args.n / (2 * g)),
                                   uint64_t(g), uint64_t(args.k / 2), uint64_t(call.b_stride),
                                   uint64_t(2 * g * call.b_stride), box_rows, 128, CU_TENSOR_MAP_SWIZZLE_128B);
  key.box[2] = b.w_box_rows / box_rows;
  maps.add(&p.tma_w, key);
  key.base = static_cast<const unsigned char*>(args.b.data) + g * call.b_stride;
  maps.add(&p.tma_w_up, key);
  p.swiglu_group = g;
  p.swiglu_shift = interleave ? std::countr_zero(uint64_t(interleave)) : -1;
}

class Sm100Backend final : public block_scaled::Backend<Family> {
 public:
  GemmPlan plan(const GemmSpec& spec, int64_t m, int sm_count) const override {
    const Tile t = Tiles::from_config(spec.tile);
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
    plan.shape.shared_bytes = Tiles::shared_bytes(t);
    plan.early_launch = false;  // the kernel makes no programmatic-launch calls
    p.w_group_bytes = scale_bytes(ScaleLayout(spec.scale_layout), spec.n, spec.k);
    Binding& b = plan_binding<Binding>(plan);
    b.groups = std::max(1, spec.groups);
    // (SwiGLU's tile loads its gate rows and its up rows as a box each)
    b.w_box_rows = uint32_t(gemm_epilogue_code(spec) == nvfp4k::EPILOGUE_SWIGLU ? t.block_n / 2
                                                                                 : nvfp4k::sm100::gemm_w_rows(t.block_n, t.ctas));
    b.d_bytes = spec.out_dtype == uint8_t(DType::fp32) ? 4 : 2;
    b.swiglu = gemm_epilogue_code(spec) == nvfp4k::EPILOGUE_SWIGLU;
    return plan;
  }

  void bind(const GemmPlan& plan, const GemmCall& call, void* params, TensorMapList& maps) const override {
    const Binding& b = plan_binding<Binding>(plan);
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
    maps.add(&p.tma_a, tensor_map_2d(args.a_fp4.data, CU_TENSOR_MAP_DATA_TYPE_UINT8, uint64_t(a_rows), uint64_t(args.k / 2),
                                     uint64_t(a_stride), uint32_t(nvfp4k::sm100::GEMM_BM), 128, CU_TENSOR_MAP_SWIZZLE_128B));
    if (b.swiglu)
      bind_swiglu_weight(p, b, call, maps);
    else
      maps.add(&p.tma_w, tensor_map_2d(args.b.data, CU_TENSOR_MAP_DATA_TYPE_UINT8, uint64_t(b.groups * args.n),
                                       uint64_t(args.k / 2), uint64_t(call.b_stride), b.w_box_rows, 128,
                                       CU_TENSOR_MAP_SWIZZLE_128B));
    p.a_scales = static_cast<const unsigned char*>(args.a_fp4.scales);
    p.w_scales = static_cast<const unsigned char*>(args.b.scales);
    p.a_scale_words = reinterpret_cast<uintptr_t>(p.a_scales) % 4 == 0;
    p.w_scale_words = reinterpret_cast<uintptr_t>(p.w_scales) % 4 == 0;
    p.schedule.group_ends = call.group_ends;
    p.schedule.group_rows = call.masked_m;
    p.row_index = call.row_index;
    p.a = static_cast<const unsigned char*>(args.a_fp4.data);
    p.a_stride = a_stride;
    p.a_rows = call.a_rows;
    bind_epilogue(p, call);
    p.d_vec = reinterpret_cast<uintptr_t>(args.d) % 16 == 0 && call.d_stride * b.d_bytes % 16 == 0;
  }
};

const Sm100Backend backend;
const bool registered = register_gemm_backend(&backend);

}  // namespace

}  // namespace nvfp4::jit::detail::sm100
