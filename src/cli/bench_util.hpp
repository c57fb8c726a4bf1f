// Small helpers the benchmarks share: medians, wall-clock spans, random device inputs.
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <random>
#include <vector>

#include "cli/json_out.hpp"
#include "core/manifest.hpp"

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

// Restricts `bench gemm` to the given weight shapes and / or one M (empty / 0: the default set).
struct GemmBenchFilter {
  std::vector<detail::WeightShape> weights;
  std::vector<int64_t> ms;
};
Json bench_gemm(bool quick, const GemmBenchFilter& only);
// Restricts `bench grouped`: expert shapes (weights: N, K and the experts as groups, each token
// routed to topk of them; given, the batched wo_a is left out), token counts, and expected_m
// hints timed in turns with the default (empty: the default set, none).
struct GroupedBenchFilter {
  std::vector<detail::WeightShape> weights;
  int topk = 8;
  std::vector<int64_t> tokens, expected_ms;
};
// grouped_gemm on MoE expert shapes, beside the byte floor, our dense gemm and a cuBLAS loop.
Json bench_grouped(bool quick, const GroupedBenchFilter& only = {});

}  // namespace nvfp4::jit::cli
