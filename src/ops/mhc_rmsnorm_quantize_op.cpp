// mHC + RMSNorm + quantize: a row's n_hc streams mixed into one, normalized, then quantized.
// The kernel, its launch and CPU reference are the fused quantizers' (row_quantize_run.hpp).
#include <fmt/format.h>

#include "ops/row_quantize_run.hpp"
#include "ops/validate.hpp"

namespace nvfp4::jit {

namespace detail {
namespace {

RowJob job_of(const MhcRmsNormQuantizeArgs& a) {
  Check check("nvfp4::jit::mhc_rmsnorm_quantize");
  if (a.n_hc < 1 || a.n_hc > 4) check.fail("n_hc", fmt::format("n_hc = {} must be 1, 2, 3 or 4", a.n_hc));
  const int64_t hc_stride = a.in_hc_stride ? a.in_hc_stride : a.k;
  if (hc_stride < a.k) check.fail("in_hc_stride", fmt::format("in_hc_stride = {} is less than k = {}", hc_stride, a.k));
  // The row is n_hc streams; checked_row_job checks the row stride against what they span.
  const int64_t span = (a.n_hc - 1) * hc_stride + a.k;
  RowJob j = checked_row_job(Op::mhc_rmsnorm_quantize, "nvfp4::jit::mhc_rmsnorm_quantize", a.in, a.in_dtype,
                             a.in_row_stride ? a.in_row_stride : a.n_hc * hc_stride, a.rows, a.k, a.out, span);
  const int64_t row_bytes = a.n_hc * a.k * element_bytes(a.in_dtype);
  if (row_bytes > kMhcMaxRowBytes)
    check.fail("k", fmt::format("n_hc * k = {} values of {} bytes is more than the {} bytes one CTA per row holds", a.n_hc * a.k,
                                element_bytes(a.in_dtype), kMhcMaxRowBytes));
  add_norm_args(j, a.weight, a.weight_fp32, a.eps, a.normed, a.normed_row_stride, a.inv_rms);
  j.n_hc = int(a.n_hc), j.hc_stride = hc_stride, j.mix = a.mix, j.h = a.h;
  j.mix_stride = a.mix_row_stride ? a.mix_row_stride : a.n_hc;
  if (j.mix_stride < a.n_hc) check.fail("mix_row_stride", fmt::format("mix_row_stride = {} is less than n_hc = {}", j.mix_stride, a.n_hc));
  j.h_stride = a.h_row_stride ? a.h_row_stride : a.k;
  if (a.h && j.h_stride < a.k) check.fail("h_row_stride", fmt::format("h_row_stride = {} is less than k = {}", j.h_stride, a.k));
  if (a.rows > 0) check.not_null("mix", a.mix);
  return j;
}

}  // namespace
}  // namespace detail

void mhc_rmsnorm_quantize(const MhcRmsNormQuantizeArgs& args, CUstream stream) { detail::run_row_job(detail::job_of(args), stream); }
void cpu::mhc_rmsnorm_quantize(const MhcRmsNormQuantizeArgs& args) { detail::run_row_job_on_cpu(detail::job_of(args)); }

}  // namespace nvfp4::jit
