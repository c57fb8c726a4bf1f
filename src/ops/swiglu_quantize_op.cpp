// SwiGLU + quantize: silu(gate) * up of each row's gate and up values, then quantized.
// The kernel, its launch and CPU reference are the fused quantizers' (row_quantize_run.hpp).
#include <fmt/format.h>

#include "ops/row_quantize_run.hpp"
#include "ops/validate.hpp"

namespace nvfp4::jit {

namespace detail {
namespace {

RowJob job_of(const SwigluQuantizeArgs& a) {
  RowJob j = checked_row_job(Op::swiglu_quantize, "nvfp4::jit::swiglu_quantize", a.in, a.in_dtype, a.in_row_stride, a.rows, a.k, a.out, 2 * a.k);
  Check check(j.who);
  j.interleave = a.interleave ? a.interleave : a.k;
  const bool divides16 = j.interleave > 0 && j.interleave <= 16 && 16 % j.interleave == 0;
  if (a.interleave < 0 || !(divides16 || j.interleave % 16 == 0) || a.k % j.interleave)
    check.fail("interleave", fmt::format("interleave = {} must be 0 (two halves), divide 16 or be a multiple of 16, and "
                                         "divide k = {}", a.interleave, a.k));
  return j;
}

}  // namespace
}  // namespace detail

void swiglu_quantize(const SwigluQuantizeArgs& args, CUstream stream) { detail::run_row_job(detail::job_of(args), stream); }
void cpu::swiglu_quantize(const SwigluQuantizeArgs& args) { detail::run_row_job_on_cpu(detail::job_of(args)); }

}  // namespace nvfp4::jit
