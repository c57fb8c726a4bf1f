// Inputs for the quantize tests: random rows of varied magnitude, and adversarial blocks
// (exact E2M1 ties, all-zero blocks, subnormal scales, saturation, NaN, Inf).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "common/nvfp4_format.cuh"
#include "nvfp4/jit.hpp"

namespace testutil {

inline void store_value(std::vector<uint8_t>& bytes, nvfp4::jit::DType dt, size_t at, float v) {
  using nvfp4::jit::DType;
  if (dt == DType::fp32) {
    std::memcpy(&bytes[at * 4], &v, 4);
  } else {
    const uint16_t h = dt == DType::bf16 ? nvfp4k::float_to_bf16_bits(v) : nvfp4k::float_to_fp16_bits(v);
    std::memcpy(&bytes[at * 2], &h, 2);
  }
}

// rows x k values of `dt` with row stride `stride` elements. With `adversarial`, every
// fourth 16-block is one of the hard cases (for the given global scale `gs`).
inline std::vector<uint8_t> quantize_input(int64_t rows, int64_t k, int64_t stride, nvfp4::jit::DType dt, std::mt19937& rng,
                                           bool adversarial, float gs = 1.0f) {
  const int esize = dt == nvfp4::jit::DType::fp32 ? 4 : 2;
  std::vector<uint8_t> bytes(size_t(rows * stride * esize), 0x5A);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const float ties[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 6.0f};
  for (int64_t r = 0; r < rows; ++r) {
    const float row_scale = std::ldexp(1.0f, int(rng() % 16) - 8);
    for (int64_t kb = 0; kb < k / 16; ++kb) {
      const int kind = adversarial && kb % 4 == 1 ? int(rng() % 7) : -1;
      for (int i = 0; i < 16; ++i) {
        float v = normal(rng) * row_scale;
        switch (kind) {
          case 0: v = (i % 2 ? -1 : 1) * ties[i % 8] * gs; break;  // amax 6*gs -> scale 1, exact ties
          case 1: v = 0.0f; break;                                  // all-zero block
          case 2: v = normal(rng) * 1e-4f * gs; break;              // subnormal E4M3 scale
          case 3: v = (i == 3 ? 1e6f : normal(rng) * 3000.0f) * gs; break;  // saturation at 6*448*gs
          case 4: if (i == 5) v = NAN; break;
          case 5: if (i == 9) v = (rng() & 1) ? INFINITY : -INFINITY; break;
          case 6: v = (i % 2 ? 0.5f : -0.5f) * std::ldexp(1.0f, int(rng() % 6)) * gs; break;  // exact grid values
        }
        store_value(bytes, dt, size_t(r * stride + kb * 16 + i), v);
      }
    }
  }
  return bytes;
}

}  // namespace testutil
