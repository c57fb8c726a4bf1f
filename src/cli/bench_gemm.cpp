// nvfp4-jit bench gemm: our W4A16 and W4A4 GEMMs side by side with cuBLAS BF16 on the same shapes, in
// one process, weights rotated so neither reads them from L2, CUDA events, medians.
#include <algorithm>
#include <cstdio>
#include <functional>
#include <random>
#include <string>

#include "cli/bench_util.hpp"
#include "cli/benches.hpp"
#include "cli/cublas.hpp"
#include "nvfp4/jit.hpp"

namespace nvfp4::jit::cli {

using namespace detail;

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
  std::printf("  (may start while the previous call runs); W4A4: NVFP4 activations, early; W4A8: early in the W4A8\n");
  std::printf("  precision mode (FP8 tensor cores on sm_90a, its activation pass included; x early: its speedup over\n");
  std::printf("  early; no cuBLAS FP8 column: the bench loads cuBLAS, whose GemmEx takes no FP8, not cuBLASLt);\n");
  std::printf("  W4A4>W4A8: W4A4's NVFP4 activations in the W4A8 mode (x W4A4: its speedup over W4A4); RMSNorm: early\n");
  std::printf("  with A's RMSNorm in the GEMM (a_rmsnorm_weight, A un-normalized); x chain: its speedup over\n");
  std::printf("  rmsnorm_quantize (its normed BF16 rows, and its NVFP4 ones) then early\n");
  std::printf("  %6s %6s %6s %9s %8s %8s %8s %9s %11s %7s %12s %8s %7s %8s %8s %10s %7s %9s %8s %7s %10s %7s %10s %7s\n", "M",
              "N", "K", "ours us", "TFLOP/s", "GB/s", "floor us", "of floor", "cuBLAS us", "speedup", "prepacked us",
              "of floor", "speedup", "early us", "of floor", "W4A4 us", "speedup", "W4A8 us", "TFLOP/s", "x early",
              "W4A4>W4A8", "x W4A4", "RMSNorm us", "x chain");

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
    GemmWeights weights(s.n, s.k, copies, cublas.ok(), rng);
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
    // W4A8: the BF16 activations, prepacked static weights, the workspace given (m * k * 2 holds
    // its m * k + 4 m bytes)
    GemmArgs g8 = ge;
    g8.precision = GemmPrecision::w4a8;
    g8.workspace = workspace.get(), g8.workspace_bytes = int64_t(workspace.bytes());
    GemmArgs g48 = g4;  // W4A4's activations in the W4A8 mode
    g48.precision = GemmPrecision::w4a8;
    // RMSNorm of A: in the GEMM, and the chain it replaces (rmsnorm_quantize's normed rows, then
    // the GEMM on them)
    DeviceBuffer norm_weight = to_device(random_bf16(size_t(s.k), rng)), normed(size_t(s.m * s.k * 2)),
                 normed_fp4(size_t(s.m * s.k / 2)), normed_scales(size_t(s.m * s.k / 16));
    GemmArgs gn = ge;
    gn.a_rmsnorm_weight = norm_weight.get();
    GemmArgs gc = ge;
    gc.a = normed.get();
    RmsNormQuantizeArgs norm;
    norm.in = a.get(), norm.rows = s.m, norm.k = s.k, norm.weight = norm_weight.get(), norm.normed = normed.get();
    norm.out.data = normed_fp4.get(), norm.out.scales = normed_scales.get();
    // a call on the prepacked weight of run i (the copies rotate past L2)
    auto on_prepacked = [&](GemmArgs& args) {
      return [&args, &weights, copies](int i) {
        args.b.data = weights.prepacked[size_t(i % copies)].get();
        gemm(args, nullptr);
      };
    };
    const auto gemm_on_normed = on_prepacked(gc);
    std::vector<std::function<void(int)>> contenders{
        [&](int i) {
          g.b.data = weights.packed[size_t(i % copies)].get();
          g.b.scales = weights.scales[size_t(i % copies)].get();
          gemm(g, nullptr);
        },
        on_prepacked(gp), on_prepacked(ge), on_prepacked(g4), on_prepacked(g8), on_prepacked(g48), on_prepacked(gn),
        [&](int i) {
          rmsnorm_quantize(norm, nullptr);
          gemm_on_normed(i);
        }};
    if (cublas.ok())
      contenders.push_back([&](int i) {
        cublas.gemm_bf16(int(s.m), int(s.n), int(s.k), a.get(), weights.bf16[size_t(i % copies)].get(), d.get());
      });
    const std::vector<double> us = time_us(timer, runs, contenders);
    const double ours = us[0], pre = us[1], early = us[2], w4a4 = us[3], w4a8 = us[4], w4a4_w4a8 = us[5];
    const double normed_us = us[6], chain_us = us[7];
    const double theirs = cublas.ok() ? us[8] : 0.0;
    const double flops = 2.0 * s.m * s.n * s.k;
    const double bytes = w_bytes + 2.0 * s.m * s.k + 2.0 * s.m * s.n;
    const double floor_us = std::max(bytes / copy_bps, peak_flops > 0 ? flops / peak_flops : 0.0) * 1e6;
    auto speedup = [&](double us) { return theirs > 0 ? theirs / us : 0.0; };
    std::printf(
        "  %6lld %6lld %6lld %9.2f %8.1f %8.0f %8.2f %8.0f%% %11.2f %6.2fx %12.2f %7.0f%% %6.2fx %8.2f %7.0f%% %10.2f %6.2fx "
        "%9.2f %8.1f %6.2fx %10.2f %6.2fx %10.2f %6.2fx\n",
        (long long)s.m, (long long)s.n, (long long)s.k, ours, flops / ours / 1e6, bytes / ours / 1e3, floor_us,
        100 * floor_us / ours, theirs, speedup(ours), pre, 100 * floor_us / pre, speedup(pre), early,
        100 * floor_us / early, w4a4, speedup(w4a4), w4a8, flops / w4a8 / 1e6, early / w4a8, w4a4_w4a8, w4a4 / w4a4_w4a8,
        normed_us, chain_us / normed_us);
    std::fflush(stdout);
    rows.push_back({{"m", s.m}, {"n", s.n}, {"k", s.k}, {"us", rounded(ours, 3)}, {"tflops", rounded(flops / ours / 1e6, 2)},
                    {"gbps", rounded(bytes / ours / 1e3, 1)}, {"floor_us", rounded(floor_us, 3)},
                    {"cublas_bf16_us", rounded(theirs, 3)}, {"prepacked_us", rounded(pre, 3)}, {"early_us", rounded(early, 3)},
                    {"w4a4_us", rounded(w4a4, 3)}, {"w4a8_us", rounded(w4a8, 3)}, {"w4a4_w4a8_us", rounded(w4a4_w4a8, 3)},
                    {"rmsnorm_us", rounded(normed_us, 3)}, {"rmsnorm_chain_us", rounded(chain_us, 3)}});
  }

  if (!quick && only.weights.empty() && only.ms.empty()) json["tiles"] = bench_tiles(timer, runs, rng);
  return json;
}

}  // namespace nvfp4::jit::cli
