// nvfp4-jit bench grouped: grouped_gemm on MoE expert shapes and routings, beside the byte floor,
// our dense gemm, a cuBLAS loop and cuBLAS's grouped call; then the batched layout.
#include <algorithm>
#include <cstdio>
#include <functional>
#include <random>
#include <string>

#include <fmt/format.h>

#include "cli/bench_util.hpp"
#include "cli/benches.hpp"
#include "cli/cublas.hpp"
#include "nvfp4/jit.hpp"
#include "ops/gemm/call.hpp"
#include "ops/gemm/routing_draw.hpp"

namespace nvfp4::jit::cli {

using namespace detail;

namespace {

// One MoE layer's expert GEMM: `experts` weights [n, k], tokens routed to `topk` of them each.
struct MoeShape {
  std::string name;
  int64_t n, k;
  int experts, topk;
};

// The batched layout (every token to every group: DeepSeek-V4's wo_a, "tgk,gnk->tgn") against our
// dense gemm on the same work: [tokens, groups * n] from one weight of groups * n rows, which
// has the same weight bytes and products (its A is one row per token instead of one per group).
// A prepacked weight of groups x n rows (n a multiple of 128) is the same bytes as groups
// prepacked weights of n rows, so both read the same buffers. Appends to `json`.
void bench_batched(EventTimer& timer, int runs, double copy_bps, const Cublas& cublas, Json& json, std::mt19937& rng) {
  constexpr int G = 8;
  constexpr int64_t N = 1536, K = 8192;
  std::printf("\nbench grouped, batched layout: wo_a, %d groups, A [tokens, %d, %lld] BF16, prepacked NVFP4 [%d, %lld, %lld],\n",
              G, G, (long long)K, G, (long long)N, (long long)K);
  std::printf("  D [tokens, %d, %lld] BF16; dense: our gemm [tokens, %lld] x [%lld, %lld] (same weight bytes and products)\n", G,
              (long long)N, (long long)K, (long long)(G * N), (long long)K);
  std::printf("  cuBLAS: cublasGemmStridedBatchedEx BF16 over the groups on the same strided A and D\n");
  std::printf("  %-8s %6s %9s %9s %8s %9s %8s %9s %10s %8s\n", "shape", "tokens", "ours us", "floor us", "of floor", "dense us",
              "vs dense", "TFLOP/s", "cuBLAS us", "speedup");
  const int64_t w_bytes = prepacked_bytes(G * N, K);
  constexpr int kCopies = 3;  // 3 x 53 MB: past the H100's 50 MB L2
  std::vector<DeviceBuffer> weights;
  {
    DeviceBuffer packed = to_device(random_bytes(size_t(G * N * K / 2), rng)),
                 scales = to_device(random_scales(size_t(G * N * K / 16), rng));
    for (int i = 0; i < kCopies; ++i) {
      weights.emplace_back(size_t(w_bytes));
      PrepackArgs pre;
      pre.weight.data = packed.get(), pre.weight.scales = scales.get();
      pre.n = G * N, pre.k = K, pre.out = weights.back().get();
      prepack(pre, nullptr);
    }
  }
  DeviceBuffer bf16_weights(cublas.ok() ? size_t(G * N * K * 2) : 16);  // 201 MB: past L2 by itself
  bf16_weights.fill(0x3C);
  for (int64_t tokens : {int64_t(1), int64_t(16), int64_t(512), int64_t(4096)}) {
    DeviceBuffer a(size_t(tokens * G * K * 2)), d(size_t(tokens * G * N * 2));
    a.fill(0x3C);  // a constant (the time does not depend on the values): no host copy of 512 MB
    GroupedGemmArgs g;
    g.groups = G;
    g.layout = GroupedLayout::batched;
    g.gemm.m = tokens, g.gemm.n = N, g.gemm.k = K;
    g.gemm.a = a.get();
    g.gemm.b.global_scale.value = 1.0f / 256;
    g.gemm.b_prepacked = true;
    g.gemm.weights_static = true;
    g.gemm.d = d.get();
    GemmArgs dense = g.gemm;
    dense.n = G * N;
    std::vector<std::function<void(int)>> bodies{[&](int i) {
                                                   g.gemm.b.data = weights[size_t(i % kCopies)].get();
                                                   grouped_gemm(g, nullptr);
                                                 },
                                                 [&](int i) {
                                                   dense.b.data = weights[size_t(i % kCopies)].get();
                                                   gemm(dense, nullptr);
                                                 }};
    if (cublas.ok())
      bodies.push_back([&](int) {
        cublas.strided_bf16(int(tokens), int(N), int(K), a.get(), G * K, K, bf16_weights.get(), d.get(), G * N, N, G);
      });
    const std::vector<double> us = time_us(timer, runs, bodies);
    const double theirs = cublas.ok() ? us[2] : 0;
    const double bytes = double(w_bytes) + 2.0 * tokens * G * (K + N);
    const double floor_us = bytes / copy_bps * 1e6, tflops = 2.0 * tokens * G * N * K / us[0] / 1e6;
    std::printf("  %-8s %6lld %9.2f %9.2f %7.0f%% %9.2f %7.2fx %9.1f %10.2f %7.2fx\n", "wo_a", (long long)tokens, us[0],
                floor_us, 100 * floor_us / us[0], us[1], us[1] / us[0], tflops, theirs, theirs > 0 ? theirs / us[0] : 0.0);
    std::fflush(stdout);
    json.push_back({{"shape", "wo_a batched"}, {"groups", G}, {"n", N}, {"k", K}, {"tokens", tokens}, {"us", rounded(us[0], 3)},
                    {"floor_us", rounded(floor_us, 3)}, {"dense_us", rounded(us[1], 3)}, {"cublas_us", rounded(theirs, 3)}});
  }
}

}  // namespace

Json bench_grouped(bool quick, const GroupedBenchFilter& only) {
  const std::vector<int64_t>& expected_ms = only.expected_ms;
  std::mt19937 rng(std::random_device{}());
  EventTimer timer;
  Cublas cublas;
  const int runs = quick ? 5 : 20;
  const double copy_bps = copy_bandwidth(timer);
  std::printf("bench grouped: contiguous grouped_gemm, BF16 activations, prepacked NVFP4 experts, BF16 out,\n");
  std::printf("  routing uniform or Zipf (s = 1.2), distinct experts per token, median of %d runs, columns timed in turns\n", runs);
  std::printf("  floor: the touched experts' NVFP4 bytes plus A and D at %.0f GB/s (copy); copy: a device copy moving as\n"
              "  many bytes, timed like the GEMM (calls back to back: what a kernel of that size costs); dense: our gemm on\n",
              copy_bps / 1e9);
  std::printf("  all routed rows and one expert's weight; cuBLAS: BF16 GEMM per touched expert (a loop), and\n");
  std::printf("  grouped: one cublasGemmGroupedBatchedEx call over the touched experts (where libcublas has it);\n");
  std::printf("  route: moe_route of the ids (the GEMM's group_ends); combine: moe_combine of the GEMM's output\n");
  std::printf("  (BF16, FP32 weights) and its floor (rows * n * 2 read + tokens * n * 2 written); W4A8: the same calls in\n"
              "  the W4A8 precision mode (sm_90a: FP8 tensor cores, its activation pass included), in the same turns\n");
  std::printf("  %-14s %7s %6s %6s %8s %9s %9s %8s %8s %9s %10s %9s %8s %10s %8s %10s %8s\n", "shape", "routing", "tokens",
              "rows", "experts", "ours us", "floor us", "of floor", "copy us", "dense us", "cuBLAS us", "speedup", "route us",
              "combine us", "of floor", "grouped us", "speedup");
  if (!expected_ms.empty()) {
    std::printf("  then ours with expected_m =");
    for (int64_t v : expected_ms) std::printf(" %lld", (long long)v);
    std::printf(" (us), in the same turns\n");
  }
  std::vector<MoeShape> shapes = quick ? std::vector<MoeShape>{{"dsv3 gate_up", 4096, 7168, 256, 8},
                                                                {"qwen3-30b", 1536, 2048, 128, 8}}
                                       : std::vector<MoeShape>{{"dsv3 gate_up", 4096, 7168, 256, 8},
                                                               {"dsv3 down", 7168, 2048, 256, 8},
                                                               {"qwen3-30b", 1536, 2048, 128, 8},
                                                               {"gpt-oss-120b", 5760, 2880, 128, 4}};
  if (!only.weights.empty()) {
    shapes.clear();
    for (const detail::WeightShape& w : only.weights)
      shapes.push_back({fmt::format("{}x{}x{}", w.n, w.k, w.groups), w.n, w.k, w.groups, only.topk});
  }
  const std::vector<int64_t> token_counts = !only.tokens.empty() ? only.tokens
                                            : quick               ? std::vector<int64_t>{1, 16, 512, 4096}
                                                                  : std::vector<int64_t>{1, 16, 128, 512, 4096, 16384};
  Json json = Json::array();
  for (const MoeShape& s : shapes) {
    // every expert's weight: one random weight prepacked into each slot (distinct addresses, so
    // L2 holds none of them for the next call); BF16 copies for the peer, filled with a constant
    const int64_t expert_bytes = prepacked_bytes(s.n, s.k);
    DeviceBuffer packed = to_device(random_bytes(size_t(s.n * s.k / 2), rng)),
                 scales = to_device(random_scales(size_t(s.n * s.k / 16), rng));
    DeviceBuffer experts(size_t(expert_bytes * s.experts));
    for (int e = 0; e < s.experts; ++e) {
      PrepackArgs pre;
      pre.weight.data = packed.get(), pre.weight.scales = scales.get();
      pre.n = s.n, pre.k = s.k, pre.out = experts.as<unsigned char>() + e * expert_bytes;
      prepack(pre, nullptr);
    }
    DeviceBuffer bf16_experts(cublas.ok() ? size_t(s.n * s.k * 2) * s.experts : 16);
    bf16_experts.fill(0x3C);
    std::vector<std::pair<int64_t, RoutingDraw>> cases;
    for (int64_t tokens : token_counts)
      for (RoutingDraw routing : {RoutingDraw::uniform, RoutingDraw::zipf}) cases.emplace_back(tokens, routing);
    for (const auto& [tokens, routing] : cases) {
      const std::vector<int32_t> ids = draw_topk_ids(routing, tokens, s.experts, s.topk, rng);
      const std::vector<int32_t> counts = rows_per_expert(ids, s.experts);
      int64_t rows = 0, touched = 0;
      for (int e = 0; e < s.experts; ++e) {
        rows += counts[size_t(e)];
        touched += counts[size_t(e)] > 0;
      }
      // the GEMM's group_ends and the combine's positions from moe_route on the device
      std::vector<float> router_weights(ids.size(), 1.0f / float(s.topk));
      DeviceBuffer a = to_device(random_bf16(size_t(rows * s.k), rng)), d(size_t(rows * s.n * 2)),
                   d_ids = to_device(ids), d_ends(size_t(s.experts) * 4), d_rows(ids.size() * 4),
                   d_positions(ids.size() * 4), d_router_weights = to_device(router_weights),
                   d_out(size_t(tokens * s.n * 2));
      MoeRouteArgs route;
      route.topk_ids = d_ids.get(), route.tokens = tokens, route.topk = s.topk, route.groups = s.experts;
      route.group_ends = d_ends.as<int32_t>(), route.row_index = d_rows.as<int32_t>(), route.positions = d_positions.as<int32_t>();
      route.workspace_bytes = moe_route_workspace_bytes(route);
      DeviceBuffer d_route_workspace(size_t(std::max<int64_t>(4, route.workspace_bytes)));
      route.workspace = d_route_workspace.get();
      moe_route(route, nullptr);
      MoeCombineArgs combine;
      combine.d = d.get(), combine.d_rows = rows, combine.positions = route.positions;
      combine.weights = d_router_weights.get(), combine.tokens = tokens, combine.topk = s.topk, combine.n = s.n;
      combine.out = d_out.get();
      GroupedGemmArgs g;
      g.groups = s.experts;
      g.gemm.m = rows, g.gemm.n = s.n, g.gemm.k = s.k;
      g.gemm.a = a.get();
      g.gemm.b.data = experts.get();
      g.gemm.b.global_scale.value = 1.0f / 256;
      g.gemm.b_prepacked = true;
      g.gemm.weights_static = true;
      g.gemm.d = d.get();
      g.group_ends = d_ends.as<int32_t>();
      GemmArgs dense = g.gemm;
      std::vector<std::function<void(int)>> bodies{[&](int) { grouped_gemm(g, nullptr); },
                                                   [&](int) { gemm(dense, nullptr); }};
      std::vector<GroupedGemmArgs> hinted(expected_ms.size(), g);
      for (size_t i = 0; i < expected_ms.size(); ++i) hinted[i].expected_m = expected_ms[i];
      if (cublas.ok())
        bodies.push_back([&](int) {
          int64_t row = 0;
          for (int e = 0; e < s.experts; ++e) {
            const int64_t r = counts[size_t(e)];
            if (r)
              cublas.gemm_bf16(int(r), int(s.n), int(s.k), a.as<uint16_t>() + row * s.k,
                               bf16_experts.as<uint16_t>() + int64_t(e) * s.n * s.k, d.as<uint16_t>() + row * s.n);
            row += r;
          }
        });
      // the grouped peer's pointer arrays (device) and row counts, touched experts only
      std::vector<int> peer_rows;
      std::vector<const void*> peer_a, peer_w;
      std::vector<void*> peer_d;
      for (int64_t e = 0, row = 0; e < s.experts; row += counts[size_t(e)], ++e)
        if (counts[size_t(e)]) {
          peer_rows.push_back(counts[size_t(e)]);
          peer_a.push_back(a.as<uint16_t>() + row * s.k);
          peer_w.push_back(bf16_experts.as<uint16_t>() + e * s.n * s.k);
          peer_d.push_back(d.as<uint16_t>() + row * s.n);
        }
      DeviceBuffer peer_a_d = to_device(peer_a), peer_w_d = to_device(peer_w), peer_d_d = to_device(peer_d);
      const bool grouped_peer = cublas.ok() && cublas.has_grouped();
      if (grouped_peer)
        bodies.push_back([&](int) {
          cublas.grouped_bf16(peer_rows, int(s.n), int(s.k), peer_a_d.as<const void*>(), peer_w_d.as<const void*>(),
                              peer_d_d.as<void*>());
        });
      // the same call reading the tokens' rows through moe_route's row_index (no sorted copy of A)
      DeviceBuffer tokens_a = to_device(random_bf16(size_t(tokens * s.k), rng));
      GroupedGemmArgs gathered = g;
      gathered.gemm.a = tokens_a.get();
      gathered.row_index = route.row_index, gathered.a_rows = tokens;
      const size_t gathered_at = bodies.size();
      bodies.push_back([&](int) { grouped_gemm(gathered, nullptr); });
      // the W4A8 mode on the same calls (sorted rows, and gathered)
      GroupedGemmArgs w4a8 = g, w4a8_gathered = gathered;
      w4a8.gemm.precision = w4a8_gathered.gemm.precision = GemmPrecision::w4a8;
      // one workspace given to every call that takes one (W4A8's E4M3 rows, the exact mode's
      // gathered rows), sized for each
      DeviceBuffer workspace(size_t(std::max<int64_t>({16, grouped_gemm_workspace_bytes(gathered),
                                                       grouped_gemm_workspace_bytes(w4a8),
                                                       grouped_gemm_workspace_bytes(w4a8_gathered)})));
      for (GroupedGemmArgs* w : {&gathered, &w4a8, &w4a8_gathered})
        w->gemm.workspace = workspace.get(), w->gemm.workspace_bytes = int64_t(workspace.bytes());
      const size_t w4a8_at = bodies.size();
      bodies.push_back([&](int) { grouped_gemm(w4a8, nullptr); });
      bodies.push_back([&](int) { grouped_gemm(w4a8_gathered, nullptr); });
      // a copy moving the floor's bytes (half read from the experts, half written), in the same turns
      const double bytes = double(touched) * s.n * s.k * (0.5 + 1.0 / 16) + 2.0 * rows * (s.k + s.n);
      const size_t copy_bytes = std::min(size_t(bytes / 2), size_t(expert_bytes * s.experts)) / 16 * 16;
      DeviceBuffer copy_dst(copy_bytes);
      const size_t copy_at = bodies.size();
      bodies.push_back([&](int) {
        check_cu(driver().cuMemcpyDtoDAsync(reinterpret_cast<CUdeviceptr>(copy_dst.get()), reinterpret_cast<CUdeviceptr>(experts.get()),
                                            copy_bytes, nullptr),
                 "cuMemcpyDtoDAsync");
      });
      const size_t hinted_at = bodies.size();
      for (const GroupedGemmArgs& h : hinted) bodies.push_back([&](int) { grouped_gemm(h, nullptr); });
      const std::vector<double> us = time_us(timer, runs, bodies);
      const double copy_us = us[copy_at];
      const double grouped_us = grouped_peer ? us[gathered_at - 1] : 0, gathered_us = us[gathered_at];
      const double route_us = time_us(timer, runs, [&](int) { moe_route(route, nullptr); });
      const double combine_us = time_us(timer, runs, [&](int) { moe_combine(combine, nullptr); });
      const double floor_us = bytes / copy_bps * 1e6, theirs = cublas.ok() ? us[2] : 0;
      const double combine_floor_us = 2.0 * s.n * (rows + tokens) / copy_bps * 1e6;
      const char* routing_name = routing == RoutingDraw::zipf ? "zipf" : "uniform";
      std::printf("  %-14s %7s %6lld %6lld %8lld %9.2f %9.2f %7.0f%% %8.2f %9.2f %10.2f %8.2fx %8.2f %10.2f %7.0f%% %10.2f %7.2fx\n",
                  s.name.c_str(), routing_name, (long long)tokens, (long long)rows, (long long)touched, us[0], floor_us,
                  100 * floor_us / us[0], copy_us, us[1], theirs, theirs > 0 ? theirs / us[0] : 0.0, route_us, combine_us,
                  100 * combine_floor_us / combine_us, grouped_us, grouped_us > 0 ? grouped_us / us[0] : 0.0);
      std::printf("      rows gathered through row_index: %.2f us (%.2fx the sorted rows' time)\n", gathered_us,
                  gathered_us / us[0]);
      const double w4a8_us = us[w4a8_at], w4a8_gathered_us = us[w4a8_at + 1];
      const int64_t expected_m = grouped_default_expected_m(rows, s.experts);
      std::printf("      W4A8 (expected_m %lld: %s): %.2f us (%.2fx the exact mode's speed, %.1f TFLOP/s), "
                  "gathered %.2f us (%.2fx the exact gathered)\n",
                  (long long)expected_m, w4a8_runs_exact(true, expected_m, s.n) ? "exact mode" : "FP8", w4a8_us, us[0] / w4a8_us,
                  2.0 * rows * s.n * s.k / w4a8_us / 1e6, w4a8_gathered_us, gathered_us / w4a8_gathered_us);
      Json hinted_json = Json::array();
      for (size_t i = 0; i < hinted.size(); ++i) {
        std::printf("      expected_m %lld: %.2f us (%.2fx the default's time)\n", (long long)expected_ms[i],
                    us[hinted_at + i], us[hinted_at + i] / us[0]);
        hinted_json.push_back({{"expected_m", expected_ms[i]}, {"us", rounded(us[hinted_at + i], 3)}});
      }
      std::fflush(stdout);
      json.push_back({{"shape", s.name},
                      {"n", s.n},
                      {"k", s.k},
                      {"experts", s.experts},
                      {"topk", s.topk},
                      {"routing", routing_name},
                      {"tokens", tokens},
                      {"rows", rows},
                      {"experts_touched", touched},
                      {"us", rounded(us[0], 3)},
                      {"floor_us", rounded(floor_us, 3)},
                      {"copy_us", rounded(copy_us, 3)},
                      {"dense_us", rounded(us[1], 3)},
                      {"cublas_loop_us", rounded(theirs, 3)},
                      {"route_us", rounded(route_us, 3)},
                      {"combine_us", rounded(combine_us, 3)},
                      {"combine_floor_us", rounded(combine_floor_us, 3)},
                      {"cublas_grouped_us", rounded(grouped_us, 3)},
                      {"gathered_us", rounded(gathered_us, 3)},
                      {"w4a8_us", rounded(w4a8_us, 3)},
                      {"w4a8_gathered_us", rounded(w4a8_gathered_us, 3)},
                      {"hinted", hinted_json}});
    }
  }
  if (only.weights.empty()) bench_batched(timer, runs, copy_bps, cublas, json, rng);
  return json;
}

}  // namespace nvfp4::jit::cli
