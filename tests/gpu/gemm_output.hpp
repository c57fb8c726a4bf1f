// One element of a GEMM's output (BF16, FP16 or FP32 bytes, as downloaded) as a double, its
// error against a float64 reference, and the threads that compute the reference.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "common/nvfp4_format.cuh"
#include "nvfp4/jit.hpp"

namespace testutil {

// Runs body(t, threads) on a thread per core and waits: float64 references and checks split
// their rows among the threads as r = t, t + threads, ...
template <class Body>
inline void on_all_cores(Body&& body) {
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t) pool.emplace_back([&body, t, threads] { body(t, threads); });
  for (auto& th : pool) th.join();
}

inline double half_bits_to_double(nvfp4::jit::DType t, uint16_t h) {
  return t == nvfp4::jit::DType::bf16 ? nvfp4k::bf16_bits_to_float(h) : nvfp4k::fp16_bits_to_float(h);
}

inline double output_value(nvfp4::jit::DType d, const uint8_t* element) {
  if (d == nvfp4::jit::DType::fp32) {
    float f;
    std::memcpy(&f, element, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, element, 2);
  return half_bits_to_double(d, h);
}

// The relative Frobenius error of an output against its float64 reference.
struct FrobeniusError {
  double err2 = 0, ref2 = 0;
  void add(double got, double ref) {
    err2 += (got - ref) * (got - ref);
    ref2 += ref * ref;
  }
  double relative() const { return std::sqrt(err2 / std::max(ref2, 1e-300)); }
};

// The relative error an output type's rounding allows a GEMM.
inline double rounding_bound(nvfp4::jit::DType d) {
  return d == nvfp4::jit::DType::fp32 ? 1e-5 : d == nvfp4::jit::DType::bf16 ? 4e-3 : 1e-3;
}

}  // namespace testutil
