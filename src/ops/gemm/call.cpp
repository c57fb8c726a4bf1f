#include "ops/gemm/call.hpp"

#include <algorithm>
#include <climits>
#include <cmath>

#include "common/params.cuh"
#include "common/scale_layout.cuh"
#include "common/tile_scheduler.cuh"
#include "ops/gemm/fp8_activations_op.hpp"
#include "ops/validate.hpp"

namespace nvfp4::jit::detail {

namespace {

// W4A4's A: the checks dequantize would make on it, named as gemm's arguments.
void check_fp4_activations(const Check& check, const GemmArgs& g, GemmCall& call) {
  const int64_t rows = call.rows;
  if (g.a) check.fail("a", "a is set but a_dtype = nvfp4: pass the NVFP4 activations in a_fp4");
  check.scale_layout("a_fp4.scale_layout", g.a_fp4.scale_layout);
  call.a_scale = g.a_fp4.global_scale;  // applied in the epilogue of the GEMM on decoded A
  call.a_gscale_mode = check.global_scale("a_fp4.global_scale", g.a_fp4.global_scale);
  const int64_t stride = g.a_fp4.row_stride_bytes ? g.a_fp4.row_stride_bytes : g.k / 2;
  if (stride < g.k / 2 || stride % 4)
    check.fail("a_fp4.row_stride_bytes",
               fmt::format("a_fp4.row_stride_bytes = {} must be at least k/2 = {} and a multiple of 4", stride, g.k / 2));
  call.a_stride = g.k;  // of the decoded A
  check.bytes("workspace (rows * k * 2)", {rows, g.k, 2});  // its size fits in 64 bits (check_workspace holds a given one to it)
  if (g.m == 0) return;
  check.buffer("a_fp4.data", g.a_fp4.data, 4);
  check.not_null("a_fp4.scales", g.a_fp4.scales);
  check.aligned("a_fp4.global_scale.device_ptr", g.a_fp4.global_scale.device_ptr, 4);
}

// The W4A8 mode's requirements (GemmPrecision::w4a8): a prepacked weight, and a workspace for
// A (BF16, FP16 or NVFP4) as E4M3 and its row scales. (The arch is the backend's to check.)
void check_w4a8(const Check& check, const GemmArgs& g, const GemmCall& call) {
  if (!g.b_prepacked)
    check.fail("b_prepacked", "precision = w4a8 needs a prepacked weight (b_prepacked = true, prepack()'s output: it holds "
                              "each row's fold exponent)", Status::unsupported);
  if (call.groups && call.layout == GroupedLayout::batched)
    check.fail("precision", "precision = w4a8 with the batched layout is not supported (contiguous or masked groups)",
               Status::unsupported);
  check.bytes("workspace (rows * k)", {call.rows, g.k + 4});  // its size fits in 64 bits
}

// A given workspace against what the call needs in the mode it runs (a W4A8 call small enough
// for the exact mode with NVFP4 A needs W4A4's).
void check_workspace(const Check& check, const GemmCall& call) {
  const GemmArgs& g = call.args;
  const int64_t bytes = gemm_call_workspace_bytes(call);
  if (g.m == 0 || bytes == 0 || !g.workspace || !check.checks_buffers()) return;
  check.aligned("workspace", g.workspace, 16);
  const char* need = g.precision == GemmPrecision::w4a8 ? "W4A8 needs (rows * k rounded up to 16, plus 4 * rows)"
                     : gathers_rows_first(call)           ? "the rows gathered through row_index need (rows * k * 2)"
                                                          : "W4A4 needs (rows * k * 2)";
  if (g.workspace_bytes < bytes)
    check.fail("workspace_bytes", fmt::format("workspace_bytes = {} is less than the {} bytes {}", g.workspace_bytes, bytes, need));
}

// RMSNorm of A in the GEMM (GemmArgs::a_rmsnorm_weight): BF16/FP16 rows of a dense exact call.
// (The arch is the backend's to check: sm_90a's kernel runs it.)
void check_a_rmsnorm(const Check& check, const GemmArgs& g, const GemmCall& call) {
  if (!g.a_rmsnorm_weight) {
    if (g.a_rmsnorm_weight_fp32)
      check.fail("a_rmsnorm_weight_fp32", "a_rmsnorm_weight_fp32 is set but a_rmsnorm_weight is null (no RMSNorm)");
    return;
  }
  if (g.a_dtype == DType::nvfp4)
    check.fail("a_rmsnorm_weight", "a_rmsnorm_weight with a_dtype = nvfp4 (W4A4): RMSNorm in the GEMM reads BF16 or FP16 "
                                   "rows of A", Status::unsupported);
  if (g.precision == GemmPrecision::w4a8)
    check.fail("a_rmsnorm_weight", "a_rmsnorm_weight with precision = w4a8: RMSNorm in the GEMM runs the exact mode only so "
                                   "far", Status::unsupported);
  if (call.groups)
    check.fail("gemm.a_rmsnorm_weight", "gemm.a_rmsnorm_weight: RMSNorm in the GEMM runs dense gemm calls only so far (not "
                                        "grouped_gemm)", Status::unsupported);
  if (!(g.a_rmsnorm_eps > 0.0f && std::isfinite(g.a_rmsnorm_eps)))
    check.fail("a_rmsnorm_eps", fmt::format("a_rmsnorm_eps = {} must be positive and finite (a zero-filled nvfp4_gemm_args? "
                                            "start from nvfp4_gemm_args_init())", g.a_rmsnorm_eps));
  if (g.m > 0) check.aligned("a_rmsnorm_weight", g.a_rmsnorm_weight, g.a_rmsnorm_weight_fp32 ? 8 : 4);
}

// A residual added in the epilogue (GemmArgs::residual): dense, exact W4A16, no fused epilogue;
// [m, n] in d_dtype. (The arch is the backend's to check.)
void check_residual(const Check& check, const GemmArgs& g, GemmCall& call) {
  if (!g.residual) {
    if (g.residual_row_stride)
      check.fail("residual_row_stride", fmt::format("residual_row_stride = {} is set but residual is null",
                                                    g.residual_row_stride));
    return;
  }
  if (call.groups)
    check.fail("gemm.residual", "gemm.residual: the residual add runs in dense gemm calls only so far (not grouped_gemm)",
               Status::unsupported);
  if (g.epilogue != GemmEpilogue::none)
    check.fail("residual", "residual with a fused epilogue (swiglu, moe_combine) is not supported: D = A . W^T + residual",
               Status::unsupported);
  if (g.a_dtype == DType::nvfp4)
    check.fail("residual", "residual with a_dtype = nvfp4 (W4A4) is not supported so far (BF16 or FP16 A)", Status::unsupported);
  if (g.precision == GemmPrecision::w4a8)
    check.fail("residual", "residual with precision = w4a8 is not supported so far (the exact mode)", Status::unsupported);
  check.not_negative("residual_row_stride", g.residual_row_stride);
  call.residual_stride = g.residual_row_stride ? g.residual_row_stride : g.n;
  if (call.residual_stride < g.n)
    check.fail("residual_row_stride",
               fmt::format("residual_row_stride = {} is less than n = {}", call.residual_stride, g.n));
  check.span("residual", "m", g.m, "residual_row_stride", call.residual_stride, element_bytes(g.d_dtype));
  if (g.m > 0) check.aligned("residual", g.residual, uintptr_t(element_bytes(g.d_dtype)));
}

// NVFP4 D (d_dtype nvfp4): the SwiGLU epilogue's output of `columns` (I) columns, described in
// d_fp4 as a fused quantizer's output, its global scale given. Sets its row stride (bytes) and
// global scale mode in `call`. (The arch is the backend's to check.)
void check_d_fp4(const Check& check, const GemmArgs& g, GemmCall& call, int64_t columns) {
  if (g.epilogue != GemmEpilogue::swiglu)
    check.fail("d_dtype", "d_dtype = nvfp4 is the SwiGLU epilogue's output (epilogue swiglu) only so far",
               Status::unsupported);
  if (g.d) check.fail("d", "d is set but d_dtype = nvfp4: pass NVFP4 D in d_fp4 (data, scales, global scale)");
  if (g.d_row_stride)
    check.fail("d_row_stride", fmt::format("d_row_stride = {} is for BF16, FP16 or FP32 D: NVFP4 D's is "
                                           "d_fp4.row_stride_bytes", g.d_row_stride));
  const QuantizedOutput& o = g.d_fp4;
  check.scale_layout("d_fp4.scale_layout", o.scale_layout);
  // (swizzled: whole 4-block columns, so no padding column is left for the epilogue to zero)
  const int64_t granule = o.scale_layout == ScaleLayout::swizzled128x4 ? 64 : 16;
  if (columns % granule)
    check.fail("n", fmt::format("n = {} with d_dtype nvfp4: D's n/2 = {} columns must be a multiple of {} ({})", g.n, columns,
                                granule, granule == 16 ? "whole NVFP4 blocks" : "whole 4-block columns of swizzled128x4 scales"));
  if (o.scale_mode != GlobalScaleMode::given)
    check.fail("d_fp4.scale_mode", "d_fp4.scale_mode must be given: a computed global scale needs a whole row's (or the "
                                   "tensor's) largest value before its first block, which no tile of the GEMM has; give one "
                                   "(e.g. the down projection's input_scale)", Status::unsupported);
  if (o.global_scale_out)
    check.fail("d_fp4.global_scale_out", "d_fp4.global_scale_out is for a computed global scale: leave it null");
  call.d_gscale_mode = check.global_scale("d_fp4.global_scale", o.global_scale);
  call.d_stride = o.row_stride_bytes ? o.row_stride_bytes : columns / 2;
  if (call.d_stride < columns / 2 || call.d_stride % 4)
    check.fail("d_fp4.row_stride_bytes", fmt::format("d_fp4.row_stride_bytes = {} must be at least n/4 = {} and a multiple of 4",
                                                     call.d_stride, columns / 2));
  if (g.m == 0) return;
  check.buffer("d_fp4.data", o.data, 4);
  check.not_null("d_fp4.scales", o.scales);
  check.aligned("d_fp4.global_scale.device_ptr", o.global_scale.device_ptr, 4);
}

// a + b, or a failure naming `arg`
int64_t sum(const Check& check, std::string_view arg, int64_t a, int64_t b) {
  int64_t s = 0;
  if (__builtin_add_overflow(a, b, &s))
    check.fail(arg, fmt::format("{} = {}: the offsets it makes do not fit in 64 bits", arg, b));
  return s;
}

// Every byte offset the kernels (and W4A4's decode) form in A, B, their scales and D is below
// the span checked here, so all of them fit in the 64-bit offsets the kernels compute with.
void check_spans(const Check& check, const GemmArgs& g, const GemmCall& call) {
  const bool batched = call.groups && call.layout == GroupedLayout::batched;
  const int64_t rows = batched ? g.m : call.rows;  // batched: a row of A and D holds (or strides to) each group's
  const char* rows_arg = rows == g.m ? "m" : "m * groups";
  const int64_t a_rows = call.row_index ? call.a_rows : rows;
  const char* a_rows_arg = call.row_index ? "a_rows" : rows_arg;
  if (g.a_dtype == DType::nvfp4) {
    const int64_t stride = g.a_fp4.row_stride_bytes ? g.a_fp4.row_stride_bytes : g.k / 2;
    check.span("a_fp4.data", a_rows_arg, a_rows, "a_fp4.row_stride_bytes", stride, 1);
    check.scale_span("a_fp4.scales", a_rows_arg, a_rows, g.k);
  } else {
    const int64_t a = check.span("a", a_rows_arg, a_rows, "a_row_stride", call.a_stride, element_bytes(g.a_dtype));
    if (batched)
      sum(check, "a_group_stride", a,
          check.span("a", "groups", call.groups, "a_group_stride", call.a_group_stride, element_bytes(g.a_dtype)));
  }
  const int64_t weights = std::max<int32_t>(call.groups, 1);
  const char* n_arg = call.groups ? "groups * n" : "n";
  if (!g.b_prepacked) {  // (a prepacked weight's size is prepacked_bytes', checked there)
    check.span("b.data", n_arg, weights * g.n, "b.row_stride_bytes", call.b_stride, 1);
    check.scale_span("b.scales", n_arg, weights * g.n, g.k);
  }
  if (g.d_dtype == DType::nvfp4) {  // (not batched: the SwiGLU epilogue's)
    check.span("d_fp4.data", rows_arg, rows, "d_fp4.row_stride_bytes", call.d_stride, 1);
    check.scale_span("d_fp4.scales", rows_arg, rows, g.n / 2);
    return;
  }
  const int64_t d = check.span("d", rows_arg, rows, "d_row_stride", call.d_stride, element_bytes(g.d_dtype));
  if (batched)
    sum(check, "d_group_stride", d,
        check.span("d", "groups", call.groups, "d_group_stride", call.d_group_stride, element_bytes(g.d_dtype)));
}

// The epilogue's checks (a grouped call's combine arguments in check_moe_combine); returns D's
// columns (n, or SwiGLU's n / 2). (Whether a SwiGLU weight must be prepacked is the backend's:
// sm_90a reads prepack's interleave, sm_100a / sm_120a the weight as stored.)
int64_t check_epilogue(const Check& check, const GemmArgs& g, const GemmCall& call) {
  if (g.epilogue != GemmEpilogue::swiglu && g.b_swiglu_interleave)
    check.fail("b_swiglu_interleave", fmt::format("b_swiglu_interleave = {} is for epilogue swiglu (leave 0)", g.b_swiglu_interleave));
  if (g.epilogue == GemmEpilogue::none) return g.n;
  if (g.epilogue == GemmEpilogue::moe_combine) {
    if (!call.groups)
      check.fail("epilogue", "epilogue moe_combine is for grouped_gemm (an MoE down projection on moe_route's rows), not "
                             "gemm", Status::unsupported);
    return g.n;
  }
  if (g.epilogue != GemmEpilogue::swiglu)
    check.fail("epilogue", fmt::format("epilogue = {} is not a GemmEpilogue (none, swiglu or moe_combine)", int(g.epilogue)));
  if (g.n % 16)
    check.fail("n", fmt::format("n = {} with epilogue swiglu: the gate_up weight's 2 x I rows need I = n/2 a multiple of 8",
                                g.n));
  if (g.b_prepacked && g.b_swiglu_interleave)
    check.fail("b_swiglu_interleave", fmt::format("b_swiglu_interleave = {} with b_prepacked: a prepacked weight records its "
                                                  "gate / up order (PrepackArgs::swiglu_interleave); leave 0",
                                                  g.b_swiglu_interleave));
  if (g.b_swiglu_interleave < 0)
    check.fail("b_swiglu_interleave", fmt::format("b_swiglu_interleave = {}: 0 (gate rows [0, n/2), then up rows) or a group "
                                                  "size g > 0", g.b_swiglu_interleave));
  // (a power of two: the kernels that read the weight as stored find a row by shifts, and a
  // TMA box of BN / 2 rows holds whole groups of g or lies inside one)
  const int64_t interleave = g.b_swiglu_interleave;
  if (interleave > 0 && ((interleave & (interleave - 1)) || (g.n / 2) % interleave))
    check.fail("b_swiglu_interleave",
               fmt::format("b_swiglu_interleave = {}: a gate_up weight as stored interleaved in groups of g rows needs g a "
                           "power of two dividing I = n/2 = {} (prepack it with PrepackArgs::swiglu_interleave = {} on "
                           "sm_90a, or reorder its rows into halves)",
                           interleave, g.n / 2, interleave),
               Status::unsupported);
  return g.n / 2;
}

// The checks of a GemmArgs, in `call` (whose rows and groups are set).
void check_gemm_args(const Check& check, const GemmArgs& g, GemmCall& call) {
  check.not_negative("m", g.m);
  check.positive("n", g.n);
  check.positive_multiple("k", g.k, 32, "two NVFP4 blocks, the packed row granule the kernels load");
  check.dtype_in("a_dtype", g.a_dtype, {DType::bf16, DType::fp16, DType::nvfp4});
  check.dtype_in("d_dtype", g.d_dtype, {DType::bf16, DType::fp16, DType::fp32, DType::nvfp4});
  if (g.bias) check.dtype_in("bias_dtype", g.bias_dtype, {DType::bf16, DType::fp32});
  // 0 is what a zero-filled C struct holds: it would write zeros (or the bias) without a word.
  if (!(g.alpha != 0.0f && std::isfinite(g.alpha)))
    check.fail("alpha", fmt::format("alpha = {} must be finite and nonzero (a zero-filled nvfp4_gemm_args? start from "
                                    "nvfp4_gemm_args_init())", g.alpha));
  if (!g.b_prepacked) check.scale_layout("b.scale_layout", g.b.scale_layout);
  const int64_t d_columns = check_epilogue(check, g, call);
  call.args = g;
  call.a_gscale_mode = nvfp4k::GSCALE_HOST;
  call.a_stride = g.a_row_stride ? g.a_row_stride : g.k;
  call.b_stride = g.b.row_stride_bytes ? g.b.row_stride_bytes : g.k / 2;
  call.d_stride = g.d_row_stride ? g.d_row_stride : d_columns;
  if (call.a_stride < g.k) check.fail("a_row_stride", fmt::format("a_row_stride = {} is less than k = {}", call.a_stride, g.k));
  if (call.a_stride % 8)
    check.fail("a_row_stride",
               fmt::format("a_row_stride = {} must be a multiple of 8 elements (16 bytes, for TMA)", call.a_stride));
  if (call.b_stride < g.k / 2 && !g.b_prepacked)
    check.fail("b.row_stride_bytes", fmt::format("b.row_stride_bytes = {} is less than k/2 = {}", call.b_stride, g.k / 2));
  if (call.b_stride % 16 && !g.b_prepacked)
    check.fail("b.row_stride_bytes", fmt::format("b.row_stride_bytes = {} must be a multiple of 16 (for TMA)", call.b_stride));
  if (g.d_dtype == DType::nvfp4) check_d_fp4(check, g, call, d_columns);
  else if (call.d_stride < d_columns)
    check.fail("d_row_stride", fmt::format("d_row_stride = {} is less than {} = {}", call.d_stride,
                                           d_columns == g.n ? "n" : "n/2 (D of epilogue swiglu)", d_columns));
  call.b_gscale_mode = check.global_scale("b.global_scale", g.b.global_scale);
  if (call.b_gscale_mode == nvfp4k::GSCALE_DEVICE_PER_ROW && call.groups == 0)
    check.fail("b.global_scale", "b.global_scale.per_row is not supported: a weight has one global scale");
  if (g.precision != GemmPrecision::exact && g.precision != GemmPrecision::w4a8)
    check.fail("precision", fmt::format("precision = {} is not a GemmPrecision (exact or w4a8)", int(g.precision)));
  if (g.precision == GemmPrecision::w4a8) check_w4a8(check, g, call);
  if (g.a_dtype == DType::nvfp4) check_fp4_activations(check, g, call);
  check_a_rmsnorm(check, g, call);
  check_residual(check, g, call);
  if (g.m > 0) {
    if (g.a_dtype != DType::nvfp4) {
      check.buffer("a", g.a, 16);
    }
    check.buffer("b.data", g.b.data, 16);
    if (!g.b_prepacked) {
      check.buffer("b.scales", g.b.scales, 16);
    }
    if (g.d_dtype != DType::nvfp4) check.buffer("d", g.d, g.d_dtype == DType::fp32 ? 4 : 2);
    if (g.bias) check.aligned("bias", g.bias, g.bias_dtype == DType::fp32 ? 4 : 2);
    check.aligned("b.global_scale.device_ptr", g.b.global_scale.device_ptr, 4);
  }
}

// GemmEpilogue::moe_combine's arguments (a contiguous grouped call, whose rows are moe_route's),
// resolved into call.combine.
void check_moe_combine(const Check& check, const GroupedGemmArgs& ga, GemmCall& call) {
  const MoeCombineEpilogue& c = ga.combine;
  const GemmArgs& g = ga.gemm;
  if (ga.layout != GroupedLayout::contiguous)
    check.fail("layout", "gemm.epilogue moe_combine needs the contiguous layout (moe_route's rows, which positions and "
                         "row_token index)", Status::unsupported);
  check.not_negative("combine.tokens", c.tokens);
  check.positive("combine.topk", c.topk);
  if (c.tokens > INT32_MAX / c.topk)
    check.fail("combine.tokens", fmt::format("combine.tokens * combine.topk = {} * {} is more than {} entries", c.tokens,
                                             c.topk, INT32_MAX));
  check.dtype_in("combine.weights_dtype", c.weights_dtype, {DType::fp32, DType::bf16});
  check.dtype_in("combine.out_dtype", c.out_dtype, {DType::bf16, DType::fp16, DType::fp32});
  check.not_negative("combine.out_row_stride", c.out_row_stride);
  call.combine = c;
  call.combine.out_row_stride = c.out_row_stride ? c.out_row_stride : g.n;
  if (call.combine.out_row_stride < g.n)
    check.fail("combine.out_row_stride",
               fmt::format("combine.out_row_stride = {} is less than gemm.n = {}", call.combine.out_row_stride, g.n));
  check.span("combine.out", "combine.tokens", c.tokens, "combine.out_row_stride", call.combine.out_row_stride,
             element_bytes(c.out_dtype));
  const int64_t counters = check.bytes("combine.counters (tokens * ceil(n / 64) * 4)", {c.tokens, (g.n + 63) / 64, 4});
  if (g.m == 0 || c.tokens == 0) return;
  check.buffer("combine.positions", c.positions, 4);
  check.buffer("combine.row_token", c.row_token, 4);
  check.buffer("combine.weights", c.weights, uintptr_t(element_bytes(c.weights_dtype)));
  check.buffer("combine.out", c.out, uintptr_t(element_bytes(c.out_dtype)));
  if (c.counters && check.checks_buffers()) {
    check.aligned("combine.counters", c.counters, 4);
    if (c.counters_bytes < counters)
      check.fail("combine.counters_bytes",
                 fmt::format("combine.counters_bytes = {} is less than the {} bytes the combine counts in ({} tokens x "
                             "{} column tiles x 4; moe_combine_counter_bytes)",
                             c.counters_bytes, counters, c.tokens, (g.n + 63) / 64));
  }
}

// A grouped call's A read through row_index (contiguous layout): W4A16's rows copied into the
// workspace in sorted order first (gathers_rows_first), W4A4's and W4A8's by the pass that decodes
// or rounds A (the Blackwell backends' W4A4 kernels gather them as they load them).
void check_row_gather(const Check& check, const GroupedGemmArgs& ga, GemmCall& call) {
  if (ga.layout != GroupedLayout::contiguous)
    check.fail("row_index", "row_index is for the contiguous layout (a masked group's rows are its own)");
  check.positive("a_rows", ga.a_rows);
  if (ga.gemm.a_fp4.global_scale.per_row)
    check.fail("gemm.a_fp4.global_scale",
               "gemm.a_fp4.global_scale.per_row with row_index: the scales would be the tokens', not the sorted rows'; "
               "give one scale or one per group");
  check.aligned("row_index", ga.row_index, 4);
  call.row_index = ga.row_index;
  call.a_rows = ga.a_rows;
  check.bytes("workspace (rows * k * 2)", {call.rows, ga.gemm.k, 2});  // W4A16's rows copied first
}

// The batched layout's strides (every group takes all m rows): defaults, the groups side by side
// in each row, filled into `g`'s row strides; D's (t, g) rows must not overlap.
void resolve_batched_strides(const Check& check, const GroupedGemmArgs& ga, GemmArgs& g, GemmCall& call) {
  check.not_negative("a_group_stride", ga.a_group_stride);
  check.not_negative("d_group_stride", ga.d_group_stride);
  const bool fp4 = g.a_dtype == DType::nvfp4;
  if (fp4 && ga.a_group_stride)
    check.fail("a_group_stride", "a_group_stride is for BF16/FP16 A: W4A4's gemm.a_fp4 is [m * groups] rows, row t * groups + g",
               Status::unsupported);
  call.a_group_stride = fp4 ? g.k : ga.a_group_stride ? ga.a_group_stride : g.k;
  call.d_group_stride = ga.d_group_stride ? ga.d_group_stride : g.n;
  if (!fp4 && !g.a_row_stride) g.a_row_stride = check.bytes("groups * a_group_stride", {ga.groups, call.a_group_stride});
  if (!g.d_row_stride) g.d_row_stride = check.bytes("groups * d_group_stride", {ga.groups, call.d_group_stride});
  if (call.a_group_stride % 8)
    check.fail("a_group_stride",
               fmt::format("a_group_stride = {} must be a multiple of 8 elements (16 bytes, for TMA)", call.a_group_stride));
  const int64_t n = g.n, rs = g.d_row_stride, gs = call.d_group_stride;
  // x >= a * b, where a product past int64 is more than any x
  auto at_least = [](int64_t x, int64_t a, int64_t b) {
    int64_t p = 0;
    return !__builtin_mul_overflow(a, b, &p) && x >= p;
  };
  const bool rows_hold_groups = gs >= n && at_least(rs, ga.groups, gs), groups_hold_rows = rs >= n && at_least(gs, g.m, rs);
  if (!rows_hold_groups && !groups_hold_rows)
    check.fail("d_group_stride", fmt::format("d_group_stride = {} with gemm.d_row_stride = {} makes rows of D overlap (n = {}, "
                                             "{} groups of {} rows): give [m, groups, n] or [groups, m, n] strides",
                                             gs, rs, n, ga.groups, g.m));
}

}  // namespace

int64_t grouped_default_expected_m(int64_t m, int32_t groups) {
  // Room over the mean rows per group for routing's spread: with too little, many groups get a
  // second, nearly empty row tile that decodes the group's whole weight again. A quarter more;
  // from 6 rows the power of two at or above it, at least 16, up to 128 (at a mean of 5 rows a
  // uniform routing puts one group in seven past 8 rows, and taller tiles cut the hot groups of
  // a skewed routing into fewer tiles; docs/perf-log.md has the times).
  // Past 128, a group's rows spread as sqrt(mean) (each row picks a group at random), so a
  // quarter more over-provisions: mean + 2.5 sqrt(mean) (512 +- 22 rows need three 192-row
  // tiles; 640 rows, a quarter more, would be four of 160). docs/perf-log.md, the expected_m
  // sweeps.
  const int64_t rows = std::max<int64_t>(1, (m + m / 4) / groups);
  if (rows < 6) return rows;
  if (rows > 128) {
    const double mean = double(m) / groups;
    return int64_t(std::ceil(mean + 2.5 * std::sqrt(mean)));
  }
  int64_t p = 16;
  while (p < rows) p *= 2;
  return p;
}

GemmCall gemm_call(const GemmArgs& g, const char* who, bool pointers) {
  GemmCall call;
  call.rows = g.m;
  call.expected_m = g.m;
  const Check check(who, pointers);
  check_gemm_args(check, g, call);
  check_spans(check, g, call);
  if (g.precision == GemmPrecision::w4a8 && w4a8_runs_exact(false, g.m, g.n)) call.args.precision = GemmPrecision::exact;
  check_workspace(check, call);
  call.problem = gemm_problem(GemmSpec{}.arch, call);
  return call;
}

GemmCall grouped_gemm_call(const GroupedGemmArgs& ga, const char* who, bool pointers) {
  const Check check(who, pointers);
  GemmArgs g = ga.gemm;  // batched: with the default row strides filled in
  check.positive("groups", ga.groups);
  if (ga.layout != GroupedLayout::contiguous && ga.layout != GroupedLayout::masked && ga.layout != GroupedLayout::batched)
    check.fail("layout", fmt::format("layout = {} is not a GroupedLayout (contiguous, masked or batched)", int(ga.layout)));
  check.not_negative("gemm.m", g.m);
  const bool batched = ga.layout == GroupedLayout::batched;
  if (batched && g.epilogue == GemmEpilogue::swiglu)
    check.fail("gemm.epilogue", "gemm.epilogue swiglu with the batched layout is not supported (contiguous or masked)",
               Status::unsupported);
  if (!batched && (ga.a_group_stride || ga.d_group_stride))
    check.fail(ga.a_group_stride ? "a_group_stride" : "d_group_stride", "group strides are for the batched layout only");
  check.not_negative("expected_m", ga.expected_m);
  GemmCall call;
  call.groups = ga.groups;
  call.layout = ga.layout;
  call.group_ends = ga.group_ends;
  call.masked_m = ga.masked_m;
  const bool masked = ga.layout == GroupedLayout::masked;
  if ((masked || batched) && g.m > INT32_MAX / ga.groups)
    check.fail("gemm.m", fmt::format("gemm.m = {} rows in each of {} groups is more than {} rows", g.m, ga.groups, INT32_MAX));
  call.rows = masked || batched ? g.m * ga.groups : g.m;
  call.expected_m = ga.expected_m   ? ga.expected_m
                    : masked || batched ? g.m
                                        : grouped_default_expected_m(g.m, ga.groups);
  if (batched) {
    check.positive("gemm.n", g.n);
    check.positive_multiple("gemm.k", g.k, 32, "two NVFP4 blocks, the packed row granule the kernels load");
    resolve_batched_strides(check, ga, g, call);
  }
  check_gemm_args(check, g, call);
  if (g.m > 0) {
    if (!batched) {  // a batched layout's sizes are m
      const int32_t* sizes = masked ? ga.masked_m : ga.group_ends;
      const char* name = masked ? "masked_m" : "group_ends";
      check.buffer(name, sizes, 4);
    }
    if (g.b.global_scale.per_row) check.not_null("gemm.b.global_scale.device_ptr", g.b.global_scale.device_ptr);
  }
  if (ga.a_global_scale_per_group) {
    if (g.a_dtype != DType::nvfp4)
      check.fail("a_global_scale_per_group", "a_global_scale_per_group is set but gemm.a_dtype is not nvfp4 (W4A4)");
    if (!g.a_fp4.global_scale.device_ptr || g.a_fp4.global_scale.per_row)
      check.fail("gemm.a_fp4.global_scale", "a_global_scale_per_group needs gemm.a_fp4.global_scale.device_ptr ([groups] "
                                            "values) and per_row false");
    call.a_gscale_mode = nvfp4k::GSCALE_DEVICE_PER_GROUP;
  }
  if (ga.row_index) check_row_gather(check, ga, call);
  if (g.epilogue == GemmEpilogue::moe_combine) check_moe_combine(check, ga, call);
  check_spans(check, call.args, call);
  if (g.precision == GemmPrecision::w4a8 && w4a8_runs_exact(true, call.expected_m, g.n))
    call.args.precision = GemmPrecision::exact;
  check_workspace(check, call);
  call.problem = gemm_problem(GemmSpec{}.arch, call);
  return call;
}

int64_t gemm_call_workspace_bytes(const GemmCall& call) {
  if (call.args.precision == GemmPrecision::w4a8) return fp8_activation_bytes(call.rows, call.args.k);
  if (gathers_rows_first(call)) return call.rows * call.args.k * 2;  // (its size checked in check_row_gather)
  // W4A4's decoded A, unless the call runs in one launch (every backend's GEMM then reads A as
  // it is, or decodes it as it loads it)
  if (call.args.a_dtype != DType::nvfp4 || w4a4_runs_one_launch(call)) return 0;
  return call.rows * call.args.k * 2;  // (its size checked in check_fp4_activations)
}

int64_t gemm_groups_reached(const GemmCall& call) {
  return call.groups && call.layout == GroupedLayout::contiguous ? std::min<int64_t>(call.groups, call.args.m) : 0;
}

GemmCall gemm_call_on_decoded_a(const GemmCall& call, const void* decoded_a) {
  GemmCall inner = call;
  inner.args.a = decoded_a;
  inner.args.a_dtype = DType::bf16;
  inner.row_index = nullptr;  // the decode gathered the rows
  inner.a_rows = 0;
  // batched: the decoded rows are (t, g), the groups side by side
  inner.a_stride = call.layout == GroupedLayout::batched ? call.groups * call.args.k : call.args.k;
  inner.args.a_row_stride = inner.a_stride;
  inner.problem = gemm_problem(GemmSpec{}.arch, inner);
  return inner;
}

GemmCall gemm_call_on_gathered_a(const GemmCall& call, const void* gathered_a) {
  GemmCall inner = call;
  inner.args.a = gathered_a;
  inner.args.a_row_stride = inner.a_stride = call.args.k;
  inner.row_index = nullptr;  // the pass gathered the rows
  inner.a_rows = 0;
  return inner;
}

GemmCall gemm_call_on_fp8_a(const GemmCall& call, const void* workspace) {
  GemmCall inner = call;
  const auto* bytes = static_cast<const unsigned char*>(workspace);
  inner.args.a = workspace;
  inner.args.a_row_stride = inner.a_stride = call.args.k;
  inner.row_index = nullptr;  // the activation pass gathered the rows
  inner.a_rows = 0;
  inner.a_scale = GlobalScale{1.0f, reinterpret_cast<const float*>(bytes + fp8_row_scales_offset(call.rows, call.args.k)), true};
  inner.a_gscale_mode = nvfp4k::GSCALE_DEVICE_PER_ROW;
  return inner;
}

GemmSpec gemm_problem(Arch arch, int64_t n, int64_t k, DType a, DType d, ScaleLayout b_layout, bool b_prepacked,
                        uint8_t bias) {
  GemmSpec spec;
  spec.arch = arch;
  spec.n = n;
  spec.k = k;
  spec.a_dtype = uint8_t(a == DType::nvfp4 ? DType::bf16 : a);  // W4A4 runs the BF16 kernel on decoded A
  spec.out_dtype = uint8_t(d);
  spec.scale_layout = b_prepacked ? uint8_t(nvfp4k::SCALES_PREPACKED) : uint8_t(b_layout);
  spec.flags = bias == uint8_t(DType::bf16) ? kFlagBiasBf16 : bias == uint8_t(DType::fp32) ? kFlagBiasFp32 : 0;
  return spec;
}

namespace {

// `spec` as a grouped weight's of `groups` experts in `layout` (none for 0 groups)
GemmSpec with_groups(GemmSpec spec, int32_t groups, GroupedLayout layout) {
  if (groups) {
    spec.groups = groups;
    spec.flags |= layout == GroupedLayout::masked    ? kFlagGroupedMasked
                  : layout == GroupedLayout::batched ? kFlagGroupedBatched
                                                     : kFlagGroupedContiguous;
  }
  return spec;
}

}  // namespace

GemmSpec with_residual(GemmSpec spec, bool residual) {
  if (residual) spec.flags |= kFlagResidual;
  return spec;
}

GemmSpec with_a_rmsnorm(GemmSpec spec, bool rmsnorm, bool weight_fp32) {
  if (rmsnorm) spec.flags |= weight_fp32 ? kFlagARmsNormFp32 : kFlagARmsNorm;
  return spec;
}

GemmSpec with_epilogue(GemmSpec spec, GemmEpilogue epilogue) {
  if (epilogue == GemmEpilogue::swiglu) spec.flags |= kFlagEpilogueSwiglu;
  if (epilogue == GemmEpilogue::moe_combine) spec.flags |= kFlagEpilogueMoeCombine;
  return spec;
}

int64_t moe_combine_counter_bytes(const GemmCall& call) {
  if (call.args.epilogue != GemmEpilogue::moe_combine) return 0;
  return call.combine.tokens * ((call.args.n + 63) / 64) * 4;  // (its size checked in check_moe_combine)
}

GemmSpec gemm_problem(Arch arch, const GemmCall& call) {
  const GemmArgs& g = call.args;
  const GemmSpec spec = with_residual(
      with_a_rmsnorm(
          with_epilogue(with_groups(gemm_problem(arch, g.n, g.k, g.a_dtype, g.d_dtype, g.b.scale_layout, g.b_prepacked,
                                                 g.bias ? uint8_t(g.bias_dtype) : kNoDType),
                                    call.groups, call.layout),
                        g.epilogue),
          g.a_rmsnorm_weight != nullptr, g.a_rmsnorm_weight_fp32),
      g.residual != nullptr);
  // (the W4A4 GEMM on decoded A sees a_dtype bf16 here: nvfp4 reaches only native backends)
  return gemm_with_precision(g.a_dtype == DType::nvfp4 ? gemm_fp4_problem(spec, g.a_fp4.scale_layout) : spec, g.precision);
}

GemmSpec gemm_problem_on(Arch arch, const GemmCall& call) {
  GemmSpec problem = call.problem;
  problem.arch = arch;
  return problem;
}

GemmSpec gemm_fp4_problem(GemmSpec problem, ScaleLayout a_layout) {
  problem.a_dtype = uint8_t(DType::nvfp4);
  if (a_layout == ScaleLayout::swizzled128x4) problem.flags |= kFlagAScalesSwizzled;
  return problem;
}

GemmSpec gemm_decoded_a_problem(GemmSpec problem) {
  problem.a_dtype = uint8_t(DType::bf16);
  problem.flags = uint16_t(problem.flags & ~kFlagAScalesSwizzled);
  return problem;
}

GemmSpec gemm_problem(Arch arch, const GemmProblem& p) {
  const GemmSpec spec = with_groups(gemm_problem(arch, p.n, p.k, p.a_dtype, p.d_dtype, p.scale_layout, p.b_prepacked,
                                                p.has_bias ? uint8_t(p.bias_dtype) : kNoDType),
                                   p.groups, p.grouped_layout);
  return gemm_with_precision(
      with_residual(with_a_rmsnorm(with_epilogue(spec, p.epilogue), p.a_rmsnorm, p.a_rmsnorm_weight_fp32), p.residual),
      p.precision);
}

GemmSpec gemm_fp8_problem(GemmSpec problem) {
  return problem.a_dtype == uint8_t(DType::nvfp4) ? gemm_decoded_a_problem(problem) : problem;
}

GemmSpec gemm_with_precision(GemmSpec problem, GemmPrecision precision) {
  problem.flags = uint16_t(precision == GemmPrecision::w4a8 ? problem.flags | kFlagW4A8 : problem.flags & ~kFlagW4A8);
  return problem;
}

bool gemm_problem_w4a8(const GemmSpec& problem) { return problem.flags & kFlagW4A8; }

bool gemm_problem_prepacked(const GemmSpec& problem) { return problem.scale_layout == nvfp4k::SCALES_PREPACKED; }

int gemm_problem_grouped(const GemmSpec& problem) {
  return problem.flags & kFlagGroupedBatched      ? nvfp4k::GROUPED_BATCHED
         : problem.flags & kFlagGroupedMasked     ? nvfp4k::GROUPED_MASKED
         : problem.flags & kFlagGroupedContiguous ? nvfp4k::GROUPED_CONTIGUOUS
                                                  : nvfp4k::GROUPED_NONE;
}

int gemm_problem_groups(const GemmSpec& problem) { return gemm_problem_grouped(problem) ? problem.groups : 0; }

GemmSpec gemm_spec(const GemmSpec& problem, const GemmTile& tile) {
  GemmSpec spec = problem;
  spec.tile = tile;
  return spec;
}

}  // namespace nvfp4::jit::detail
