// Random NVFP4 tensors and an independent float64 decode, for the CPU and GPU dequantize tests.
#pragma once
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "common/scale_layout.cuh"
#include "nvfp4/jit.hpp"

namespace testutil {

struct HostNvfp4 {
  int64_t rows, k, stride_bytes;
  nvfp4::jit::ScaleLayout layout;
  std::vector<uint8_t> packed, scales;
  std::vector<float> row_scales;

  HostNvfp4(int64_t rows_, int64_t k_, nvfp4::jit::ScaleLayout layout_, std::mt19937& rng, int64_t pad_bytes = 0)
      : rows(rows_), k(k_), stride_bytes(k_ / 2 + pad_bytes), layout(layout_) {
    packed.resize(rows * stride_bytes);
    for (auto& b : packed) b = uint8_t(rng());
    const long long kb = k / 16;
    scales.assign(nvfp4k::scale_bytes(int(layout), rows, kb), 0);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t b = 0; b < kb; ++b) scales[offset(r, b)] = random_scale(rng);
    row_scales.resize(rows);
    for (auto& s : row_scales) s = std::ldexp(1.0f + (rng() % 1000) / 1000.0f, int(rng() % 9) - 6);
  }

  // Every finite E4M3 value, subnormals and zero included; NaN (0x7F) never.
  static uint8_t random_scale(std::mt19937& rng) { return uint8_t(rng() % 0x7F); }

  long long offset(int64_t r, int64_t kb) const {
    return layout == nvfp4::jit::ScaleLayout::linear ? nvfp4k::scale_offset_linear(r, kb, k / 16)
                                                     : nvfp4k::scale_offset_swizzled128x4(r, kb, k / 16);
  }

  // float64 decode from the format's definition (not from the library's helpers).
  double value(int64_t r, int64_t e) const {
    static const double e2m1[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
    const uint8_t byte = packed[r * stride_bytes + e / 2];
    const unsigned nib = e % 2 ? byte >> 4 : byte & 15;
    const uint8_t s = scales[offset(r, e / 16)];
    const int ex = (s >> 3) & 15, m = s & 7;
    const double scale = ex == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1 + m / 8.0, ex - 7);
    return (nib & 8 ? -1 : 1) * e2m1[nib & 7] * scale;
  }
};

}  // namespace testutil
