// Lets the format code compile both under NVRTC (device) and as host C++ (the CPU reference),
// so every bit layout is written once.
#pragma once

#if defined(__CUDACC__)
#define NVFP4_HD __host__ __device__ __forceinline__
#else
#define NVFP4_HD inline
#include <cstring>
#endif

namespace nvfp4k {

NVFP4_HD float bits_to_float(unsigned u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

NVFP4_HD unsigned float_to_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  unsigned u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}

}  // namespace nvfp4k
