// What the four fused quantizers share once their arguments are read: the checks every one
// makes, the launch of their kernel (row_quantize_op.hpp) and the CPU reference with its exact
// bits. Each op's own arguments and entry points: <op>_op.cpp.
#pragma once
#include <cstdint>

#include "common/params.cuh"
#include "ops/row_quantize_op.hpp"

namespace nvfp4::jit::detail {

// A fused quantizer's call, its arguments checked: what its entry points share.
struct RowJob {
  Op op = Op::moe_stage;
  const char* who = "";
  const void* in = nullptr;
  DType in_dtype = DType::bf16;
  int64_t in_stride = 0, rows = 0, k = 0;
  int64_t interleave = 0;  // SwiGLU: gate values before their up values (k: the two halves)
  // mHC
  int n_hc = 0;
  int64_t hc_stride = 0;
  const float* mix = nullptr;
  int64_t mix_stride = 0;
  void* h = nullptr;
  int64_t h_stride = 0;
  QuantizedOutput out{};
  int64_t out_stride = 0;
  int gscale_mode = 0;
  // RMSNorm
  const void* weight = nullptr;
  DType weight_dtype = DType::bf16;
  float eps = 0;
  void* normed = nullptr;
  int64_t normed_stride = 0;
  float* inv_rms = nullptr;
  // MoE staging
  int64_t topk = 0;
  const void* ids = nullptr;
  const float* weights = nullptr;
  void* ids_out = nullptr;
  float* weights_out = nullptr;
  bool ids_64 = false, ids_out_64 = false;

  RowKernel kernel() const {
    RowKernel r;
    r.op = op, r.k = k, r.in = in_dtype, r.weight = normalizes(op) ? weight_dtype : in_dtype, r.layout = out.scale_layout;
    r.interleave = op == Op::swiglu_quantize ? interleave : 0, r.n_hc = n_hc;
    r.whole_rows = normalizes(op) || gscale_mode == nvfp4k::GSCALE_COMPUTE_PER_ROW;
    return r;
  }
};

// The part every fused quantizer has, checked: input, output, global scale. `width` is the
// input row's length.
RowJob checked_row_job(Op op, const char* who, const void* in, DType in_dtype, int64_t in_row_stride, int64_t rows,
                       int64_t k, const QuantizedOutput& out, int64_t width);

// RMSNorm's arguments, checked into `j`: rmsnorm_quantize's and mhc_rmsnorm_quantize's.
void add_norm_args(RowJob& j, const void* weight, bool weight_fp32, float eps, void* normed, int64_t normed_row_stride,
                   float* inv_rms);

// The job on the GPU (`stream`'s context), or its kernel loaded only (load_only()).
void run_row_job(const RowJob& j, CUstream stream);

// The job on host memory, bit for bit what the kernel writes.
void run_row_job_on_cpu(const RowJob& j);

}  // namespace nvfp4::jit::detail
