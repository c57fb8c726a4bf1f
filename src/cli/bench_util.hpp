// Small helpers the benchmarks share: medians, wall-clock spans, GPU timing in turns, random
// device inputs, a dequantize problem and GEMM weights.
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

#include "core/gpu_util.hpp"
#include "nvfp4/jit.hpp"

namespace nvfp4::jit::cli {

using Clock = std::chrono::steady_clock;

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

inline double since_us(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

inline std::vector<uint8_t> random_bytes(size_t n, std::mt19937& rng) {
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = uint8_t(rng());
  return v;
}

// Random E4M3 scales in [2^-6, 2^2): finite, never NaN.
inline std::vector<uint8_t> random_scales(size_t n, std::mt19937& rng) {
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = uint8_t(0x08 * (1 + rng() % 8) + rng() % 8);
  return v;
}

// BF16 values with |x| in [2^-7, 2^9), random sign.
inline std::vector<uint16_t> random_bf16(size_t n, std::mt19937& rng) {
  std::vector<uint16_t> v(n);
  for (auto& x : v) x = uint16_t(0x3C00 + rng() % 0x0800) | uint16_t((rng() & 1) << 15);
  return v;
}

// FP16 values over the same binades as random_bf16.
inline std::vector<uint16_t> random_fp16(size_t n, std::mt19937& rng) {
  std::vector<uint16_t> v(n);
  for (auto& x : v) x = uint16_t(0x2000 + rng() % 0x4000) | uint16_t((rng() & 1) << 15);
  return v;
}

// One dequantize problem on the device: NVFP4 [rows, k] -> BF16 (bench core and dequantize).
struct DequantizeProblem {
  int64_t rows, k;
  detail::DeviceBuffer packed, scales, out;
  DequantizeProblem(int64_t rows_, int64_t k_, std::mt19937& rng)
      : rows(rows_), k(k_), packed(detail::to_device(random_bytes(rows_ * k_ / 2, rng))),
        scales(detail::to_device(random_scales(rows_ * k_ / 16, rng))), out(rows_ * k_ * 2) {}
  DequantizeArgs args() const {
    DequantizeArgs a;
    a.src.data = packed.get();
    a.src.scales = scales.get();
    a.src.global_scale.value = 0.5f;
    a.src_rows = rows;
    a.k = k;
    a.out = out.get();
    return a;
  }
  double bytes() const { return double(rows) * k * (0.5 + 1.0 / 16 + 2); }
};

// One weight [n, k] in NVFP4 and in BF16 (for cuBLAS), `copies` of each to rotate through
// (the same random content at different addresses: L2 keys on addresses).
// The NVFP4 copies also prepacked (gemm's own layout).
struct GemmWeights {
  std::vector<detail::DeviceBuffer> packed, scales, prepacked, bf16;
  GemmWeights(int64_t n, int64_t k, int copies, bool with_bf16, std::mt19937& rng);
};

// Median GPU time per call of each body(i) (i counts its calls, for rotating weights), each
// called back to back kBatch times between two events as a serving loop launches its kernels:
// a call's time includes the gap to the next launch, but not the host's launch costs. The
// bodies take turns batch by batch, so a clock that drifts (a GPU at its power limit slows as
// it warms) weighs on all of them alike.
std::vector<double> time_us(detail::EventTimer& timer, int runs, const std::vector<std::function<void(int)>>& bodies);
double time_us(detail::EventTimer& timer, int runs, const std::function<void(int)>& body);
// Device-to-device copy bandwidth in bytes per second (read + written).
double copy_bandwidth(detail::EventTimer& timer);

}  // namespace nvfp4::jit::cli
