// MoE routing and combine, CPU side (no GPU needed): the CPU references on hand-worked
// routings (stable order, skipped ids, one expert-parallel rank's experts, int64 ids), against an
// independent stable sort on random routings, combine's fixed order, argument validation, and
// every kernel variant compiled by NVRTC. tests/gpu/test_gpu_moe_route.cpp checks the kernels
// against these references.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "core/nvrtc_compiler.hpp"
#include "core/prewarm.hpp"
#include "expect_error.hpp"
#include "nvfp4/jit.h"
#include "ops/moe_route_op.hpp"

using namespace nvfp4::jit;
using namespace nvfp4::jit::detail;
using testutil::expect_error;

namespace {

struct Routed {
  std::vector<int32_t> counts, ends, row_index, positions;
};

template <class Id>
Routed route_on_cpu(const std::vector<Id>& ids, int64_t tokens, int64_t topk, int32_t groups, int64_t first = 0) {
  Routed r;
  r.counts.assign(size_t(groups), -7);
  r.ends.assign(size_t(groups), -7);
  r.row_index.assign(size_t(tokens * topk), -7);
  r.positions.assign(size_t(tokens * topk), -7);
  MoeRouteArgs a;
  a.topk_ids = ids.data();
  a.topk_ids_type = sizeof(Id) == 8 ? IndexType::int64 : IndexType::int32;
  a.tokens = tokens, a.topk = topk, a.groups = groups, a.first_expert = first;
  a.counts = r.counts.data(), a.group_ends = r.ends.data(), a.row_index = r.row_index.data(), a.positions = r.positions.data();
  cpu::moe_route(a);
  return r;
}

}  // namespace

TEST_SUITE("moe_route") {
  TEST_CASE("moe_route sorts by expert, stable by token then slot, and skips ids outside the rank's experts") {
    // token 0 -> experts 2, 0; token 1 -> 0, 3; token 2 -> 2, -1 (padding)
    const std::vector<int32_t> ids = {2, 0, 0, 3, 2, -1};
    const Routed all = route_on_cpu(ids, 3, 2, 4);
    CHECK(all.counts == std::vector<int32_t>{2, 0, 2, 1});
    CHECK(all.ends == std::vector<int32_t>{2, 2, 4, 5});
    CHECK(all.row_index == std::vector<int32_t>{0, 1, 0, 2, 1, -1});
    CHECK(all.positions == std::vector<int32_t>{2, 0, 1, 4, 3, -1});

    // an expert-parallel rank holding experts 2 and 3: the others are skipped
    const Routed rank = route_on_cpu(ids, 3, 2, 2, 2);
    CHECK(rank.counts == std::vector<int32_t>{2, 1});
    CHECK(rank.ends == std::vector<int32_t>{2, 3});
    CHECK(rank.row_index == std::vector<int32_t>{0, 2, 1, -1, -1, -1});
    CHECK(rank.positions == std::vector<int32_t>{0, -1, -1, 2, 1, -1});

    // int64 ids give the same routing; ids beyond int32 are no rank's experts
    std::vector<int64_t> ids64(ids.begin(), ids.end());
    ids64[5] = (int64_t(1) << 32) + 2;  // would be expert 2 if truncated
    const Routed wide = route_on_cpu(ids64, 3, 2, 4);
    CHECK(wide.ends == all.ends);
    CHECK(wide.row_index == all.row_index);
    CHECK(wide.positions == all.positions);

    // no tokens: every group empty
    const Routed none = route_on_cpu(std::vector<int32_t>{}, 0, 8, 3);
    CHECK(none.ends == std::vector<int32_t>{0, 0, 0});
    CHECK(none.counts == std::vector<int32_t>{0, 0, 0});
  }

  TEST_CASE("moe_route equals an independent stable sort on random and skewed routings") {
    std::mt19937 rng(std::random_device{}());
    for (int trial = 0; trial < 20; ++trial) {
      const int64_t tokens = 1 + int64_t(rng() % 300), topk = 1 + int64_t(rng() % 8);
      const int32_t experts = 1 + int32_t(rng() % 300), groups = 1 + int32_t(rng() % uint32_t(experts));
      const int64_t first = int64_t(rng() % uint32_t(experts - groups + 1));
      CAPTURE(tokens);
      CAPTURE(topk);
      CAPTURE(experts);
      CAPTURE(groups);
      CAPTURE(first);
      std::vector<int32_t> ids(static_cast<size_t>(tokens * topk));
      for (auto& id : ids)  // half the trials skewed onto a few experts; some padding ids
        id = rng() % 16 == 0 ? -1 : trial % 2 ? int32_t(rng() % uint32_t(std::min(experts, 3))) : int32_t(rng() % uint32_t(experts));
      const Routed r = route_on_cpu(ids, tokens, topk, groups, first);

      std::vector<int64_t> order;  // entries of the rank's experts, stably sorted by expert
      for (int64_t i = 0; i < tokens * topk; ++i)
        if (ids[size_t(i)] >= first && ids[size_t(i)] < first + groups) order.push_back(i);
      std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return ids[size_t(x)] < ids[size_t(y)]; });
      std::vector<int32_t> want_rows(size_t(tokens * topk), -1), want_pos(size_t(tokens * topk), -1);
      std::vector<int32_t> want_ends(size_t(groups), 0);
      for (size_t row = 0; row < order.size(); ++row) {
        want_rows[row] = int32_t(order[row] / topk);
        want_pos[size_t(order[row])] = int32_t(row);
        for (int64_t g = ids[size_t(order[row])] - first; g < groups; ++g) ++want_ends[size_t(g)];
      }
      CHECK(r.row_index == want_rows);
      CHECK(r.positions == want_pos);
      CHECK(r.ends == want_ends);
      for (int32_t g = 0; g < groups; ++g) CHECK(r.counts[size_t(g)] == want_ends[size_t(g)] - (g ? want_ends[size_t(g - 1)] : 0));
    }
  }

  TEST_CASE("moe_combine sums the weighted rows in slot order and skips positions outside d") {
    // d rows (fp32, n = 3): row 0 = {1e8, 1, 2}, row 1 = {1, 2, 3}, row 2 = {-1e8, 4, 8}, row 3 = NaN (never read)
    const float nan = std::nanf("");
    const std::vector<float> d = {1e8f, 1, 2, 1, 2, 3, -1e8f, 4, 8, nan, nan, nan};
    // token 0 -> rows 0, 1, 2 (weights 1, 1, 1): 1e8 + 1 rounds back to 1e8, then 0: the order is fixed
    // token 1 -> rows 1, -1 (skipped), 5 (past d_rows = 3: skipped), weights 0.5, 9, 9
    // token 2 -> every entry skipped: 0
    const std::vector<int32_t> positions = {0, 1, 2, 1, -1, 5, -1, -1, 3};
    const std::vector<float> weights = {1, 1, 1, 0.5f, 9, 9, 1, 1, 1};
    std::vector<float> out(9, nan);
    MoeCombineArgs a;
    a.d = d.data(), a.d_dtype = DType::fp32, a.d_rows = 3;
    a.positions = positions.data(), a.weights = weights.data();
    a.tokens = 3, a.topk = 3, a.n = 3;
    a.out = out.data(), a.out_dtype = DType::fp32;
    cpu::moe_combine(a);
    CHECK(out == std::vector<float>{0.0f, 7.0f, 13.0f, 0.5f, 1.0f, 1.5f, 0.0f, 0.0f, 0.0f});

    // BF16 weights and output, strided rows: one fma per term, one rounding at the end
    const std::vector<uint16_t> wb = {0x3F80, 0x4000, 0x3F80, 0x3F00, 0x4110, 0x4110, 0x3F80, 0x3F80, 0x3F80};  // 1, 2, 1, 0.5, 9, 9, 1, 1, 1
    std::vector<uint16_t> ob(3 * 4, 0xFFFF);
    a.weights = wb.data(), a.weights_dtype = DType::bf16;
    a.out = ob.data(), a.out_dtype = DType::bf16, a.out_row_stride = 4;
    cpu::moe_combine(a);
    // token 0: 1e8 + 2 * 1 = 1e8 (fp32), then - 1e8 = 0; 1 + 4 + 4 = 9; 2 + 6 + 8 = 16
    CHECK(ob[0] == 0x0000);
    CHECK(ob[1] == 0x4110);
    CHECK(ob[2] == 0x4180);
    CHECK(ob[3] == 0xFFFF);  // past n: the stride's padding is left alone
  }

  TEST_CASE("bad arguments get an error naming the argument") {
    int32_t buf[64] = {};
    MoeRouteArgs r;
    r.topk_ids = buf, r.tokens = 4, r.topk = 2, r.groups = 8, r.group_ends = buf, r.row_index = buf;
    auto route = [](const MoeRouteArgs& a) { cpu::moe_route(a); };
    MoeRouteArgs b = r;
    b.groups = 0;
    expect_error(b, route, Status::invalid_argument, "groups = 0 must be positive");
    b = r, b.groups = 513;
    expect_error(b, route, Status::unsupported, "groups = 513 is more than 512");
    b = r, b.topk = 0;
    expect_error(b, route, Status::invalid_argument, "topk = 0 must be positive");
    b = r, b.tokens = -1;
    expect_error(b, route, Status::invalid_argument, "tokens = -1 is negative");
    b = r, b.tokens = int64_t(1) << 31;
    expect_error(b, route, Status::invalid_argument, "tokens * topk");
    b = r, b.first_expert = -3;
    expect_error(b, route, Status::invalid_argument, "first_expert = -3 is negative");
    b = r, b.group_ends = nullptr;
    expect_error(b, route, Status::invalid_argument, "group_ends is null");
    b = r, b.topk_ids = nullptr;
    expect_error(b, route, Status::invalid_argument, "topk_ids is null");
    b = r, b.row_index = nullptr;
    expect_error(b, route, Status::invalid_argument, "row_index is null");
    b = r, b.topk_ids_type = IndexType::int64, b.topk_ids = reinterpret_cast<const char*>(buf) + 4;
    expect_error(b, route, Status::invalid_argument, "topk_ids = ");
    b = r, b.positions = reinterpret_cast<int32_t*>(reinterpret_cast<char*>(buf) + 2);
    expect_error(b, route, Status::invalid_argument, "positions = ");
    b = r, b.workspace = buf, b.tokens = 600, b.topk = 8;  // 4800 entries: three CTAs, 3 * 8 counts
    b.row_index = nullptr;
    b.workspace_bytes = 95;
    expect_error(b, [](const MoeRouteArgs& a) { moe_route(a, nullptr); }, Status::invalid_argument, "row_index is null");
    b.row_index = buf;
    expect_error(b, [](const MoeRouteArgs& a) { moe_route(a, nullptr); }, Status::invalid_argument,
                 "workspace_bytes = 95 is less than the 96 bytes moe_route needs for 600 x 8 entries and 8 groups");
    b.workspace = reinterpret_cast<char*>(buf) + 2, b.workspace_bytes = 96;
    expect_error(b, [](const MoeRouteArgs& a) { moe_route(a, nullptr); }, Status::invalid_argument, "workspace = ");
    // the GPU entry point checks the same before it needs a device
    b = r, b.groups = 0;
    expect_error(b, [](const MoeRouteArgs& a) { moe_route(a, nullptr); }, Status::invalid_argument, "nvfp4::jit::moe_route: groups");

    float f[64] = {};
    MoeCombineArgs c;
    c.d = f, c.d_rows = 4, c.positions = buf, c.weights = f, c.tokens = 2, c.topk = 2, c.n = 8, c.out = f;
    auto combine = [](const MoeCombineArgs& a) { cpu::moe_combine(a); };
    MoeCombineArgs e = c;
    e.n = 0;
    expect_error(e, combine, Status::invalid_argument, "n = 0 must be positive");
    e = c, e.topk = 0;
    expect_error(e, combine, Status::invalid_argument, "topk = 0 must be positive");
    e = c, e.d_dtype = DType::nvfp4;
    expect_error(e, combine, Status::unsupported, "d_dtype = nvfp4");
    e = c, e.weights_dtype = DType::fp16;
    expect_error(e, combine, Status::unsupported, "weights_dtype = fp16");
    e = c, e.out_dtype = DType::nvfp4;
    expect_error(e, combine, Status::unsupported, "out_dtype = nvfp4");
    e = c, e.d_row_stride = 4;
    expect_error(e, combine, Status::invalid_argument, "d_row_stride = 4 is less than n = 8");
    e = c, e.out_row_stride = 7;
    expect_error(e, combine, Status::invalid_argument, "out_row_stride = 7 is less than n = 8");
    e = c, e.positions = nullptr;
    expect_error(e, combine, Status::invalid_argument, "positions is null");
    e = c, e.weights = nullptr;
    expect_error(e, combine, Status::invalid_argument, "weights is null");
    e = c, e.out = nullptr;
    expect_error(e, combine, Status::invalid_argument, "out is null");
    e = c, e.d = nullptr;
    expect_error(e, combine, Status::invalid_argument, "d is null");
    e = c, e.d_rows = -1;
    expect_error(e, combine, Status::invalid_argument, "d_rows = -1 is negative");
    e = c, e.out = reinterpret_cast<char*>(f) + 1;
    expect_error(e, combine, Status::invalid_argument, "out = ");
  }

  TEST_CASE("moe_route's workspace: none up to 4096 entries, then a count per CTA of 2048 and expert") {
    MoeRouteArgs r;
    r.topk = 8, r.groups = 256;
    for (const auto& [tokens, bytes] : {std::pair<int64_t, int64_t>{0, 0}, {1, 0}, {512, 0}, {513, 3 * 256 * 4},
                                        {4096, 16 * 256 * 4}, {16384, 64 * 256 * 4}}) {
      r.tokens = tokens;
      CHECK_MESSAGE(moe_route_workspace_bytes(r) == bytes, "tokens = " << tokens);
    }
    r.tokens = int64_t(1) << 31;
    expect_error(r, [](const MoeRouteArgs& a) { moe_route_workspace_bytes(a); }, Status::invalid_argument,
                 "nvfp4::jit::moe_route_workspace_bytes: tokens * topk");
    nvfp4_moe_route_args c;
    nvfp4_moe_route_args_init(&c);
    CHECK(c.workspace == nullptr);
    CHECK(c.workspace_bytes == 0);
    c.tokens = 4096, c.topk = 8, c.groups = 128;
    CHECK(nvfp4_jit_moe_route_workspace_bytes(&c) == 16 * 128 * 4);
    c.groups = 0;
    CHECK(nvfp4_jit_moe_route_workspace_bytes(&c) == -1);
    CHECK(std::string(nvfp4_jit_last_error()).find("nvfp4_jit_moe_route_workspace_bytes: groups = 0 must be positive") == 0);
    CHECK(nvfp4_jit_moe_route_workspace_bytes(nullptr) == -1);
  }

  TEST_CASE("the C API's moe_route and moe_combine check their arguments as the C++ ones do") {
    CHECK(nvfp4_jit_moe_route(nullptr, nullptr) == NVFP4_INVALID_ARGUMENT);
    CHECK(std::string(nvfp4_jit_last_error()).find("nvfp4_jit_moe_route: args is null") != std::string::npos);
    nvfp4_moe_route_args r;
    nvfp4_moe_route_args_init(&r);
    r.topk = 8;
    CHECK(nvfp4_jit_moe_route(&r, nullptr) == NVFP4_INVALID_ARGUMENT);
    CHECK(std::string(nvfp4_jit_last_error()).find("nvfp4_jit_moe_route: groups = 0 must be positive") == 0);
    r.groups = 600;
    CHECK(nvfp4_jit_moe_route(&r, nullptr) == NVFP4_UNSUPPORTED);
    CHECK(nvfp4_jit_moe_combine(nullptr, nullptr) == NVFP4_INVALID_ARGUMENT);
    nvfp4_moe_combine_args c;
    nvfp4_moe_combine_args_init(&c);
    c.topk = 2, c.n = 16, c.weights_dtype = NVFP4_DTYPE_FP32, c.d_dtype = NVFP4_DTYPE_BF16, c.out_dtype = NVFP4_DTYPE_BF16;
    CHECK(nvfp4_jit_moe_combine(&c, nullptr) == NVFP4_OK);  // no tokens: validated, no work
    c.weights_dtype = NVFP4_DTYPE_FP16;
    CHECK(nvfp4_jit_moe_combine(&c, nullptr) == NVFP4_UNSUPPORTED);
    CHECK(std::string(nvfp4_jit_last_error()).find("weights_dtype = fp16") != std::string::npos);
  }

  TEST_CASE("prewarm of a grouped weight holds its routing and combine kernels; a dense weight's none") {
    const std::vector<KernelSpec> grouped = prewarm_specs({WeightShape{"experts", 1536, 2048, 128}}, {Arch::sm_90a}, 132);
    auto has = [&](const KernelSpec& spec) { return std::find(grouped.begin(), grouped.end(), spec) != grouped.end(); };
    for (const bool ids64 : {false, true})
      for (const bool count : {false, true}) CHECK(has(moe_route_spec(Arch::sm_90a, 128, ids64, count)));
    CHECK(has(moe_combine_spec(Arch::sm_90a, DType::bf16, DType::fp32, DType::bf16, 8)));
    for (const KernelSpec& spec : prewarm_specs({WeightShape{"dense", 1536, 2048, 1}}, {Arch::sm_90a}, 132))
      CHECK(spec.op != Op::moe_route);
  }

  TEST_CASE("every moe_route and moe_combine kernel compiles (NVRTC, sm_90a and sm_120a)") {
    for (Arch arch : {Arch::sm_90a, Arch::sm_120a}) {
      std::vector<KernelSpec> specs = {moe_route_spec(arch, 1, false), moe_route_spec(arch, 256, true),
                                       moe_route_spec(arch, kMoeRouteMaxGroups, false),
                                       moe_route_spec(arch, 1, false, true), moe_route_spec(arch, 256, true, true),
                                       moe_route_spec(arch, kMoeRouteMaxGroups, false, true), moe_route_spec(arch, 72, false, true)};
      for (DType d : {DType::bf16, DType::fp16, DType::fp32})
        for (int vec : {1, 8}) specs.push_back(moe_combine_spec(arch, d, vec == 8 ? DType::fp32 : DType::bf16, d, vec));
      specs.push_back(moe_combine_spec(arch, DType::bf16, DType::fp32, DType::fp32, 8));
      for (const KernelSpec& spec : specs) {
        CAPTURE(spec.describe());
        const GeneratedKernel kernel = generate(spec);
        std::vector<char> cubin;
        CHECK_NOTHROW(cubin = nvrtc_compile(kernel, arch));
        CHECK(cubin.size() > 4);
      }
    }
  }
}
