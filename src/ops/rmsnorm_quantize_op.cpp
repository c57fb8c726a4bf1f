// RMSNorm + quantize: each row normalized by its RMS and the norm weight, then quantized.
// The kernel, its launch and CPU reference are the fused quantizers' (row_quantize_run.hpp).
#include <fmt/format.h>

#include "ops/row_quantize_run.hpp"
#include "ops/validate.hpp"

namespace nvfp4::jit {

namespace detail {
namespace {

RowJob job_of(const RmsNormQuantizeArgs& a) {
  RowJob j = checked_row_job(Op::rmsnorm_quantize, "nvfp4::jit::rmsnorm_quantize", a.in, a.in_dtype, a.in_row_stride, a.rows, a.k, a.out, a.k);
  add_norm_args(j, a.weight, a.weight_fp32, a.eps, a.normed, a.normed_row_stride, a.inv_rms);
  return j;
}

}  // namespace
}  // namespace detail

void rmsnorm_quantize(const RmsNormQuantizeArgs& args, CUstream stream) { detail::run_row_job(detail::job_of(args), stream); }
void cpu::rmsnorm_quantize(const RmsNormQuantizeArgs& args) { detail::run_row_job_on_cpu(detail::job_of(args)); }

}  // namespace nvfp4::jit
