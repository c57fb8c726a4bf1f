// The benchmarks' GPU timing and GEMM weights.
#include "cli/bench_util.hpp"

#include "nvfp4/jit.hpp"

namespace nvfp4::jit::cli {

using namespace detail;

GemmWeights::GemmWeights(int64_t n, int64_t k, int copies, bool with_bf16, std::mt19937& rng) {
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

}  // namespace nvfp4::jit::cli
