// cuBLAS for the GEMM benches' comparisons, dlopened, so the library itself never depends on it.
#pragma once
#include <dlfcn.h>

#include <cstdint>
#include <stdexcept>
#include <vector>

namespace nvfp4::jit::cli {

// The few cuBLAS entry points the comparison needs (values from cublas_api.h / library_types.h).
class Cublas {
 public:
  Cublas() {
    for (const char* name : {"libcublas.so.13", "libcublas.so.12", "libcublas.so"})
      if ((lib_ = dlopen(name, RTLD_NOW | RTLD_LOCAL))) break;
    if (!lib_) return;
    create_ = reinterpret_cast<int (*)(void**)>(dlsym(lib_, "cublasCreate_v2"));
    gemm_ex_ = reinterpret_cast<GemmEx>(dlsym(lib_, "cublasGemmEx"));
    strided_ = reinterpret_cast<StridedEx>(dlsym(lib_, "cublasGemmStridedBatchedEx"));
    grouped_ = reinterpret_cast<GroupedEx>(dlsym(lib_, "cublasGemmGroupedBatchedEx"));  // CUDA 12.5 and later
    if (!create_ || !gemm_ex_ || create_(&handle_) != 0) handle_ = nullptr;
  }
  bool ok() const { return handle_ != nullptr; }
  // D[m, n] (row-major BF16) = A[m, k] . W[n, k]^T, i.e. column-major D^T = W^T' . A^T.
  void gemm_bf16(int m, int n, int k, const void* a, const void* w, void* d) const {
    const float one = 1.0f, zero = 0.0f;
    constexpr int kOpN = 0, kOpT = 1, kBf16 = 14, kCompute32F = 68, kDefaultAlgo = -1;
    if (gemm_ex_(handle_, kOpT, kOpN, n, m, k, &one, w, kBf16, k, a, kBf16, k, &zero, d, kBf16, n, kCompute32F,
                 kDefaultAlgo) != 0)
      throw std::runtime_error("cublasGemmEx failed");
  }
  // `batches` of gemm_bf16, A's, W's and D's rows `lda`, k and `ldd` apart and the batches
  // `stride_a`, n * k and `stride_d` apart (the batched grouped layout).
  void strided_bf16(int m, int n, int k, const void* a, int64_t lda, int64_t stride_a, const void* w, void* d, int64_t ldd,
                    int64_t stride_d, int batches) const {
    const float one = 1.0f, zero = 0.0f;
    constexpr int kOpN = 0, kOpT = 1, kBf16 = 14, kCompute32F = 68, kDefaultAlgo = -1;
    if (!strided_ || strided_(handle_, kOpT, kOpN, n, m, k, &one, w, kBf16, k, int64_t(n) * k, a, kBf16, int(lda), stride_a,
                              &zero, d, kBf16, int(ldd), stride_d, batches, kCompute32F, kDefaultAlgo) != 0)
      throw std::runtime_error("cublasGemmStridedBatchedEx failed");
  }
  bool has_grouped() const { return grouped_ != nullptr; }
  // One gemm_bf16 per group (rows[g] x n x k), in one cublasGemmGroupedBatchedEx call: `a`, `w`
  // and `d` are device arrays of the groups' pointers.
  void grouped_bf16(const std::vector<int>& rows, int n, int k, const void* const* a, const void* const* w,
                    void* const* d) const {
    const int groups = int(rows.size());
    const std::vector<int> op_t(size_t(groups), 1), op_n(size_t(groups), 0), ns(size_t(groups), n), ks(size_t(groups), k),
        ones(size_t(groups), 1);
    const std::vector<float> alpha(size_t(groups), 1.0f), beta(size_t(groups), 0.0f);
    constexpr int kBf16 = 14, kCompute32F = 68;
    if (grouped_(handle_, op_t.data(), op_n.data(), ns.data(), rows.data(), ks.data(), alpha.data(), w, kBf16, ks.data(), a,
                 kBf16, ks.data(), beta.data(), d, kBf16, ns.data(), groups, ones.data(), kCompute32F) != 0)
      throw std::runtime_error("cublasGemmGroupedBatchedEx failed");
  }

 private:
  using GemmEx = int (*)(void*, int, int, int, int, int, const void*, const void*, int, int, const void*, int, int,
                         const void*, void*, int, int, int, int);
  using StridedEx = int (*)(void*, int, int, int, int, int, const void*, const void*, int, int, long long, const void*, int,
                            int, long long, const void*, void*, int, int, long long, int, int, int);
  using GroupedEx = int (*)(void*, const int*, const int*, const int*, const int*, const int*, const void*,
                            const void* const*, int, const int*, const void* const*, int, const int*, const void*,
                            void* const*, int, const int*, int, const int*, int);
  StridedEx strided_ = nullptr;
  GroupedEx grouped_ = nullptr;
  void* lib_ = nullptr;
  void* handle_ = nullptr;
  int (*create_)(void**) = nullptr;
  GemmEx gemm_ex_ = nullptr;
};

}  // namespace nvfp4::jit::cli
