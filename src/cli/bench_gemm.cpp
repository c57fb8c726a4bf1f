// nvfp4-jit bench gemm: our W4A16 and W4A4 GEMMs side by side with cuBLAS BF16 on the same shapes, in
// one process, weights rotated so neither reads them from L2, CUDA events, medians.
// cuBLAS is dlopened here, so the library itself never depends on it.
#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <numeric>
#include <random>
#include <string>

#include <fmt/format.h>

#include "cli/bench_util.hpp"
#include "core/gpu_util.hpp"
#include "nvfp4/jit.hpp"
#include "ops/gemm/gemm.hpp"
#include "ops/gemm/m_buckets.hpp"
#include "ops/gemm/sm90/tiles.hpp"

namespace nvfp4::jit::cli {

using namespace detail;

namespace {

// The few cuBLAS entry points the comparison needs (values from cublas_api.h / library_types.h).
class Cublas {
 public:
  Cublas() {
    for (const char* name : {"libcublas.so.13", "libcublas.so.12", "libcublas.so"})
      if ((lib_ = dlopen(name, RTLD_NOW | RTLD_LOCAL))) break;
    if (!lib_) return;
    create_ = reinterpret_cast<int (*)(void**)>(dlsym(lib_, "cublasCreate_v2"));
    gemm_ex_ = reinterpret_cast<GemmEx>(dlsym(lib_, "cublasGemmEx"));
    strided_ = reinterpret_cast<StridedEx>(dlsym(lib_, "cublasGemmStridedBatchedEx"));
    grouped_ = reinterpret_cast<GroupedEx>(dlsym(lib_, "cublasGemmGroupedBatchedEx"));  // CUDA 12.5 and later
    if (!create_ || !gemm_ex_ || create_(&handle_) != 0) handle_ = nullptr;
  }
  bool ok() const { return handle_ != nullptr; }
  // D[m, n] (row-major BF16) = A[m, k] . W[n, k]^T, i.e. column-major D^T = W^T' . A^T.
  void gemm_bf16(int m, int n, int k, const void* a, const void* w, void* d) const {
    const float one = 1.0f, zero = 0.0f;
    constexpr int kOpN = 0, kOpT = 1, kBf16 = 14, kCompute32F = 68, kDefaultAlgo = -1;
    if (gemm_ex_(handle_, kOpT, kOpN, n, m, k, &one, w, kBf16, k, a, kBf16, k, &zero, d, kBf16, n, kCompute32F,
                 kDefaultAlgo) != 0)
      throw std::runtime_error("cublasGemmEx failed");
  }
  // `batches` of gemm_bf16, A's, W's and D's rows `lda`, k and `ldd` apart and the batches
  // `stride_a`, n * k and `stride_d` apart (the batched grouped layout).
  void strided_bf16(int m, int n, int k, const void* a, int64_t lda, int64_t stride_a, const void* w, void* d, int64_t ldd,
                    int64_t stride_d, int batches) const {
    const float one = 1.0f, zero = 0.0f;
    constexpr int kOpN = 0, kOpT = 1, kBf16 = 14, kCompute32F = 68, kDefaultAlgo = -1;
    if (!strided_ || strided_(handle_, kOpT, kOpN, n, m, k, &one, w, kBf16, k, int64_t(n) * k, a, kBf16, int(lda), stride_a,
                              &zero, d, kBf16, int(ldd), stride_d, batches, kCompute32F, kDefaultAlgo) != 0)
      throw std::runtime_error("cublasGemmStridedBatchedEx failed");
  }
  bool has_grouped() const { return grouped_ != nullptr; }
  // One gemm_bf16 per group (rows[g] x n x k), in one cublasGemmGroupedBatchedEx call: `a`, `w`
  // and `d` are device arrays of the groups' pointers.
  void grouped_bf16(const std::vector<int>& rows, int n, int k, const void* const* a, const void* const* w,
                    void* const* d) const {
    const int groups = int(rows.size());
    const std::vector<int> op_t(size_t(groups), 1), op_n(size_t(groups), 0), ns(size_t(groups), n), ks(size_t(groups), k),
        ones(size_t(groups), 1);
    const std::vector<float> alpha(size_t(groups), 1.0f), beta(size_t(groups), 0.0f);
    constexpr int kBf16 = 14, kCompute32F = 68;
    if (grouped_(handle_, op_t.data(), op_n.data(), ns.data(), rows.data(), ks.data(), alpha.data(), w, kBf16, ks.data(), a,
                 kBf16, ks.data(), beta.data(), d, kBf16, ns.data(), groups, ones.data(), kCompute32F) != 0)
      throw std::runtime_error("cublasGemmGroupedBatchedEx failed");
  }

 private:
  using GemmEx = int (*)(void*, int, int, int, int, int, const void*, const void*, int, int, const void*, int, int,
                         const void*, void*, int, int, int, int);
  using StridedEx = int (*)(void*, int, int, int, int, int, const void*, const void*, int, int, long long, const void*, int,
                            int, long long, const void*, void*, int, int, long long, int, int, int);
  using GroupedEx = int (*)(void*, const int*, const int*, const int*, const int*, const int*, const void*,
                            const void* const*, int, const int*, const void* const*, int, const int*, const void*,
                            void* const*, int, const int*, int, const int*, int);
  StridedEx strided_ = nullptr;
  GroupedEx grouped_ = nullptr;
  void* lib_ = nullptr;
  void* handle_ = nullptr;
  int (*create_)(void**) = nullptr;
  GemmEx gemm_ex_ = nullptr;
};

// One weight [n, k] in NVFP4 and in BF16 (for cuBLAS), `copies` of each to rotate through
// (the same random content at different addresses: L2 keys on addresses).
// The NVFP4 copies also prepacked (gemm's own layout).
struct Weights {
  std::vector<DeviceBuffer> packed, scales, prepacked, bf16;
  Weights(int64_t n, int64_t k, int copies, bool with_bf16, std::mt19937& rng) {
    const std::vector<uint8_t> p = random_bytes(size_t(n * k / 2), rng), s = random_scales(size_t(n * k / 16), rng);
    const std::vector<uint16_t> b = with_bf16 ? random_bf16(size_t(n * k), rng) : std::vector<uint16_t>{};
    for (int i = 0; i < copies; ++i) {
      packed.push_back(to_device(p));
      scales.push_back(to_device(s));
      prepacked.emplace_back(size_t(prepacked_bytes(n, k)));
      PrepackArgs pre;
      pre.weight.data = packed.back().get(), pre.weight.scales = scales.back().get();
      pre.n = n, pre.k = k, pre.out = prepacked.back().get();
      prepack(pre, nullptr);
      if (with_bf16) bf16.push_back(to_device(b));
    }
  }
};

// Median GPU time per call of each body(i) (i counts its calls, for rotating weights), each
// called back to back kBatch times between two events as a serving loop launches its kernels:
// a call's time includes the gap to the next launch, but not the host's launch costs. The
// bodies take turns batch by batch, so a clock that drifts (a GPU at its power limit slows as
// it warms) weighs on all of them alike.
std::vector<double> time_us(EventTimer& timer, int runs, const std::vector<std::function<void(int)>>& bodies) {
  constexpr int kBatch = 8;
  std::vector<int> calls(bodies.size(), 0);
  for (size_t b = 0; b < bodies.size(); ++b)
    for (int i = 0; i < 3; ++i) bodies[b](calls[b]++);  // warm-up: kernels loaded, clocks up
  std::vector<std::vector<double>> us(bodies.size());
  for (int r = 0; r < runs; ++r)
    for (size_t b = 0; b < bodies.size(); ++b) {
      timer.start(nullptr);
      for (int c = 0; c < kBatch; ++c) bodies[b](calls[b]++);
      us[b].push_back(timer.stop_ms(nullptr) * 1e3 / kBatch);
    }
  std::vector<double> medians;
  for (auto& u : us) medians.push_back(median(u));
  return medians;
}

double time_us(EventTimer& timer, int runs, const std::function<void(int)>& body) {
  return time_us(timer, runs, std::vector<std::function<void(int)>>{body})[0];
}

double copy_bandwidth(EventTimer& timer) {
  const size_t bytes = size_t(1) << 30;
  DeviceBuffer src(bytes), dst(bytes);
  const double us = time_us(timer, 10, [&](int) {
    check_cu(driver().cuMemcpyDtoDAsync(reinterpret_cast<CUdeviceptr>(dst.get()), reinterpret_cast<CUdeviceptr>(src.get()),
                                        bytes, nullptr),
             "cuMemcpyDtoDAsync");
  });
  return 2.0 * bytes / (us * 1e-6);
}

}  // namespace

Json bench_gemm(bool quick, const GemmBenchFilter& only) {
  std::mt19937 rng(std::random_device{}());
  EventTimer timer;
  Cublas cublas;
  const int runs = quick ? 5 : 20;
  const double copy_bps = copy_bandwidth(timer);

  // cuBLAS BF16 at 8192^3: the tensor-core ceiling the compute floor uses.
  double peak_flops = 0;
  if (cublas.ok()) {
    DeviceBuffer a(size_t(8192) * 8192 * 2), w(size_t(8192) * 8192 * 2), d(size_t(8192) * 8192 * 2);
    const double us = time_us(timer, runs, [&](int) { cublas.gemm_bf16(8192, 8192, 8192, a.get(), w.get(), d.get()); });
    peak_flops = 2.0 * 8192 * 8192 * 8192 / (us * 1e-6);
  }
  std::printf("bench gemm: W4A16 (BF16 activations, NVFP4 weights, linear scales, BF16 out), median of %d runs\n", runs);
  std::printf("  copy bandwidth %.0f GB/s; cuBLAS BF16 8192^3 %.0f TFLOP/s%s\n", copy_bps / 1e9, peak_flops / 1e12,
              cublas.ok() ? "" : " (cuBLAS not found: no comparison)");
  std::printf("  GPU time per call, calls back to back (8 between two events), the columns timed in turns\n");
  std::printf("  ours: the weight as stored; prepacked: after prepack(); early: prepacked and weights_static\n");
  std::printf("  (may start while the previous call runs); W4A4: NVFP4 activations, early\n");
  std::printf("  %6s %6s %6s %9s %8s %8s %8s %9s %11s %7s %12s %8s %7s %8s %8s %10s %7s\n", "M", "N", "K", "ours us",
              "TFLOP/s", "GB/s", "floor us", "of floor", "cuBLAS us", "speedup", "prepacked us", "of floor", "speedup",
              "early us", "of floor", "W4A4 us", "speedup");

  struct Shape {
    int64_t m, n, k;
  };
  std::vector<Shape> shapes;
  if (!only.weights.empty() || !only.ms.empty()) {  // just what was asked for; the other defaults to 8192,8192 / M 1, 16, 128, 4096
    const std::vector<int64_t> ms = !only.ms.empty() ? only.ms : std::vector<int64_t>{1, 16, 128, 4096};
    const std::vector<detail::WeightShape> weights =
        only.weights.empty() ? std::vector<detail::WeightShape>{{"", 8192, 8192}} : only.weights;
    for (int64_t m : ms)
      for (const auto& w : weights) shapes.push_back({m, w.n, w.k});
  } else {
    for (int64_t m : {1, 16, 128})
      for (auto [n, k] : {std::pair<int64_t, int64_t>{8192, 8192}, {28672, 4096}, {4096, 14336}}) shapes.push_back({m, n, k});
    for (int64_t m : {4096, 8192}) shapes.push_back({m, 8192, 8192});
    if (!quick)
      for (int64_t m : {7, 32, 64, 100, 129, 192, 256, 257, 384, 513, 768, 1000, 2048, 3000, 16384}) shapes.push_back({m, 8192, 8192});
  }

  Json json = {{"copy_gbps", rounded(copy_bps / 1e9, 1)}, {"cublas_bf16_peak_tflops", rounded(peak_flops / 1e12, 1)}};
  Json& rows = json["rows"] = Json::array();
  for (size_t si = 0; si < shapes.size(); ++si) {
    const Shape s = shapes[si];
    const double w_bytes = double(s.n) * s.k * (0.5 + 1.0 / 16);
    const int copies = int(std::clamp(200e6 / w_bytes, 2.0, 8.0));
    Weights weights(s.n, s.k, copies, cublas.ok(), rng);
    DeviceBuffer a = to_device(random_bf16(size_t(s.m * s.k), rng)), d(size_t(s.m * s.n * 2));
    GemmArgs g;
    g.m = s.m, g.n = s.n, g.k = s.k;
    g.a = a.get();
    g.d = d.get();
    g.b.global_scale.value = 1.0f / 256;
    GemmArgs gp = g;
    gp.b_prepacked = true;
    GemmArgs ge = gp;
    ge.weights_static = true;
    // W4A4: the same weights prepacked and static, NVFP4 activations, workspace given (as a
    // serving engine would)
    DeviceBuffer a4 = to_device(random_bytes(size_t(s.m * s.k / 2), rng)),
                 a4_scales = to_device(random_scales(size_t(s.m * s.k / 16), rng)), workspace(size_t(s.m * s.k * 2));
    GemmArgs g4 = ge;
    g4.a = nullptr, g4.a_dtype = DType::nvfp4;
    g4.a_fp4.data = a4.get(), g4.a_fp4.scales = a4_scales.get(), g4.a_fp4.global_scale.value = 1.0f / 64;
    g4.workspace = workspace.get(), g4.workspace_bytes = int64_t(workspace.bytes());
    std::vector<std::function<void(int)>> contenders{
        [&](int i) {
          g.b.data = weights.packed[size_t(i % copies)].get();
          g.b.scales = weights.scales[size_t(i % copies)].get();
          gemm(g, nullptr);
        },
        [&](int i) {
          gp.b.data = weights.prepacked[size_t(i % copies)].get();
          gemm(gp, nullptr);
        },
        [&](int i) {
          ge.b.data = weights.prepacked[size_t(i % copies)].get();
          gemm(ge, nullptr);
        },
        [&](int i) {
          g4.b.data = weights.prepacked[size_t(i % copies)].get();
          gemm(g4, nullptr);
        }};
    if (cublas.ok())
      contenders.push_back([&](int i) {
        cublas.gemm_bf16(int(s.m), int(s.n), int(s.k), a.get(), weights.bf16[size_t(i % copies)].get(), d.get());
      });
    const std::vector<double> us = time_us(timer, runs, contenders);
    const double ours = us[0], pre = us[1], early = us[2], w4a4 = us[3], theirs = cublas.ok() ? us[4] : 0.0;
    const double flops = 2.0 * s.m * s.n * s.k;
    const double bytes = w_bytes + 2.0 * s.m * s.k + 2.0 * s.m * s.n;
    const double floor_us = std::max(bytes / copy_bps, peak_flops > 0 ? flops / peak_flops : 0.0) * 1e6;
    auto speedup = [&](double us) { return theirs > 0 ? theirs / us : 0.0; };
    std::printf(
        "  %6lld %6lld %6lld %9.2f %8.1f %8.0f %8.2f %8.0f%% %11.2f %6.2fx %12.2f %7.0f%% %6.2fx %8.2f %7.0f%% %10.2f %6.2fx\n",
        (long long)s.m, (long long)s.n, (long long)s.k, ours, flops / ours / 1e6, bytes / ours / 1e3, floor_us,
        100 * floor_us / ours, theirs, speedup(ours), pre, 100 * floor_us / pre, speedup(pre), early,
        100 * floor_us / early, w4a4, speedup(w4a4));
    std::fflush(stdout);
    rows.push_back({{"m", s.m}, {"n", s.n}, {"k", s.k}, {"us", rounded(ours, 3)}, {"tflops", rounded(flops / ours / 1e6, 2)},
                    {"gbps", rounded(bytes / ours / 1e3, 1)}, {"floor_us", rounded(floor_us, 3)},
                    {"cublas_bf16_us", rounded(theirs, 3)}, {"prepacked_us", rounded(pre, 3)}, {"early_us", rounded(early, 3)},
                    {"w4a4_us", rounded(w4a4, 3)}});
  }

  // Tile configurations around the heuristic's on the decode shapes: what the tuner searches.
  if (!quick && only.weights.empty() && only.ms.empty()) {
    std::printf("  tiles at N = K = 8192 (block_m / block_k / consumer warpgroups / stages / split-K):\n");
    Json& tiles = json["tiles"] = Json::array();
    for (int64_t m : {1, 16, 128}) {
      Weights weights(8192, 8192, 6, false, rng);
      DeviceBuffer a = to_device(random_bf16(size_t(m * 8192), rng)), d(size_t(m * 8192 * 2));
      GemmArgs g;
      g.m = m, g.n = 8192, g.k = 8192;
      g.a = a.get();
      g.d = d.get();
      const int bm = gemm_m_bucket(m);
      for (int bk : {128, 256})
        for (int stages : {4, 8})
          for (int ks : {1, 2, 4, 8}) {
            const int wg = bm >= 128 ? 2 : 1;
            if ((bm >= 128 && (stages > 4 || bk > 128)) || (bk == 256 && stages > 4 && bm > 16)) continue;
            const sm90::Tile tile{bm, wg, stages, ks, bk};
            const double us = time_us(timer, runs, [&](int i) {
              g.b.data = weights.packed[size_t(i % 6)].get();
              g.b.scales = weights.scales[size_t(i % 6)].get();
              gemm_with_tile(g, sm90::to_config(tile), nullptr);
            });
            std::printf("    M=%-5lld %3d/%d/%d/%d/%d %9.2f us\n", (long long)m, bm, bk, wg, stages, ks, us);
            tiles.push_back({{"m", m}, {"block_m", bm}, {"block_k", bk}, {"consumers", wg}, {"stages", stages},
                             {"split_k", ks}, {"us", rounded(us, 3)}});
          }
    }
  }
  return json;
}

}  // namespace nvfp4::jit::cli

namespace nvfp4::jit::cli {

namespace {

// One MoE layer's expert GEMM: `experts` weights [n, k], tokens routed to `topk` of them each.
struct MoeShape {
  std::string name;
  int64_t n, k;
  int experts, topk;
};

enum class Routing { uniform, zipf };

// The router's top-k ids [tokens, topk]: each token to topk distinct experts, uniformly or by
// Zipf popularity (s = 1.2, experts ranked in a random order).
std::vector<int32_t> draw_routing(Routing routing, int64_t tokens, const MoeShape& s, std::mt19937& rng) {
  std::vector<int> rank(static_cast<size_t>(s.experts));
  std::iota(rank.begin(), rank.end(), 0);
  std::shuffle(rank.begin(), rank.end(), rng);
  std::vector<double> popularity(static_cast<size_t>(s.experts));
  for (int e = 0; e < s.experts; ++e) popularity[size_t(e)] = routing == Routing::zipf ? std::pow(rank[size_t(e)] + 1.0, -1.2) : 1.0;
  std::discrete_distribution<int> pick(popularity.begin(), popularity.end());
  std::vector<int32_t> ids(static_cast<size_t>(tokens * s.topk));
  for (int64_t t = 0; t < tokens; ++t)
    for (int j = 0; j < s.topk; ++j) {
      int32_t e;
      do e = pick(rng);
      while (std::find(&ids[size_t(t * s.topk)], &ids[size_t(t * s.topk + j)], e) != &ids[size_t(t * s.topk + j)]);
      ids[size_t(t * s.topk + j)] = e;
    }
  return ids;
}

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
  std::printf("  (BF16, FP32 weights) and its floor (rows * n * 2 read + tokens * n * 2 written)\n");
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
    std::vector<std::pair<int64_t, Routing>> cases;
    for (int64_t tokens : token_counts)
      for (Routing routing : {Routing::uniform, Routing::zipf}) cases.emplace_back(tokens, routing);
    for (const auto& [tokens, routing] : cases) {
      const std::vector<int32_t> ids = draw_routing(routing, tokens, s, rng);
      std::vector<int32_t> counts(size_t(s.experts), 0);
      for (int32_t e : ids) ++counts[size_t(e)];
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
      const char* routing_name = routing == Routing::zipf ? "zipf" : "uniform";
      std::printf("  %-14s %7s %6lld %6lld %8lld %9.2f %9.2f %7.0f%% %8.2f %9.2f %10.2f %8.2fx %8.2f %10.2f %7.0f%% %10.2f %7.2fx\n",
                  s.name.c_str(), routing_name, (long long)tokens, (long long)rows, (long long)touched, us[0], floor_us,
                  100 * floor_us / us[0], copy_us, us[1], theirs, theirs > 0 ? theirs / us[0] : 0.0, route_us, combine_us,
                  100 * combine_floor_us / combine_us, grouped_us, grouped_us > 0 ? grouped_us / us[0] : 0.0);
      std::printf("      rows gathered through row_index: %.2f us (%.2fx the sorted rows' time)\n", gathered_us,
                  gathered_us / us[0]);
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
                      {"hinted", hinted_json}});
    }
  }
  if (only.weights.empty()) bench_batched(timer, runs, copy_bps, cublas, json, rng);
  return json;
}

}  // namespace nvfp4::jit::cli
