// What the examples share: CUDA error checks, BF16 conversions, uploads, and the float64
// check of a GEMM result. Public API + CUDA runtime only, like the examples themselves.
#pragma once
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

// Returns 2 from the calling function (the examples' "no GPU / error" exit code) on failure.
#define CUDA_OK(call)                                                        \
  do {                                                                       \
    if (cudaError_t e = (call); e != cudaSuccess) {                          \
      std::fprintf(stderr, "%s failed: %s\n", #call, cudaGetErrorString(e)); \
      return 2;                                                              \
    }                                                                        \
  } while (0)

namespace example {

inline uint16_t to_bf16(float f) {  // round to nearest even (finite inputs)
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return uint16_t((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
}

inline float from_bf16(uint16_t h) {
  const uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Device 0 selected, or false (and a note on stderr) where there is no GPU.
inline bool first_gpu() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0 || cudaSetDevice(0) != cudaSuccess) {
    std::fprintf(stderr, "no GPU: nothing to run\n");
    return false;
  }
  return true;
}

// A device copy of `v`, or nullptr (and why on stderr) where the allocation or the copy failed.
template <class T>
void* upload(const std::vector<T>& v) {
  void* p = nullptr;
  cudaError_t e = cudaMalloc(&p, v.size() * sizeof(T));
  if (e == cudaSuccess) e = cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice);
  if (e == cudaSuccess) return p;
  std::fprintf(stderr, "upload of %zu bytes failed: %s\n", v.size() * sizeof(T), cudaGetErrorString(e));
  cudaFree(p);
  return nullptr;
}

// Relative Frobenius error of a BF16 result D[m, n] against A[m, k] . W[n, k]^T in float64.
inline double relative_error(const std::vector<float>& a, const std::vector<float>& w, const std::vector<uint16_t>& d,
                             long m, long n, long k) {
  double err2 = 0, ref2 = 0;
  for (long i = 0; i < m; ++i)
    for (long j = 0; j < n; ++j) {
      double s = 0;
      for (long e = 0; e < k; ++e) s += double(a[i * k + e]) * w[j * k + e];
      const double v = from_bf16(d[i * n + j]);
      err2 += (v - s) * (v - s);
      ref2 += s * s;
    }
  return std::sqrt(err2 / ref2);
}

// BF16 output rounding bounds each element's relative error by 2^-9, and so the whole.
constexpr double kBf16OutputBound = 4e-3;

}  // namespace example
