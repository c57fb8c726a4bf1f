#include "ops/moe_route_op.hpp"

#include <algorithm>
#include <climits>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/params.cuh"
#include "common/portable.cuh"
#include "core/launcher.hpp"
#include "core/op_registry.hpp"
#include "core/stream_buffer.hpp"
#include "ops/quantize_op.hpp"
#include "ops/spec_names.hpp"
#include "ops/validate.hpp"

namespace nvfp4::jit::detail {

namespace {

constexpr const char* kRouteWho = "nvfp4::jit::moe_route";
constexpr const char* kCombineWho = "nvfp4::jit::moe_combine";
constexpr int kCombineThreads = 128;

// Up to kRouteOneCtaEntries one CTA sorts everything in one launch; beyond, two launches and a
// CTA per kRouteCtaEntries, the sizes where each measured fastest (docs/perf-log.md).
constexpr int64_t kRouteOneCtaEntries = 4096, kRouteCtaEntries = 2048;

int64_t route_ctas(const MoeRouteArgs& a) {
  const int64_t entries = a.tokens * a.topk;
  return entries <= kRouteOneCtaEntries ? 1 : (entries + kRouteCtaEntries - 1) / kRouteCtaEntries;
}

// Shape only: called after the shape checks (or by moe_route_workspace_bytes, which makes them).
int64_t route_workspace_bytes(const MoeRouteArgs& a) {
  const int64_t ctas = route_ctas(a);
  return ctas > 1 ? ctas * a.groups * 4 : 0;
}

void validate(const MoeRouteArgs& a) {
  const Check check(kRouteWho);
  check.not_negative("tokens", a.tokens);
  check.positive("topk", a.topk);
  check.index_type("topk_ids_type", a.topk_ids_type);
  check.positive("groups", a.groups);
  if (a.groups > kMoeRouteMaxGroups)
    check.fail("groups", fmt::format("groups = {} is more than {}, the experts one routing CTA sorts", a.groups,
                                     kMoeRouteMaxGroups), Status::unsupported);
  check.not_negative("first_expert", a.first_expert);
  if (a.tokens > INT32_MAX / a.topk)
    check.fail("tokens", fmt::format("tokens * topk = {} * {} is more than {} rows", a.tokens, a.topk, INT32_MAX));
  check.buffer("group_ends", a.group_ends, 4);  // written even for zero tokens: every group empty
  check.aligned("counts", a.counts, 4);
  if (a.tokens > 0) {
    check.buffer("topk_ids", a.topk_ids, a.topk_ids_type == IndexType::int64 ? 8 : 4);
    check.buffer("row_index", a.row_index, 4);
    check.aligned("positions", a.positions, 4);
  }
  if (a.workspace) {
    check.aligned("workspace", a.workspace, 4);
    const int64_t needed = route_workspace_bytes(a);
    if (a.workspace_bytes < needed)
      check.fail("workspace_bytes", fmt::format("workspace_bytes = {} is less than the {} bytes moe_route needs for "
                                                "{} x {} entries and {} groups (moe_route_workspace_bytes)",
                                                a.workspace_bytes, needed, a.tokens, a.topk, a.groups));
  }
}

// 16-byte vectors where n, both strides and both pointers allow them.
struct CombineShape {
  int64_t d_stride = 0, out_stride = 0;
  int vec = 1;
};

CombineShape validate(const MoeCombineArgs& a) {
  const Check check(kCombineWho);
  check.not_negative("tokens", a.tokens);
  check.positive("topk", a.topk);
  check.positive("n", a.n);
  check.not_negative("d_rows", a.d_rows);
  check.dtype_in("d_dtype", a.d_dtype, {DType::bf16, DType::fp16, DType::fp32});
  check.dtype_in("weights_dtype", a.weights_dtype, {DType::fp32, DType::bf16});
  check.dtype_in("out_dtype", a.out_dtype, {DType::bf16, DType::fp16, DType::fp32});
  if (a.tokens > INT32_MAX) check.fail("tokens", fmt::format("tokens = {} is more than {}", a.tokens, INT32_MAX));
  if (a.d_rows > INT32_MAX) check.fail("d_rows", fmt::format("d_rows = {} is more than {} (positions are int32)", a.d_rows, INT32_MAX));
  CombineShape s;
  s.d_stride = a.d_row_stride ? a.d_row_stride : a.n;
  s.out_stride = a.out_row_stride ? a.out_row_stride : a.n;
  if (s.d_stride < a.n) check.fail("d_row_stride", fmt::format("d_row_stride = {} is less than n = {}", s.d_stride, a.n));
  if (s.out_stride < a.n)
    check.fail("out_row_stride", fmt::format("out_row_stride = {} is less than n = {}", s.out_stride, a.n));
  if (a.tokens > 0) {
    check.buffer("positions", a.positions, 4);
    check.buffer("weights", a.weights, uintptr_t(element_bytes(a.weights_dtype)));
    check.buffer("out", a.out, uintptr_t(element_bytes(a.out_dtype)));
    if (a.d_rows > 0) {
      check.buffer("d", a.d, uintptr_t(element_bytes(a.d_dtype)));
    }
  }
  const bool vectors = a.n % 8 == 0 && s.d_stride % 8 == 0 && s.out_stride % 8 == 0 && aligned(a.d, 16) && aligned(a.out, 16);
  s.vec = vectors ? 8 : 1;
  return s;
}

std::string moe_route_kernel_name(const KernelSpec& key) {
  const MoeRouteSpec spec = key.as<MoeRouteSpec>();
  return fmt::format("nvfp4_moe_route_g{}_{}{}", spec.experts, spec.ids_int64 ? "i64" : "i32", spec.count_only ? "_count" : "");
}

std::string moe_combine_kernel_name(const KernelSpec& key) {
  const MoeCombineSpec spec = key.as<MoeCombineSpec>();
  return fmt::format("nvfp4_moe_combine_{}_w{}_to_{}_v{}", dtype_name(spec.d_dtype), dtype_name(spec.weights_dtype),
                     dtype_name(spec.out_dtype), spec.vec);
}

nlohmann::ordered_json moe_route_json(const KernelSpec& key) {
  const MoeRouteSpec spec = key.as<MoeRouteSpec>();
  return {{"experts", spec.experts}, {"ids_int64", spec.ids_int64}, {"count_only", spec.count_only}, {"threads", spec.threads}};
}

nlohmann::ordered_json moe_combine_json(const KernelSpec& key) {
  const MoeCombineSpec spec = key.as<MoeCombineSpec>();
  return {{"d_dtype", dtype_name(spec.d_dtype)}, {"weights_dtype", dtype_name(spec.weights_dtype)},
          {"out_dtype", dtype_name(spec.out_dtype)}, {"vec", spec.vec}, {"threads", spec.threads}};
}

// A grouped weight's model routes its tokens and combines BF16 expert outputs.
std::vector<KernelSpec> moe_prewarm_specs(Arch arch, const WeightShape& shape, int) {
  std::vector<KernelSpec> specs;
  if (shape.groups <= 1 || shape.groups > kMoeRouteMaxGroups) return specs;
  for (const bool ids64 : {false, true})
    for (const bool count : {false, true}) specs.push_back(moe_route_spec(arch, shape.groups, ids64, count));
  specs.push_back(moe_combine_spec(arch, DType::bf16, DType::fp32, DType::bf16, 8));
  return specs;
}

// a count per warp and expert, the experts' totals and earlier CTAs' rows, the scan's warp
// sums (templates/moe_route.cuh)
unsigned moe_route_shared_bytes(const KernelSpec& key) {
  const int64_t experts = key.as<MoeRouteSpec>().experts;
  return unsigned((nvfp4k::MOE_ROUTE_WARPS * experts + 2 * experts + 32) * 4);
}

const bool registered = register_op(Op::moe_route, {.generate = generate_moe_route, .kernel_name = moe_route_kernel_name,
                                                    .to_json = moe_route_json, .shared_bytes = moe_route_shared_bytes}) &&
                        register_op(Op::moe_combine, {.generate = generate_moe_combine, .kernel_name = moe_combine_kernel_name,
                                                      .to_json = moe_combine_json}) &&
                        register_prewarm(45, moe_prewarm_specs);

int64_t ids_at(const MoeRouteArgs& a, int64_t i) {
  return a.topk_ids_type == IndexType::int64 ? static_cast<const int64_t*>(a.topk_ids)[i] : static_cast<const int32_t*>(a.topk_ids)[i];
}

}  // namespace

KernelSpec moe_route_spec(Arch arch, int32_t experts, bool ids_int64, bool count_only) {
  return KernelSpec::of(arch, MoeRouteSpec{experts, ids_int64, count_only, nvfp4k::MOE_ROUTE_WARPS * 32});
}

KernelSpec moe_combine_spec(Arch arch, DType d, DType weights, DType out, int vec) {
  return KernelSpec::of(arch, MoeCombineSpec{d, weights, out, vec, kCombineThreads});
}

GeneratedKernel generate_moe_route(const KernelSpec& key) {
  const MoeRouteSpec spec = key.as<MoeRouteSpec>();
  return entry_point(key, spec.threads, moe_route_kernel_name(key), "moe_route.cuh", "MoeRouteParams",
                     fmt::format("nvfp4k::{}<{}, {}>(p)", spec.count_only ? "moe_route_count" : "moe_route",
                                 spec.ids_int64 ? "true" : "false", spec.experts));
}

GeneratedKernel generate_moe_combine(const KernelSpec& key) {
  const MoeCombineSpec spec = key.as<MoeCombineSpec>();
  return entry_point(key, spec.threads, moe_combine_kernel_name(key), "moe_route.cuh", "MoeCombineParams",
                     fmt::format("nvfp4k::moe_combine<{}, {}, {}, {}, {}>(p)", int(spec.d_dtype), int(spec.weights_dtype),
                                 int(spec.out_dtype), spec.vec, spec.threads));
}

}  // namespace nvfp4::jit::detail

namespace nvfp4::jit {

using namespace detail;

void moe_route(const MoeRouteArgs& args, CUstream stream) {
  validate(args);
  const CallDevice call_device(stream, args.row_index, kRouteWho);
  const DeviceInfo& device = call_device.info;
  const bool ids64 = args.topk_ids_type == IndexType::int64;
  const int64_t ctas = route_ctas(args);
  const KernelSpec place_spec = moe_route_spec(device.arch, args.groups, ids64, false);
  const unsigned shared = moe_route_shared_bytes(place_spec);
  auto hint = [&] {  // K = 16: no GEMM serves it, so the routing and a few small kernels are compiled
    return fmt::format("nvfp4-jit prewarm --shape 16,16,{} --arch {} (any grouped weight of {} groups prewarms its routing)",
                       args.groups, to_string(device.arch), args.groups);
  };
  // both kernels loaded before anything is enqueued: a capture error leaves the stream untouched
  const CUfunction place = kernel_for(device, place_spec, stream, hint);
  const CUfunction count =
      ctas > 1 ? kernel_for(device, moe_route_spec(device.arch, args.groups, ids64, true), stream, hint) : nullptr;
  if (load_only()) return;

  const int64_t entries = args.tokens * args.topk;
  nvfp4k::MoeRouteParams p{args.topk_ids, args.tokens,    args.topk,     args.first_expert, args.counts,
                           args.group_ends, args.row_index, args.positions, ctas > 1 ? kRouteCtaEntries : entries,
                           nullptr};
  LaunchShape shape;
  shape.grid[0] = unsigned(ctas);
  shape.block[0] = unsigned(nvfp4k::MOE_ROUTE_WARPS * 32);
  shape.shared_bytes = shared;
  void* params[] = {&p};
  if (ctas == 1) return launch(place, shape, stream, params);

  StreamBuffer owned;
  p.workspace = static_cast<int*>(args.workspace);
  if (!p.workspace) {
    owned = StreamBuffer(size_t(route_workspace_bytes(args)), stream, "moe_route workspace");
    p.workspace = static_cast<int*>(owned.get());
  }
  launch(count, shape, stream, params);
  shape.programmatic = true;
  launch(place, shape, stream, params);
  owned.free();
}

int64_t moe_route_workspace_bytes(const MoeRouteArgs& args) {
  const Check check("nvfp4::jit::moe_route_workspace_bytes");
  check.not_negative("tokens", args.tokens);
  check.positive("topk", args.topk);
  check.positive("groups", args.groups);
  if (args.tokens > INT32_MAX / args.topk)
    check.fail("tokens", fmt::format("tokens * topk = {} * {} is more than {} rows", args.tokens, args.topk, INT32_MAX));
  return route_workspace_bytes(args);
}

void moe_combine(const MoeCombineArgs& args, CUstream stream) {
  const CombineShape s = validate(args);
  if (args.tokens == 0) return;
  const CallDevice call_device(stream, args.out, kCombineWho);
  const DeviceInfo& device = call_device.info;
  const KernelSpec spec = moe_combine_spec(device.arch, args.d_dtype, args.weights_dtype, args.out_dtype, s.vec);
  const CUfunction function = kernel_for(device, spec, stream, [&] {
    return fmt::format("nvfp4-jit prewarm --shape 16,16,2 --arch {} (a grouped weight's combine: BF16 d and out, FP32 "
                       "weights; other dtypes: call once before capturing)", to_string(device.arch));
  });
  nvfp4k::MoeCombineParams p{args.d,        s.d_stride,   args.d_rows, args.positions, args.weights,
                             args.out,      s.out_stride, args.tokens, args.topk,      args.n};
  void* params[] = {&p};
  LaunchShape shape;
  shape.grid[0] = unsigned(args.tokens);
  const int64_t columns_per_cta = int64_t(kCombineThreads) * s.vec;
  shape.grid[1] = unsigned((args.n + columns_per_cta - 1) / columns_per_cta);
  shape.block[0] = kCombineThreads;
  launch(function, shape, stream, params);
}

// The kernel's stable counting sort, written sequentially: entries in flat (token, slot) order.
void cpu::moe_route(const MoeRouteArgs& args) {
  validate(args);
  const int64_t entries = args.tokens * args.topk;
  auto local = [&](int64_t i) {
    const int64_t e = ids_at(args, i) - args.first_expert;
    return e >= 0 && e < args.groups ? int(e) : -1;
  };
  std::vector<int32_t> next(size_t(args.groups), 0);
  for (int64_t i = 0; i < entries; ++i)
    if (const int e = local(i); e >= 0) ++next[size_t(e)];
  int32_t end = 0;
  for (int32_t g = 0; g < args.groups; ++g) {
    if (args.counts) args.counts[g] = next[size_t(g)];
    end += next[size_t(g)];
    args.group_ends[g] = end;
    next[size_t(g)] = end - next[size_t(g)];
  }
  for (int64_t i = 0; i < entries; ++i) {
    const int e = local(i);
    const int32_t row = e >= 0 ? next[size_t(e)]++ : -1;
    if (row >= 0) args.row_index[row] = int32_t(i / args.topk);
    if (args.positions) args.positions[i] = row;
  }
  for (int64_t r = end; r < entries; ++r) args.row_index[r] = -1;
}

void cpu::moe_combine(const MoeCombineArgs& args) {
  const CombineShape s = validate(args);
  for (int64_t t = 0; t < args.tokens; ++t)
    for (int64_t c = 0; c < args.n; ++c) {
      float acc = 0.0f;
      for (int64_t j = 0; j < args.topk; ++j) {
        const int32_t pos = args.positions[t * args.topk + j];
        if (pos < 0 || pos >= args.d_rows) continue;
        const float w = host_value(args.weights, args.weights_dtype, t * args.topk + j);
        acc = nvfp4k::fma_rn(w, host_value(args.d, args.d_dtype, pos * s.d_stride + c), acc);
      }
      store_host_value(args.out, args.out_dtype, t * s.out_stride + c, acc);
    }
}

}  // namespace nvfp4::jit
