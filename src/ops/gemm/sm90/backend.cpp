// The sm_90a GEMM backend: BF16/FP16 activations x an NVFP4 weight decoded to BF16 in registers,
// wgmma with fp32 accumulators (templates/sm90/gemm_w4a16.cuh); NVFP4 activations decoded to
// BF16 by its producers (dense calls of few rows: w4a4_runs_one_launch) or by the front first;
// in the W4A8 mode E4M3 activations (the front's pass) x the prepacked weight folded to E4M3,
// FP8 wgmma.
#include <algorithm>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "common/scale_layout.cuh"
#include "ops/gemm/sm90/backend.hpp"

#include "core/error.hpp"
#include "ops/gemm/backend.hpp"
#include "ops/gemm/m_buckets.hpp"
#include "ops/gemm/schedule.hpp"
#include "ops/gemm/spec_codes.hpp"
#include "ops/gemm/sm90/tiles.hpp"
#include "sm90/gemm_params.cuh"

namespace nvfp4::jit::detail::sm90 {

namespace {

static_assert(sizeof(nvfp4k::TmaDescriptor) == sizeof(CUtensorMap));
static_assert(sizeof(nvfp4k::GemmParams) <= GemmPlan::kMaxParamBytes);

int d_bytes(const GemmSpec& spec) { return spec.out_dtype == uint8_t(DType::fp32) ? 4 : 2; }

// The tile `spec` runs: its GemmTile, persistent where its grouped layout and height say so.
Tile tile_of(const GemmSpec& spec) {
  Tile t = from_config(spec.tile);
  t.fp8 = gemm_problem_w4a8(spec);
  t.persistent = grouped_persistent_ctas(gemm_problem_grouped(spec), t, gemm_problem_prepacked(spec), spec.k);
  t.a_rmsnorm = gemm_a_rmsnorm_code(spec) != nvfp4k::A_RMSNORM_NONE;
  t.d_fp4 = spec.out_dtype == uint8_t(DType::nvfp4);
  return t;
}

// `t` as a grouped problem runs it: a persistent grid's tile holds the deepest ring its CTAs an
// SM leave room for.
Tile as_grouped(const GemmSpec& problem, Tile t) {
  if (int ctas = grouped_persistent_ctas(gemm_problem_grouped(problem), t, gemm_problem_prepacked(problem), problem.k))
    t = persistent_tile(t, ctas);
  return t;
}

// `t` as `problem` runs it: grouped (as_grouped), and with the stages that fit beside RMSNorm's
// row factors and NVFP4 D's staged values.
Tile as_problem_runs(const GemmSpec& problem, Tile t) {
  t = as_grouped(problem, t);
  if (gemm_a_rmsnorm_code(problem) != nvfp4k::A_RMSNORM_NONE) t = with_a_rmsnorm(t);
  return problem.out_dtype == uint8_t(DType::nvfp4) ? with_d_fp4(t) : t;
}

// What bind takes of the spec, worked out by plan (GemmPlan::binding).
struct Binding {
  int64_t groups;  // weights one after the other
  uint32_t a_box_rows, w_box_rows, w_box_cols;
  int32_t w_swizzle;
  int32_t d_bytes;
  bool batched;      // A and D: {k or n, m, group}
  bool fp8;          // A is E4M3 (the W4A8 mode): bytes, 128 columns a box
  bool a_fp4;        // A is NVFP4, decoded by the producers: no tensor map
  bool prepacked;    // values and scales in one buffer, no weight tensor map
  bool d_tile_fits;  // the tile of D fits in the stages (stores_through_smem)
};

}  // namespace

GemmTile heuristic(const GemmSpec& problem, int64_t m, int sm_count, int64_t groups_reached) {
  const int groups = gemm_problem_groups(problem);
  // counted for contiguous groups only (masked ones keep the decode tile measured for them)
  const int64_t reached = gemm_problem_grouped(problem) != nvfp4k::GROUPED_CONTIGUOUS ? 0
                          : groups_reached > 0 ? std::min<int64_t>(groups_reached, groups)
                                               : groups;
  return to_config(as_problem_runs(problem, heuristic_tile(problem.n, problem.k, m, sm_count, gemm_problem_prepacked(problem),
                                                           groups, reached, gemm_problem_w4a8(problem))));
}

namespace {

class Sm90Backend final : public GemmBackend {
 public:
  std::string_view name() const override { return "sm90"; }
  bool serves(Arch arch) const override { return arch == Arch::sm_90a; }
  bool decodes_fp4_activations() const override { return true; }
  std::string unsupported(const GemmSpec& problem) const override {
    if (problem.a_dtype == uint8_t(DType::nvfp4) && gemm_problem_grouped(problem) != nvfp4k::GROUPED_NONE)
      return "NVFP4 activations in the GEMM's own launch: dense only (a grouped call decodes A first)";
    if (gemm_epilogue_code(problem) == nvfp4k::EPILOGUE_SWIGLU &&
        (!gemm_problem_prepacked(problem) || gemm_problem_grouped(problem) == nvfp4k::GROUPED_BATCHED))
      return "epilogue swiglu runs on a prepacked gate_up weight, dense or contiguous / masked groups";
    if (gemm_epilogue_code(problem) == nvfp4k::EPILOGUE_MOE_COMBINE &&
        gemm_problem_grouped(problem) != nvfp4k::GROUPED_CONTIGUOUS)
      return "epilogue moe_combine runs on contiguous groups (moe_route's rows) only";
    if (gemm_a_rmsnorm_code(problem) != nvfp4k::A_RMSNORM_NONE &&
        (gemm_problem_w4a8(problem) || gemm_problem_grouped(problem) != nvfp4k::GROUPED_NONE))
      return "RMSNorm of A (a_rmsnorm_weight) runs in dense exact-mode GEMMs only so far";
    if (problem.out_dtype == uint8_t(DType::nvfp4) && gemm_epilogue_code(problem) != nvfp4k::EPILOGUE_SWIGLU)
      return "NVFP4 D (d_dtype nvfp4) is the SwiGLU epilogue's output (epilogue swiglu) only so far";
    if (gemm_residual(problem) && (gemm_problem_w4a8(problem) || gemm_problem_grouped(problem) != nvfp4k::GROUPED_NONE ||
                                   gemm_epilogue_code(problem) != nvfp4k::EPILOGUE_NONE))
      return "the residual add runs in dense exact-mode GEMMs without a fused epilogue only so far";
    if (!gemm_problem_w4a8(problem)) return {};
    if (gemm_epilogue_code(problem) == nvfp4k::EPILOGUE_MOE_COMBINE)
      return "precision = w4a8 runs without the moe_combine epilogue so far";
    if (!gemm_problem_prepacked(problem)) return "precision = w4a8 needs a prepacked weight (its rows' fold exponents)";
    if (gemm_problem_grouped(problem) == nvfp4k::GROUPED_BATCHED)
      return "precision = w4a8 runs dense GEMMs and contiguous or masked groups";
    if (problem.a_dtype != uint8_t(DType::bf16) && problem.a_dtype != uint8_t(DType::fp16))
      return "precision = w4a8 takes BF16 or FP16 activations";
    return {};
  }

  GemmTile heuristic(const GemmSpec& problem, int64_t m, int sm_count) const override {
    return sm90::heuristic(problem, m, sm_count, 0);
  }

  GemmTile call_heuristic(const GemmSpec& problem, const GemmCall& call, int64_t m, int sm_count) const override {
    return sm90::heuristic(problem, m, sm_count, gemm_groups_reached(call));
  }

  // a grouped problem's calls reach one group to all: the heuristic's tile for each reach (all
  // groups first, then from one up), which sizes the decode tiles only
  std::vector<GemmTile> heuristic_tiles(const GemmSpec& problem, int64_t m, int sm_count) const override {
    std::vector<GemmTile> tiles{heuristic(problem, m, sm_count)};
    const int64_t reaches = gemm_m_bucket(m) <= kGroupedDecodeMostRows ? gemm_problem_groups(problem) : 0;
    for (int64_t reached = 1; reached < reaches; ++reached) {
      const GemmTile t = sm90::heuristic(problem, m, sm_count, reached);
      if (std::find(tiles.begin(), tiles.end(), t) == tiles.end()) tiles.push_back(t);
    }
    return tiles;
  }

  // its row height trimmed to m's rows (every height of 16 rows builds)
  GemmTile for_rows(const GemmTile& tile, int64_t m) const override { return gemm_trimmed_to_rows(tile, m); }

  // The heuristic's tile for the bucket first (every contiguous group reached), then
  // candidate_tiles' (a grouped problem's all unsplit), each persistent one with the ring a
  // persistent grid of its height holds.
  std::vector<GemmTile> candidates(const GemmSpec& problem, int bucket, int sm_count) const override {
    std::vector<GemmTile> configs{heuristic(problem, gemm_bucket_m(bucket), sm_count)};
    for (const Tile& t : candidate_tiles(problem.n, problem.k, bucket, sm_count, gemm_problem_prepacked(problem),
                                         gemm_problem_groups(problem), gemm_problem_w4a8(problem))) {
      const GemmTile c = to_config(as_problem_runs(problem, t));
      if (std::find(configs.begin(), configs.end(), c) == configs.end()) configs.push_back(c);
    }
    return configs;
  }

  std::string arch_tile_problem(const GemmSpec& spec) const override {
    const Tile t = tile_of(spec);
    if (to_config(t) != spec.tile) return "a tile this backend does not describe";
    if (t.consumers == 3 && !gemm_problem_prepacked(spec))
      return "a tile of 3 consumer warpgroups runs on a prepacked weight only";
    return sm90::tile_problem(t, spec.k);
  }

  std::string describe(const GemmTile& tile) const override { return sm90::describe(from_config(tile)); }

  // N is the kernel's argument (GemmParams::n): the weight shapes of one K, variant and tile run
  // one kernel, so a prewarm compiles fewer.
  // W4A8's kernels read E4M3 whatever A was: the BF16 and FP16 calls share one.
  GemmSpec kernel_spec(const GemmSpec& spec) const override {
    GemmSpec kernel = spec;
    kernel.n = 0;
    if (gemm_problem_w4a8(spec)) kernel.a_dtype = uint8_t(DType::bf16);
    return kernel;
  }

  std::string kernel_name(const GemmSpec& spec) const override {
    const Tile t = tile_of(spec);
    const bool a_fp4 = spec.a_dtype == uint8_t(DType::nvfp4);
    const std::string a_name = t.fp8 ? "e4m3"
                               : a_fp4 ? fmt::format("nvfp4{}", gemm_a_scale_layout(spec) == nvfp4k::SCALES_SWIZZLED128X4 ? "sw" : "")
                                       : std::string(dtype_name(spec.a_dtype));
    return fmt::format("nvfp4_gemm_{}_{}k{}_{}_{}_{}{}{}{}{}_bm{}_bk{}_wg{}{}_s{}_ks{}{}", t.fp8 ? "w4a8" : a_fp4 ? "w4a4" : "w4a16",
                       grouped_name(spec), spec.k, a_name, dtype_name(spec.out_dtype),
                       scale_layout_name(spec.scale_layout), bias_name(spec), epilogue_name(spec), a_rmsnorm_name(spec),
                       gemm_residual(spec) ? "_residual" : "", t.block_m,
                       t.block_k, t.consumers, t.k_slices > 1 ? fmt::format("x{}", t.k_slices) : "", t.stages, t.split_k,
                       t.persistent > 0 ? "_persistent" : "");
  }

  GeneratedKernel generate(const GemmSpec& spec) const override {
    const Tile t = tile_of(spec);
    // GemmConfig's choices by name (sm90/gemm_w4a16.cuh), every one written out
    const std::string choices = fmt::format(
        "struct Choices {{\n"
        "  static constexpr int ADT = {adt}, ODT = {odt}, BIAS = {bias}, LAYOUT = {layout};\n"
        "  static constexpr long long K = {k};\n"
        "  static constexpr int WG = {wg}, BM = {bm}, BK = {bk}, STAGES = {stages}, KSPLIT = {ksplit}, KSLICES = {kslices};\n"
        "  static constexpr int GROUPED = {grouped}, GROUPS = {groups}, PERSISTENT = {persistent}, EPILOGUE = {epilogue};\n"
        "  static constexpr int A_SCALES = {a_scales}, RMSNORM = {rmsnorm}, RESIDUAL = {residual};\n"
        "}};\n",
        fmt::arg("adt", t.fp8 ? int(nvfp4k::DTYPE_E4M3) : int(spec.a_dtype)), fmt::arg("odt", spec.out_dtype),
        fmt::arg("bias", gemm_bias_code(spec)), fmt::arg("layout", spec.scale_layout), fmt::arg("k", spec.k),
        fmt::arg("wg", t.consumers), fmt::arg("bm", t.block_m), fmt::arg("bk", t.block_k), fmt::arg("stages", t.stages),
        fmt::arg("ksplit", t.split_k), fmt::arg("kslices", t.k_slices), fmt::arg("grouped", gemm_problem_grouped(spec)),
        fmt::arg("groups", spec.groups), fmt::arg("persistent", t.persistent > 0 ? 1 : 0),
        fmt::arg("epilogue", gemm_epilogue_code(spec)),
        fmt::arg("a_scales", spec.a_dtype == uint8_t(DType::nvfp4) ? gemm_a_scale_layout(spec) : int(nvfp4k::SCALES_LINEAR)),
        fmt::arg("rmsnorm", gemm_a_rmsnorm_code(spec)), fmt::arg("residual", gemm_residual(spec) ? 1 : 0));
    return entry_point(gemm_key(spec), spec.tile.threads, kernel_name(spec), "sm90/gemm_w4a16.cuh", "GemmParams",
                       "nvfp4k::sm90::gemm_w4a16<nvfp4k::sm90::GemmConfig<Choices>>(p)", ctas_per_sm(t) > 1 ? ctas_per_sm(t) : 0,
                       choices);
  }

  unsigned shared_bytes(const GemmSpec& spec) const override { return sm90::shared_bytes(tile_of(spec)); }

  GemmPlan plan(const GemmSpec& spec, int64_t m, int sm_count) const override {
    const Tile t = tile_of(spec);
    const int grouped = gemm_problem_grouped(spec);
    const GemmGrid grid = grouped ? gemm_grouped_grid(grouped, spec.groups, m, spec.n, t.block_m, 64 * t.consumers)
                                  : gemm_grid(m, spec.n, spec.k, t.block_m, 64 * t.consumers, t.split_k, sm_count);
    GemmPlan plan;
    auto& p = *reinterpret_cast<nvfp4k::GemmParams*>(plan.params);
    p.schedule = grid.schedule;
    p.n = spec.n;
    const bool prepacked = gemm_problem_prepacked(spec);
    p.w_group_bytes = prepacked ? prepacked_bytes(spec.n, spec.k) : scale_bytes(ScaleLayout(spec.scale_layout), spec.n, spec.k);
    // A persistent grid: the CTAs the SMs hold at once, each taking every gridDim.x-th tile. Its
    // loop pays from three tiles a CTA; with fewer, a CTA a tile (docs/perf-log.md).
    const unsigned resident = unsigned(sm_count * ctas_per_sm(t));
    plan.shape.grid[0] = t.persistent > 0 && grid.clusters > 2 * resident ? resident : grid.clusters;
    plan.shape.grid[2] = unsigned(t.split_k);
    plan.shape.block[0] = unsigned(threads(t));
    plan.shape.shared_bytes = sm90::shared_bytes(t);
    if (t.split_k > 1) {
      plan.shape.cluster[0] = 1;
      plan.shape.cluster[1] = 1;
      plan.shape.cluster[2] = unsigned(t.split_k);
    }
    // Starting early pays where the previous kernel's tail is a large part of this one: grids
    // of up to four waves (docs/architecture.md).
    plan.early_launch = int64_t(grid.clusters) * t.split_k <= 4 * int64_t(sm_count);
    Binding& b = plan_binding<Binding>(plan);
    b.groups = std::max(1, spec.groups);
    b.a_box_rows = uint32_t(t.block_m);
    b.w_box_rows = uint32_t(64 * t.consumers);
    b.w_box_cols = uint32_t(t.block_k / 2);
    b.w_swizzle = t.block_k == 256 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_64B;
    b.d_bytes = d_bytes(spec);
    b.batched = grouped == nvfp4k::GROUPED_BATCHED;
    b.fp8 = t.fp8;
    b.a_fp4 = spec.a_dtype == uint8_t(DType::nvfp4);
    b.prepacked = prepacked;
    // (SwiGLU's D is half the tile wide: element stores)
    b.d_tile_fits = stores_through_smem(t, b.d_bytes) && gemm_epilogue_code(spec) == nvfp4k::EPILOGUE_NONE;
    return plan;
  }

  void bind(const GemmPlan& plan, const GemmCall& call, void* params, TensorMapList& maps) const override {
    const Binding& b = plan_binding<Binding>(plan);
    const GemmArgs& args = call.args;
    // rows read through row_index come sorted (gathers_rows_first, W4A8's pass, W4A4's decode)
    if (call.row_index) fail(Status::internal, "sm_90a GEMM kernel bound to a call with row_index: its rows are not gathered");
    auto& p = *static_cast<nvfp4k::GemmParams*>(params);
    const CUtensorMapDataType a_type = b.fp8                         ? CU_TENSOR_MAP_DATA_TYPE_UINT8
                                       : args.a_dtype == DType::fp16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                                                     : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    const uint64_t a_bytes = b.fp8 ? 1 : 2;          // an element of A
    const uint32_t a_box_cols = b.fp8 ? 128 : 64;    // 128 bytes: the swizzle span
    if (b.a_fp4) {  // read by the producers, row by row: no tensor map
      p.a = static_cast<const unsigned char*>(args.a_fp4.data);
      p.a_stride = args.a_fp4.row_stride_bytes ? args.a_fp4.row_stride_bytes : args.k / 2;
      p.a_scales = static_cast<const unsigned char*>(args.a_fp4.scales);
    } else {
      maps.add(&p.tma_a, b.batched ? tensor_map_3d(args.a, a_type, uint64_t(b.groups), uint64_t(args.m), uint64_t(args.k),
                                                   uint64_t(call.a_stride) * a_bytes, uint64_t(call.a_group_stride) * a_bytes,
                                                   b.a_box_rows, a_box_cols, CU_TENSOR_MAP_SWIZZLE_128B)
                                   : tensor_map_2d(args.a, a_type, uint64_t(call.rows),
                                                   uint64_t(args.k), uint64_t(call.a_stride) * a_bytes, b.a_box_rows, a_box_cols,
                                                   CU_TENSOR_MAP_SWIZZLE_128B));
      p.a = static_cast<const unsigned char*>(args.a);
      p.a_stride = call.a_stride * 2;
    }
    p.d_group_stride = call.d_group_stride;
    p.schedule.group_ends = call.group_ends;
    p.schedule.group_rows = call.masked_m;
    if (b.prepacked) {
      p.w_scales = static_cast<const unsigned char*>(args.b.data);  // values and scales, one bulk copy per stage
    } else {
      maps.add(&p.tma_w, tensor_map_2d(args.b.data, CU_TENSOR_MAP_DATA_TYPE_UINT8, uint64_t(b.groups * args.n),
                                       uint64_t(args.k / 2), uint64_t(call.b_stride), b.w_box_rows, b.w_box_cols,
                                       CUtensorMapSwizzle(b.w_swizzle)));
      p.w_scales = static_cast<const unsigned char*>(args.b.scales);
    }
    bind_epilogue(p, call);
    p.a_rmsnorm_weight = args.a_rmsnorm_weight;
    p.a_rmsnorm_eps = args.a_rmsnorm_eps;
    p.residual = args.residual;
    p.residual_stride = call.residual_stride;
    // D leaves a tile at a time through shared memory where the kernel's tile fits in its
    // stages and D's rows are whole 16-byte pieces (its start, n and the strides 16-byte
    // aligned); else element by element. From shared memory TMA stores it, or, for a grouped tile
    // whose rows end inside its box, the threads copy its rows out.
    const int db = b.d_bytes;
    p.d_from_smem = b.d_tile_fits && reinterpret_cast<uintptr_t>(args.d) % 16 == 0 && call.d_stride * db % 16 == 0 &&
                    args.n * db % 16 == 0 && (!b.batched || call.d_group_stride * db % 16 == 0);
    const CUtensorMapDataType d_type = db == 4                       ? CU_TENSOR_MAP_DATA_TYPE_FLOAT32
                                       : args.d_dtype == DType::fp16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                                                     : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    const uint32_t d_box_rows = uint32_t(p.schedule.m_step), d_box_cols = uint32_t(128 / db);
    if (p.d_from_smem)
      maps.add(&p.tma_d, b.batched ? tensor_map_3d(args.d, d_type, uint64_t(b.groups), uint64_t(args.m), uint64_t(args.n),
                                                   uint64_t(call.d_stride) * db, uint64_t(call.d_group_stride) * db,
                                                   d_box_rows, d_box_cols, CU_TENSOR_MAP_SWIZZLE_128B)
                                   : tensor_map_2d(args.d, d_type, uint64_t(call.rows), uint64_t(args.n),
                                                   uint64_t(call.d_stride) * db, d_box_rows, d_box_cols,
                                                   CU_TENSOR_MAP_SWIZZLE_128B));
  }
};

const Sm90Backend backend;
const bool registered = register_gemm_backend(&backend);

}  // namespace

}  // namespace nvfp4::jit::detail::sm90
