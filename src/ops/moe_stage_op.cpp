// MoE staging: the tokens quantized for the experts, their top-k ids (and weights) copied beside.
// The kernel, its launch and CPU reference are the fused quantizers' (row_quantize_run.hpp).
#include <fmt/format.h>

#include "ops/row_quantize_run.hpp"
#include "ops/validate.hpp"

namespace nvfp4::jit {

namespace detail {
namespace {

RowJob job_of(const MoeStageArgs& a) {
  RowJob j = checked_row_job(Op::moe_stage, "nvfp4::jit::moe_stage", a.tokens, a.in_dtype, a.in_row_stride, a.rows, a.k, a.out, a.k);
  Check check(j.who);
  check.not_negative("topk", a.topk);
  check.index_type("topk_ids_type", a.topk_ids_type);
  check.index_type("topk_ids_out_type", a.topk_ids_out_type);
  if (a.rows > 0 && a.topk > 0) {
    check.not_null("topk_ids", a.topk_ids);
    check.not_null("topk_ids_out", a.topk_ids_out);
    if (a.topk_weights) check.not_null("topk_weights_out", a.topk_weights_out);
  }
  j.topk = a.topk, j.ids = a.topk_ids, j.weights = a.topk_weights, j.ids_out = a.topk_ids_out, j.weights_out = a.topk_weights_out;
  j.ids_64 = a.topk_ids_type == IndexType::int64, j.ids_out_64 = a.topk_ids_out_type == IndexType::int64;
  return j;
}

}  // namespace
}  // namespace detail

void moe_stage(const MoeStageArgs& args, CUstream stream) { detail::run_row_job(detail::job_of(args), stream); }
void cpu::moe_stage(const MoeStageArgs& args) { detail::run_row_job_on_cpu(detail::job_of(args)); }

}  // namespace nvfp4::jit
