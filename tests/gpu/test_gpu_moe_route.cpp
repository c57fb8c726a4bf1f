// moe_route and moe_combine on the GPU: identical to their CPU references in every output, on
// fresh random routings (uniform, skewed onto a few experts, one expert-parallel rank's experts with ids
// outside it, int32 and int64 ids, zero tokens, one CTA and many, the workspace the caller's
// (poisoned) or the library's), outputs poisoned first; a captured routing replayed with new ids; combine bit-identical on both of
// its paths (16-byte vectors and one column a thread), every dtype, out-of-range positions.
#include <doctest/doctest.h>

#include <fmt/format.h>

#include <cstring>
#include <random>
#include <vector>

#include "core/driver.hpp"
#include "core/gpu_util.hpp"
#include "nvfp4/jit.hpp"
#include "ops/quantize_op.hpp"
#include "ops/validate.hpp"

using namespace nvfp4::jit;
using namespace nvfp4::jit::detail;

namespace {

constexpr unsigned char kPoison = 0x5A;  // 0x5A5A5A5A: no value the routing writes

struct RouteCase {
  int64_t tokens, topk;
  int32_t experts, groups;
  int64_t first;
  bool int64_ids;
  enum Ids { uniform, skewed, with_outsiders } ids;
  bool caller_workspace = false;  // else null: the library allocates it in stream order
};

std::string describe(const RouteCase& c) {
  return fmt::format("tokens={} topk={} experts={} groups={} first={} int64={} ids={} caller_workspace={}", c.tokens,
                     c.topk, c.experts, c.groups, c.first, c.int64_ids, int(c.ids), c.caller_workspace);
}

std::vector<int64_t> draw_ids(const RouteCase& c, std::mt19937& rng) {
  std::vector<int64_t> ids(static_cast<size_t>(c.tokens * c.topk));
  for (auto& id : ids) {
    const uint32_t u = rng();
    switch (c.ids) {
      case RouteCase::uniform: id = u % uint32_t(c.experts); break;
      case RouteCase::skewed: id = u % 8 ? u % 3 : u % uint32_t(c.experts); break;  // 7/8 on experts 0-2
      case RouteCase::with_outsiders:
        id = u % 5 == 0 ? -1 : u % 5 == 1 ? (c.int64_ids ? (int64_t(1) << 40) + c.first : 1 << 30) : u % uint32_t(c.experts);
        break;
    }
  }
  return ids;
}

// The first index where two int32 vectors differ, or -1.
int64_t first_difference(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i]) return int64_t(i);
  return -1;
}

struct RouteBuffers {
  DeviceBuffer ids, counts, ends, rows, positions, workspace;
  MoeRouteArgs args;
  RouteBuffers(const RouteCase& c) : ids(size_t(std::max<int64_t>(1, c.tokens * c.topk) * 8)), counts(size_t(c.groups) * 4),
                                     ends(size_t(c.groups) * 4), rows(size_t(std::max<int64_t>(1, c.tokens * c.topk) * 4)),
                                     positions(rows.bytes()) {
    args.topk_ids = ids.get(), args.topk_ids_type = c.int64_ids ? IndexType::int64 : IndexType::int32;
    args.tokens = c.tokens, args.topk = c.topk, args.groups = c.groups, args.first_expert = c.first;
    args.counts = counts.as<int32_t>(), args.group_ends = ends.as<int32_t>();
    args.row_index = rows.as<int32_t>(), args.positions = positions.as<int32_t>();
    if (c.caller_workspace) {
      args.workspace_bytes = moe_route_workspace_bytes(args);
      workspace = DeviceBuffer(size_t(std::max<int64_t>(4, args.workspace_bytes)));
      args.workspace = workspace.get();
    }
  }
  void upload(const RouteCase& c, const std::vector<int64_t>& ids64) {
    if (c.int64_ids) {
      ids.upload(ids64.data(), ids64.size() * 8);
    } else {
      std::vector<int32_t> ids32(ids64.begin(), ids64.end());
      ids.upload(ids32.data(), ids32.size() * 4);
    }
  }
  void poison() {
    for (DeviceBuffer* b : {&counts, &ends, &rows, &positions, &workspace})
      if (b->bytes()) b->fill(kPoison);
  }
};

std::vector<int32_t> download(const DeviceBuffer& b, size_t count) {
  std::vector<int32_t> v(count);
  b.download(v.data(), count * 4);
  return v;
}

// The GPU's outputs of the last routing against the CPU reference's on `ids64`.
void check_route(const RouteCase& c, const RouteBuffers& b, const std::vector<int64_t>& ids64, const char* when) {
  const size_t entries = size_t(c.tokens * c.topk);
  std::vector<int32_t> ids32(ids64.begin(), ids64.end());
  std::vector<int32_t> counts(static_cast<size_t>(c.groups)), ends(static_cast<size_t>(c.groups)), rows(entries), positions(entries);
  MoeRouteArgs ref = b.args;
  ref.topk_ids = c.int64_ids ? static_cast<const void*>(ids64.data()) : ids32.data();
  ref.counts = counts.data(), ref.group_ends = ends.data(), ref.row_index = rows.data(), ref.positions = positions.data();
  cpu::moe_route(ref);
  const struct {
    const char* name;
    const std::vector<int32_t>& want;
    const DeviceBuffer& got;
  } outputs[] = {{"counts", counts, b.counts}, {"group_ends", ends, b.ends}, {"row_index", rows, b.rows}, {"positions", positions, b.positions}};
  for (const auto& o : outputs) {
    const std::vector<int32_t> got = download(o.got, o.want.size());
    const int64_t at = first_difference(got, o.want);
    CHECK_MESSAGE(at < 0, describe(c) << " " << when << ": " << o.name << "[" << at << "] = " << (at >= 0 ? got[size_t(at)] : 0)
                                      << ", expected " << (at >= 0 ? o.want[size_t(at)] : 0));
  }
}

struct CombineCase {
  int64_t tokens, topk, n;
  DType d, weights, out;
  int64_t d_pad = 0, out_pad = 0;  // elements after each row
  bool stray_positions = false;    // positions past d_rows and negative ones among them
};

// Random values of `dtype` (as its bytes), every one a value the type holds.
std::vector<uint8_t> random_values(DType dtype, int64_t count, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<uint8_t> bytes(static_cast<size_t>(count * element_bytes(dtype)));
  for (int64_t i = 0; i < count; ++i) store_host_value(bytes.data(), dtype, i, normal(rng));
  return bytes;
}

// moe_combine on the GPU against the CPU reference, bit for bit, on a random routing's
// positions (and, with stray_positions, some outside d); the out rows' padding must stay poisoned.
void run_combine(const CombineCase& c, std::mt19937& rng) {
  const std::string what = fmt::format("combine tokens={} topk={} n={} d={} weights={} out={} d_pad={} out_pad={} stray={}",
                                       c.tokens, c.topk, c.n, int(c.d), int(c.weights), int(c.out), c.d_pad, c.out_pad,
                                       c.stray_positions);
  const int32_t experts = 64;
  std::vector<int32_t> ids(static_cast<size_t>(c.tokens * c.topk));
  for (auto& id : ids) id = int32_t(rng() % experts);
  std::vector<int32_t> ends(static_cast<size_t>(experts)), rows(ids.size()), positions(ids.size());
  MoeRouteArgs r;
  r.topk_ids = ids.data(), r.tokens = c.tokens, r.topk = c.topk, r.groups = experts;
  r.group_ends = ends.data(), r.row_index = rows.data(), r.positions = positions.data();
  cpu::moe_route(r);
  const int64_t d_rows = ends.back() - (c.stray_positions ? 5 : 0);  // the last rows' entries then fall outside d
  if (c.stray_positions)
    for (size_t i = 0; i < positions.size(); i += 7) positions[i] = -int32_t(rng() % 3) - 1;

  const int64_t d_stride = c.n + c.d_pad, out_stride = c.n + c.out_pad;
  const std::vector<uint8_t> d = random_values(c.d, d_rows * d_stride, rng);
  std::vector<uint8_t> weights = random_values(c.weights, c.tokens * c.topk, rng);
  std::vector<uint8_t> want(size_t(c.tokens * out_stride * element_bytes(c.out)), kPoison);
  MoeCombineArgs a;
  a.d = d.data(), a.d_dtype = c.d, a.d_row_stride = d_stride, a.d_rows = d_rows;
  a.positions = positions.data(), a.weights = weights.data(), a.weights_dtype = c.weights;
  a.tokens = c.tokens, a.topk = c.topk, a.n = c.n;
  a.out = want.data(), a.out_dtype = c.out, a.out_row_stride = out_stride;
  cpu::moe_combine(a);

  DeviceBuffer d_d = to_device(d), d_pos = to_device(positions), d_w = to_device(weights), d_out(want.size());
  d_out.fill(kPoison);
  MoeCombineArgs g = a;
  g.d = d_d.get(), g.positions = d_pos.as<int32_t>(), g.weights = d_w.get(), g.out = d_out.get();
  moe_combine(g, nullptr);
  check_cu(driver().cuCtxSynchronize(), "moe_combine");
  std::vector<uint8_t> got(want.size());
  d_out.download(got.data(), got.size());
  const int esize = element_bytes(c.out);
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != want[i]) {
      const int64_t e = int64_t(i) / esize;
      FAIL_CHECK(what << ": first wrong element (" << e / out_stride << ", " << e % out_stride << ") = "
                      << host_value(got.data(), c.out, e) << ", expected " << host_value(want.data(), c.out, e));
      return;
    }
  MESSAGE(what << ": bit-identical with the CPU reference");
}

void run_route(const RouteCase& c, std::mt19937& rng) {
  RouteBuffers b(c);
  const std::vector<int64_t> ids = draw_ids(c, rng);
  b.upload(c, ids);
  b.poison();
  moe_route(b.args, nullptr);
  check_cu(driver().cuCtxSynchronize(), "moe_route");
  check_route(c, b, ids, "direct");
}

}  // namespace

TEST_SUITE("gpu_moe_route") {
  TEST_CASE("moe_route equals its CPU reference: uniform, skewed, EP ranks with ids outside their experts, int32 and int64") {
    std::mt19937 rng(std::random_device{}());
    const RouteCase cases[] = {
        {1, 8, 256, 256, 0, false, RouteCase::uniform},            // decode
        {16, 8, 256, 256, 0, true, RouteCase::uniform},
        {3000, 8, 256, 256, 0, false, RouteCase::skewed},          // most rows on three experts
        {4096, 4, 128, 128, 0, true, RouteCase::uniform},
        {37, 6, 64, 16, 32, false, RouteCase::with_outsiders},     // a rank holding experts 32..47
        {500, 8, 256, 32, 224, true, RouteCase::with_outsiders},   // the last rank's experts, int64 ids beyond int32
        {20000, 8, 512, 512, 0, false, RouteCase::uniform},        // 160000 entries: 79 CTAs
        {512, 8, 256, 256, 0, false, RouteCase::uniform},          // 4096 entries: the most one CTA sorts
        {1367, 3, 64, 64, 0, true, RouteCase::skewed},             // 4101: a third CTA of five entries
        {4096, 8, 128, 128, 0, false, RouteCase::skewed, true},    // the caller's workspace, poisoned
        {9000, 8, 256, 32, 96, true, RouteCase::with_outsiders, true},  // an EP rank over 36 CTAs
        {5, 1, 7, 7, 0, false, RouteCase::uniform},                // fewer entries than a warp
        {0, 8, 64, 64, 0, false, RouteCase::uniform},              // no tokens: every group empty
    };
    for (const RouteCase& c : cases) run_route(c, rng);
  }

  TEST_CASE("a captured moe_route replays with new ids: counts and row order follow them") {
    std::mt19937 rng(std::random_device{}());
    const RouteCase c{700, 8, 128, 128, 0, false, RouteCase::uniform};  // three CTAs, the workspace the library's
    RouteBuffers b(c);
    b.upload(c, draw_ids(c, rng));
    const Driver& drv = driver();
    CUstream stream = nullptr;
    check_cu(drv.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    moe_route(b.args, stream);  // loads the kernel outside the capture
    check_cu(drv.cuStreamSynchronize(stream), "warm-up");
    CUgraph graph = nullptr;
    CUgraphExec exec = nullptr;
    check_cu(drv.cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL), "cuStreamBeginCapture");
    moe_route(b.args, stream);
    check_cu(drv.cuStreamEndCapture(stream, &graph), "cuStreamEndCapture");
    check_cu(drv.cuGraphInstantiateWithFlags(&exec, graph, 0), "cuGraphInstantiate");
    for (int replay = 0; replay < 3; ++replay) {
      RouteCase now = c;
      now.ids = replay == 1 ? RouteCase::skewed : RouteCase::uniform;
      const std::vector<int64_t> ids = draw_ids(now, rng);
      b.upload(c, ids);
      b.poison();
      // The upload and the poison run on the legacy stream, which a non-blocking stream does
      // not wait for: finish them before the replay reads the ids and writes the outputs.
      check_cu(drv.cuCtxSynchronize(), "upload and poison");
      check_cu(drv.cuGraphLaunch(exec, stream), "cuGraphLaunch");
      check_cu(drv.cuStreamSynchronize(stream), "replay");
      check_route(c, b, ids, fmt::format("replay {}", replay).c_str());
    }
    drv.cuGraphExecDestroy(exec);
    drv.cuGraphDestroy(graph);
    drv.cuStreamDestroy(stream);
  }

  TEST_CASE("moe_combine is bit-identical with its CPU reference on both paths and every dtype") {
    std::mt19937 rng(std::random_device{}());
    run_combine({16, 8, 7168, DType::bf16, DType::fp32, DType::bf16}, rng);               // DeepSeek-V3 decode: vectors
    run_combine({300, 4, 2880, DType::fp32, DType::bf16, DType::fp16, 8, 16}, rng);        // padded rows, BF16 weights
    run_combine({33, 8, 100, DType::fp16, DType::fp32, DType::fp32, 3, 1}, rng);           // one column a thread
    run_combine({64, 6, 256, DType::bf16, DType::fp32, DType::fp32, 0, 0, true}, rng);     // positions outside d: skipped
    run_combine({1, 1, 8, DType::bf16, DType::bf16, DType::bf16}, rng);
  }
}
