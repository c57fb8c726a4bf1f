// One element of a GEMM's output (BF16, FP16 or FP32 bytes, as downloaded) as a double.
#pragma once
#include <cstdint>
#include <cstring>

#include "common/nvfp4_format.cuh"
#include "nvfp4/jit.hpp"

namespace testutil {

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

}  // namespace testutil
