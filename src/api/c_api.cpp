// The C API: thin wrappers that turn exceptions into status codes and a per-thread message.
#include <algorithm>
#include <climits>
#include <exception>
#include <new>
#include <string>
#include <string_view>

#include "core/nvrtc_library.hpp"
#include "nvfp4/jit.h"
#include "nvfp4/jit.hpp"

namespace {

thread_local std::string last_error;

// A C caller reads the C function's name: "nvfp4::jit::gemm: k = 48 ..." from nvfp4_jit_gemm
// becomes "nvfp4_jit_gemm: k = 48 ...".
void set_last_error(const char* who, const std::string& message) {
  constexpr std::string_view cpp = "nvfp4::jit::";
  const size_t colon = message.find(": ");
  if (message.compare(0, cpp.size(), cpp) == 0 && colon != std::string::npos)
    last_error = who + message.substr(colon);
  else
    last_error = std::string(who) + ": " + message;
}

template <class F>
nvfp4_status guarded(const char* who, F&& body) {
  try {
    body();
    last_error.clear();
    return NVFP4_OK;
  } catch (const nvfp4::jit::Error& e) {
    set_last_error(who, e.what());
    return static_cast<nvfp4_status>(e.status());
  } catch (const std::bad_alloc&) {
    set_last_error(who, "out of host memory");
  } catch (const std::exception& e) {
    set_last_error(who, e.what());
  } catch (...) {
    set_last_error(who, "unknown error");
  }
  return NVFP4_INTERNAL;
}

// A size helper: its value, or -1 with the error set.
template <class F>
int64_t guarded_size(const char* who, F&& body) {
  int64_t bytes = -1;
  guarded(who, [&] { bytes = body(); });
  return bytes;
}

nvfp4::jit::GlobalScale to_cpp(const nvfp4_global_scale& g) { return {g.value, g.device_ptr, g.per_row != 0}; }

nvfp4::jit::Nvfp4Tensor to_cpp(const nvfp4_tensor& t) {
  return {t.data, t.row_stride_bytes, t.scales, static_cast<nvfp4::jit::ScaleLayout>(t.scale_layout), to_cpp(t.global_scale)};
}

nvfp4::jit::QuantizedOutput to_cpp(const nvfp4_quantized_output& o) {
  nvfp4::jit::QuantizedOutput q;
  q.data = o.data;
  q.row_stride_bytes = o.row_stride_bytes;
  q.scales = o.scales;
  q.scale_layout = static_cast<nvfp4::jit::ScaleLayout>(o.scale_layout);
  q.scale_mode = static_cast<nvfp4::jit::GlobalScaleMode>(o.scale_mode);
  q.global_scale = to_cpp(o.global_scale);
  q.global_scale_out = o.global_scale_out;
  return q;
}

nvfp4::jit::GemmArgs to_cpp(const nvfp4_gemm_args& g) {
  nvfp4::jit::GemmArgs a;
  a.m = g.m;
  a.n = g.n;
  a.k = g.k;
  a.a = g.a;
  a.a_dtype = static_cast<nvfp4::jit::DType>(g.a_dtype);
  a.a_row_stride = g.a_row_stride;
  a.b = to_cpp(g.b);
  a.d = g.d;
  a.d_dtype = static_cast<nvfp4::jit::DType>(g.d_dtype);
  a.d_row_stride = g.d_row_stride;
  a.bias = g.bias;
  a.bias_dtype = static_cast<nvfp4::jit::DType>(g.bias_dtype);
  a.alpha = g.alpha;
  a.a_fp4 = to_cpp(g.a_fp4);
  a.workspace = g.workspace;
  a.workspace_bytes = g.workspace_bytes;
  a.b_prepacked = g.b_prepacked != 0;
  a.weights_static = g.weights_static != 0;
  a.epilogue = static_cast<nvfp4::jit::GemmEpilogue>(g.epilogue);
  a.precision = static_cast<nvfp4::jit::GemmPrecision>(g.precision);
  a.b_swiglu_interleave = g.b_swiglu_interleave;
  a.a_rmsnorm_weight = g.a_rmsnorm_weight;
  a.a_rmsnorm_weight_fp32 = g.a_rmsnorm_weight_fp32 != 0;
  a.a_rmsnorm_eps = g.a_rmsnorm_eps;
  a.residual = g.residual;
  a.residual_row_stride = g.residual_row_stride;
  a.d_fp4 = to_cpp(g.d_fp4);
  return a;
}

nvfp4::jit::GroupedGemmArgs to_cpp(const nvfp4_grouped_gemm_args& g) {
  nvfp4::jit::GroupedGemmArgs a;
  a.gemm = to_cpp(g.gemm);
  a.groups = g.groups;
  a.layout = static_cast<nvfp4::jit::GroupedLayout>(g.layout);
  a.group_ends = g.group_ends;
  a.masked_m = g.masked_m;
  a.expected_m = g.expected_m;
  a.a_global_scale_per_group = g.a_global_scale_per_group != 0;
  a.row_index = g.row_index;
  a.a_rows = g.a_rows;
  a.a_group_stride = g.a_group_stride;
  a.d_group_stride = g.d_group_stride;
  const nvfp4_moe_combine_epilogue& c = g.combine;
  a.combine = {c.positions, c.row_token, c.weights, static_cast<nvfp4::jit::DType>(c.weights_dtype), c.tokens, c.topk,
               c.out,       static_cast<nvfp4::jit::DType>(c.out_dtype), c.out_row_stride, c.counters, c.counters_bytes};
  return a;
}

nvfp4::jit::DequantizeArgs to_cpp(const nvfp4_dequantize_args& c) {
  nvfp4::jit::DequantizeArgs a;
  a.src = to_cpp(c.src);
  a.src_rows = c.src_rows;
  a.k = c.k;
  a.out = c.out;
  a.out_dtype = static_cast<nvfp4::jit::DType>(c.out_dtype);
  a.out_row_stride = c.out_row_stride;
  a.row_indices = c.row_indices;
  a.rows = c.rows;
  return a;
}

nvfp4::jit::QuantizeArgs to_cpp(const nvfp4_quantize_args& c) {
  nvfp4::jit::QuantizeArgs a;
  a.in = c.in;
  a.in_dtype = static_cast<nvfp4::jit::DType>(c.in_dtype);
  a.in_row_stride = c.in_row_stride;
  a.rows = c.rows;
  a.k = c.k;
  a.out = c.out;
  a.out_row_stride_bytes = c.out_row_stride_bytes;
  a.scales = c.scales;
  a.scale_layout = static_cast<nvfp4::jit::ScaleLayout>(c.scale_layout);
  a.scale_mode = static_cast<nvfp4::jit::GlobalScaleMode>(c.scale_mode);
  a.global_scale = to_cpp(c.global_scale);
  a.global_scale_out = c.global_scale_out;
  return a;
}

nvfp4::jit::ConvertScalesArgs to_cpp(const nvfp4_convert_scales_args& c) {
  return {c.src, static_cast<nvfp4::jit::ScaleLayout>(c.src_layout), c.dst, static_cast<nvfp4::jit::ScaleLayout>(c.dst_layout),
          c.rows, c.k};
}

nvfp4::jit::RmsNormQuantizeArgs to_cpp(const nvfp4_rmsnorm_quantize_args& c) {
  nvfp4::jit::RmsNormQuantizeArgs a;
  a.in = c.in;
  a.in_dtype = static_cast<nvfp4::jit::DType>(c.in_dtype);
  a.in_row_stride = c.in_row_stride;
  a.rows = c.rows;
  a.k = c.k;
  a.weight = c.weight;
  a.eps = c.eps;
  a.out = to_cpp(c.out);
  a.normed = c.normed;
  a.normed_row_stride = c.normed_row_stride;
  a.inv_rms = c.inv_rms;
  a.weight_fp32 = c.weight_fp32 != 0;
  return a;
}

nvfp4::jit::MhcRmsNormQuantizeArgs to_cpp(const nvfp4_mhc_rmsnorm_quantize_args& c) {
  nvfp4::jit::MhcRmsNormQuantizeArgs a;
  a.in = c.in;
  a.in_dtype = static_cast<nvfp4::jit::DType>(c.in_dtype);
  a.rows = c.rows;
  a.n_hc = c.n_hc;
  a.k = c.k;
  a.in_row_stride = c.in_row_stride;
  a.in_hc_stride = c.in_hc_stride;
  a.mix = c.mix;
  a.mix_row_stride = c.mix_row_stride;
  a.weight = c.weight;
  a.weight_fp32 = c.weight_fp32 != 0;
  a.eps = c.eps;
  a.out = to_cpp(c.out);
  a.h = c.h;
  a.h_row_stride = c.h_row_stride;
  a.normed = c.normed;
  a.normed_row_stride = c.normed_row_stride;
  a.inv_rms = c.inv_rms;
  return a;
}

nvfp4::jit::SwigluQuantizeArgs to_cpp(const nvfp4_swiglu_quantize_args& c) {
  nvfp4::jit::SwigluQuantizeArgs a;
  a.in = c.in;
  a.in_dtype = static_cast<nvfp4::jit::DType>(c.in_dtype);
  a.in_row_stride = c.in_row_stride;
  a.rows = c.rows;
  a.k = c.k;
  a.interleave = c.interleave;
  a.out = to_cpp(c.out);
  return a;
}

nvfp4::jit::MoeStageArgs to_cpp(const nvfp4_moe_stage_args& c) {
  nvfp4::jit::MoeStageArgs a;
  a.tokens = c.tokens;
  a.in_dtype = static_cast<nvfp4::jit::DType>(c.in_dtype);
  a.in_row_stride = c.in_row_stride;
  a.rows = c.rows;
  a.k = c.k;
  a.out = to_cpp(c.out);
  a.topk = c.topk;
  a.topk_ids = c.topk_ids;
  a.topk_weights = c.topk_weights;
  a.topk_ids_out = c.topk_ids_out;
  a.topk_weights_out = c.topk_weights_out;
  a.topk_ids_type = static_cast<nvfp4::jit::IndexType>(c.topk_ids_type);
  a.topk_ids_out_type = static_cast<nvfp4::jit::IndexType>(c.topk_ids_out_type);
  return a;
}

nvfp4::jit::MoeRouteArgs to_cpp(const nvfp4_moe_route_args& c) {
  nvfp4::jit::MoeRouteArgs a;
  a.topk_ids = c.topk_ids;
  a.topk_ids_type = static_cast<nvfp4::jit::IndexType>(c.topk_ids_type);
  a.tokens = c.tokens;
  a.topk = c.topk;
  a.groups = c.groups;
  a.first_expert = c.first_expert;
  a.counts = c.counts;
  a.group_ends = c.group_ends;
  a.row_index = c.row_index;
  a.positions = c.positions;
  a.workspace = c.workspace;
  a.workspace_bytes = c.workspace_bytes;
  return a;
}

nvfp4::jit::MoeCombineArgs to_cpp(const nvfp4_moe_combine_args& c) {
  nvfp4::jit::MoeCombineArgs a;
  a.d = c.d;
  a.d_dtype = static_cast<nvfp4::jit::DType>(c.d_dtype);
  a.d_row_stride = c.d_row_stride;
  a.d_rows = c.d_rows;
  a.positions = c.positions;
  a.weights = c.weights;
  a.weights_dtype = static_cast<nvfp4::jit::DType>(c.weights_dtype);
  a.tokens = c.tokens;
  a.topk = c.topk;
  a.n = c.n;
  a.out = c.out;
  a.out_dtype = static_cast<nvfp4::jit::DType>(c.out_dtype);
  a.out_row_stride = c.out_row_stride;
  return a;
}

nvfp4::jit::PrepackArgs to_cpp(const nvfp4_prepack_args& c) {
  return {to_cpp(c.weight), c.n, c.k, c.out, c.swiglu_interleave};
}

nvfp4::jit::ModelOptLinear to_cpp(const nvfp4_modelopt_linear& c) {
  return {c.n, c.k, c.weight, c.weight_scale, to_cpp(c.weight_scale_2), to_cpp(c.input_scale)};
}

void require(const void* args) {
  if (!args) throw nvfp4::jit::Error(nvfp4::jit::Status::invalid_argument, "args is null");
}

// A C entry point: `call` on the converted args, the failure as a status and a message.
template <class CppArgs, class CArgs>
nvfp4_status run(const char* who, void (*call)(const CppArgs&, CUstream), const CArgs* args, CUstream stream) {
  return guarded(who, [&] {
    require(args);
    call(to_cpp(*args), stream);
  });
}

template <class CArgs>
nvfp4_status load_only(const char* who, const CArgs* args) {
  return guarded(who, [&] {
    require(args);
    nvfp4::jit::ensure_loaded(to_cpp(*args));
  });
}

}  // namespace

extern "C" {

const char* nvfp4_jit_version(void) { return nvfp4::jit::version(); }
const char* nvfp4_jit_last_error(void) { return last_error.c_str(); }

nvfp4_status nvfp4_jit_nvrtc_info(nvfp4_nvrtc_info* info) {
  return guarded("nvfp4_jit_nvrtc_info", [&] {
    if (!info) throw nvfp4::jit::Error(nvfp4::jit::Status::invalid_argument, "info must not be NULL");
    // The loaded NVRTC's strings, kept for the process's life (nvrtc_info() returns copies).
    const auto& loaded = nvfp4::jit::detail::nvrtc_loaded();
    const bool ok = loaded.error.empty();
    *info = {ok ? loaded.path.c_str() : "", ok ? loaded.version.c_str() : "",
             ok ? nvfp4::jit::detail::to_string(loaded.source) : "", loaded.error.c_str()};
    if (!ok) throw nvfp4::jit::Error(nvfp4::jit::Status::compile_failed, loaded.error);
  });
}

nvfp4_status nvfp4_jit_dequantize(const nvfp4_dequantize_args* args, CUstream stream) {
  return run("nvfp4_jit_dequantize", nvfp4::jit::dequantize, args, stream);
}

nvfp4_status nvfp4_jit_quantize(const nvfp4_quantize_args* args, CUstream stream) {
  return run("nvfp4_jit_quantize", nvfp4::jit::quantize, args, stream);
}

nvfp4_status nvfp4_jit_convert_scales(const nvfp4_convert_scales_args* args, CUstream stream) {
  return run("nvfp4_jit_convert_scales", nvfp4::jit::convert_scales, args, stream);
}

int64_t nvfp4_jit_scale_bytes(nvfp4_scale_layout layout, int64_t rows, int64_t k) {
  return guarded_size("nvfp4_jit_scale_bytes",
                      [&] { return nvfp4::jit::scale_bytes(static_cast<nvfp4::jit::ScaleLayout>(layout), rows, k); });
}

nvfp4_status nvfp4_jit_rmsnorm_quantize(const nvfp4_rmsnorm_quantize_args* args, CUstream stream) {
  return run("nvfp4_jit_rmsnorm_quantize", nvfp4::jit::rmsnorm_quantize, args, stream);
}

nvfp4_status nvfp4_jit_mhc_rmsnorm_quantize(const nvfp4_mhc_rmsnorm_quantize_args* args, CUstream stream) {
  return run("nvfp4_jit_mhc_rmsnorm_quantize", nvfp4::jit::mhc_rmsnorm_quantize, args, stream);
}

nvfp4_status nvfp4_jit_swiglu_quantize(const nvfp4_swiglu_quantize_args* args, CUstream stream) {
  return run("nvfp4_jit_swiglu_quantize", nvfp4::jit::swiglu_quantize, args, stream);
}

nvfp4_status nvfp4_jit_moe_stage(const nvfp4_moe_stage_args* args, CUstream stream) {
  return run("nvfp4_jit_moe_stage", nvfp4::jit::moe_stage, args, stream);
}

nvfp4_status nvfp4_jit_moe_route(const nvfp4_moe_route_args* args, CUstream stream) {
  return run("nvfp4_jit_moe_route", nvfp4::jit::moe_route, args, stream);
}

nvfp4_status nvfp4_jit_moe_combine(const nvfp4_moe_combine_args* args, CUstream stream) {
  return run("nvfp4_jit_moe_combine", nvfp4::jit::moe_combine, args, stream);
}

nvfp4_status nvfp4_jit_gemm(const nvfp4_gemm_args* args, CUstream stream) {
  return run("nvfp4_jit_gemm", nvfp4::jit::gemm, args, stream);
}

int64_t nvfp4_jit_gemm_workspace_bytes(const nvfp4_gemm_args* args) {
  return guarded_size("nvfp4_jit_gemm_workspace_bytes", [&] {
    require(args);
    return nvfp4::jit::gemm_workspace_bytes(to_cpp(*args));
  });
}

nvfp4_status nvfp4_jit_grouped_gemm(const nvfp4_grouped_gemm_args* args, CUstream stream) {
  return run("nvfp4_jit_grouped_gemm", nvfp4::jit::grouped_gemm, args, stream);
}

int64_t nvfp4_jit_grouped_gemm_workspace_bytes(const nvfp4_grouped_gemm_args* args) {
  return guarded_size("nvfp4_jit_grouped_gemm_workspace_bytes", [&] {
    require(args);
    return nvfp4::jit::grouped_gemm_workspace_bytes(to_cpp(*args));
  });
}

int64_t nvfp4_jit_moe_combine_counter_bytes(const nvfp4_grouped_gemm_args* args) {
  return guarded_size("nvfp4_jit_moe_combine_counter_bytes", [&] {
    require(args);
    return nvfp4::jit::moe_combine_counter_bytes(to_cpp(*args));
  });
}

int64_t nvfp4_jit_moe_route_workspace_bytes(const nvfp4_moe_route_args* args) {
  return guarded_size("nvfp4_jit_moe_route_workspace_bytes", [&] {
    require(args);
    return nvfp4::jit::moe_route_workspace_bytes(to_cpp(*args));
  });
}

nvfp4_status nvfp4_jit_prepack(const nvfp4_prepack_args* args, CUstream stream) {
  return run("nvfp4_jit_prepack", nvfp4::jit::prepack, args, stream);
}

int64_t nvfp4_jit_prepacked_bytes(int64_t n, int64_t k) {
  return guarded_size("nvfp4_jit_prepacked_bytes", [&] { return nvfp4::jit::prepacked_bytes(n, k); });
}

}  // extern "C"

// The C structs' defaults are the C++ structs' defaults, converted field by field.
namespace {

nvfp4_global_scale to_c(const nvfp4::jit::GlobalScale& g) { return {g.value, g.device_ptr, g.per_row ? 1 : 0}; }
nvfp4_dtype to_c(nvfp4::jit::DType d) { return static_cast<nvfp4_dtype>(d); }
nvfp4_scale_layout to_c(nvfp4::jit::ScaleLayout l) { return static_cast<nvfp4_scale_layout>(l); }
nvfp4_global_scale_mode to_c(nvfp4::jit::GlobalScaleMode m) { return static_cast<nvfp4_global_scale_mode>(m); }

nvfp4_tensor to_c(const nvfp4::jit::Nvfp4Tensor& t) {
  return {t.data, t.row_stride_bytes, t.scales, to_c(t.scale_layout), to_c(t.global_scale)};
}

nvfp4_quantized_output to_c(const nvfp4::jit::QuantizedOutput& o) {
  return {o.data, o.row_stride_bytes, o.scales, to_c(o.scale_layout), to_c(o.scale_mode), to_c(o.global_scale),
          o.global_scale_out};
}

nvfp4_gemm_args to_c(const nvfp4::jit::GemmArgs& g) {
  return {g.m, g.n, g.k, g.a, to_c(g.a_dtype), g.a_row_stride, to_c(g.b), g.d, to_c(g.d_dtype), g.d_row_stride, g.bias,
          to_c(g.bias_dtype), g.alpha, to_c(g.a_fp4), g.workspace, g.workspace_bytes, g.b_prepacked, g.weights_static,
          static_cast<nvfp4_gemm_epilogue>(g.epilogue),
          static_cast<nvfp4_gemm_precision>(g.precision), g.b_swiglu_interleave, g.a_rmsnorm_weight,
          g.a_rmsnorm_weight_fp32 ? 1 : 0, g.a_rmsnorm_eps, g.residual, g.residual_row_stride, to_c(g.d_fp4)};
}

}  // namespace

extern "C" {

void nvfp4_dequantize_args_init(nvfp4_dequantize_args* args) {
  if (!args) return;
  const nvfp4::jit::DequantizeArgs d;
  *args = {to_c(d.src), d.src_rows, d.k, d.out, to_c(d.out_dtype), d.out_row_stride, d.row_indices, d.rows};
}

void nvfp4_quantize_args_init(nvfp4_quantize_args* args) {
  if (!args) return;
  const nvfp4::jit::QuantizeArgs d;
  *args = {d.in,     to_c(d.in_dtype), d.in_row_stride,        d.rows,
           d.k,      d.out,            d.out_row_stride_bytes, d.scales,
           to_c(d.scale_layout), to_c(d.scale_mode), to_c(d.global_scale), d.global_scale_out};
}

void nvfp4_rmsnorm_quantize_args_init(nvfp4_rmsnorm_quantize_args* args) {
  if (!args) return;
  const nvfp4::jit::RmsNormQuantizeArgs d;
  *args = {d.in, to_c(d.in_dtype), d.in_row_stride, d.rows, d.k, d.weight, d.eps, to_c(d.out), d.normed,
           d.normed_row_stride, d.inv_rms, d.weight_fp32 ? 1 : 0};
}

void nvfp4_mhc_rmsnorm_quantize_args_init(nvfp4_mhc_rmsnorm_quantize_args* args) {
  if (!args) return;
  const nvfp4::jit::MhcRmsNormQuantizeArgs d;
  *args = {d.in,          to_c(d.in_dtype), d.rows,      d.n_hc,         d.k,
           d.in_row_stride, d.in_hc_stride,  d.mix,       d.mix_row_stride, d.weight,
           d.weight_fp32 ? 1 : 0, d.eps,      to_c(d.out), d.h,            d.h_row_stride,
           d.normed,      d.normed_row_stride, d.inv_rms};
}

void nvfp4_swiglu_quantize_args_init(nvfp4_swiglu_quantize_args* args) {
  if (!args) return;
  const nvfp4::jit::SwigluQuantizeArgs d;
  *args = {d.in, to_c(d.in_dtype), d.in_row_stride, d.rows, d.k, d.interleave, to_c(d.out)};
}

void nvfp4_moe_stage_args_init(nvfp4_moe_stage_args* args) {
  if (!args) return;
  const nvfp4::jit::MoeStageArgs d;
  *args = {d.tokens, to_c(d.in_dtype), d.in_row_stride, d.rows, d.k, to_c(d.out), d.topk, d.topk_ids, d.topk_weights,
           d.topk_ids_out, d.topk_weights_out, static_cast<nvfp4_index_type>(d.topk_ids_type),
           static_cast<nvfp4_index_type>(d.topk_ids_out_type)};
}

void nvfp4_convert_scales_args_init(nvfp4_convert_scales_args* args) {
  if (!args) return;
  const nvfp4::jit::ConvertScalesArgs d;
  *args = {d.src, to_c(d.src_layout), d.dst, to_c(d.dst_layout), d.rows, d.k};
}

void nvfp4_gemm_args_init(nvfp4_gemm_args* args) {
  if (args) *args = to_c(nvfp4::jit::GemmArgs{});
}

void nvfp4_grouped_gemm_args_init(nvfp4_grouped_gemm_args* args) {
  if (!args) return;
  const nvfp4::jit::GroupedGemmArgs d;
  *args = {to_c(d.gemm),   d.groups,    static_cast<nvfp4_grouped_layout>(d.layout), d.group_ends,
           d.masked_m,     d.expected_m, d.a_global_scale_per_group ? 1 : 0,           d.row_index,
           d.a_rows,       d.a_group_stride, d.d_group_stride, {}};
  const nvfp4::jit::MoeCombineEpilogue& c = d.combine;
  args->combine = {c.positions, c.row_token, c.weights, to_c(c.weights_dtype), c.tokens, c.topk,
                   c.out,       to_c(c.out_dtype),       c.out_row_stride, c.counters, c.counters_bytes};
}

void nvfp4_moe_route_args_init(nvfp4_moe_route_args* args) {
  if (!args) return;
  const nvfp4::jit::MoeRouteArgs d;
  *args = {d.topk_ids, static_cast<nvfp4_index_type>(d.topk_ids_type), d.tokens,    d.topk,      d.groups,
           d.first_expert, d.counts,             d.group_ends, d.row_index, d.positions, d.workspace,
           d.workspace_bytes};
}

void nvfp4_moe_combine_args_init(nvfp4_moe_combine_args* args) {
  if (!args) return;
  const nvfp4::jit::MoeCombineArgs d;
  *args = {d.d,      to_c(d.d_dtype), d.d_row_stride, d.d_rows, d.positions,   d.weights, to_c(d.weights_dtype),
           d.tokens, d.topk,          d.n,            d.out,    to_c(d.out_dtype), d.out_row_stride};
}

void nvfp4_prepack_args_init(nvfp4_prepack_args* args) {
  if (!args) return;
  const nvfp4::jit::PrepackArgs d;
  *args = {to_c(d.weight), d.n, d.k, d.out, d.swiglu_interleave};
}

void nvfp4_modelopt_linear_init(nvfp4_modelopt_linear* layer) {
  if (!layer) return;
  const nvfp4::jit::ModelOptLinear d;
  *layer = {d.n, d.k, d.weight, d.weight_scale, to_c(d.weight_scale_2), to_c(d.input_scale)};
}

nvfp4_status nvfp4_jit_load_modelopt(const nvfp4_modelopt_linear* layer, void* prepacked, CUstream stream,
                                     int64_t swiglu_interleave, nvfp4_linear* out) {
  return guarded("nvfp4_jit_load_modelopt", [&] {
    using nvfp4::jit::Error, nvfp4::jit::Status;
    if (!layer) throw Error(Status::invalid_argument, "layer is null");
    if (!out) throw Error(Status::invalid_argument, "out is null");
    const nvfp4::jit::Nvfp4Linear linear = nvfp4::jit::load_modelopt(to_cpp(*layer), prepacked, stream, swiglu_interleave);
    *out = {to_c(linear.weight), to_c(linear.input_scale), linear.prepacked ? 1 : 0};
  });
}

}  // extern "C"

extern "C" {

// nvfp4_jit_ensure_loaded_<op>(const nvfp4_<op>_args*): the call in load-only mode.
#define NVFP4_ENSURE_LOADED(op)                                                      \
  nvfp4_status nvfp4_jit_ensure_loaded_##op(const nvfp4_##op##_args* args) {         \
    return load_only("nvfp4_jit_ensure_loaded_" #op, args);                          \
  }
NVFP4_ENSURE_LOADED(dequantize)
NVFP4_ENSURE_LOADED(quantize)
NVFP4_ENSURE_LOADED(rmsnorm_quantize)
NVFP4_ENSURE_LOADED(mhc_rmsnorm_quantize)
NVFP4_ENSURE_LOADED(swiglu_quantize)
NVFP4_ENSURE_LOADED(moe_stage)
NVFP4_ENSURE_LOADED(convert_scales)
NVFP4_ENSURE_LOADED(gemm)
NVFP4_ENSURE_LOADED(grouped_gemm)
NVFP4_ENSURE_LOADED(prepack)
NVFP4_ENSURE_LOADED(moe_route)
NVFP4_ENSURE_LOADED(moe_combine)
#undef NVFP4_ENSURE_LOADED

void nvfp4_prewarm_args_init(nvfp4_prewarm_args* args) {
  if (!args) return;
  const nvfp4::jit::PrewarmOptions d;
  *args = {nullptr, nullptr, 0, nullptr, d.sm_count, d.threads, nullptr, nullptr, d.tp, d.ep, int32_t(d.load)};
}

nvfp4_status nvfp4_jit_prewarm(const nvfp4_prewarm_args* args, nvfp4_prewarm_result* result) {
  constexpr const char* who = "nvfp4_jit_prewarm";
  nvfp4::jit::PrewarmResult r;
  const nvfp4_status status = guarded(who, [&] {
    require(args);
    nvfp4::jit::PrewarmOptions o;
    if (args->manifest) o.manifest = args->manifest;
    if (args->num_shapes < 0)
      throw nvfp4::jit::Error(nvfp4::jit::Status::invalid_argument, "num_shapes = " + std::to_string(args->num_shapes) + " is negative");
    if (args->num_shapes > 0 && !args->shapes)
      throw nvfp4::jit::Error(nvfp4::jit::Status::invalid_argument, "shapes is null but num_shapes > 0");
    for (int64_t i = 0; i < args->num_shapes; ++i) {
      const int64_t* s = args->shapes + 3 * i;
      if (s[2] < 1 || s[2] > INT32_MAX)
        throw nvfp4::jit::Error(nvfp4::jit::Status::invalid_argument,
                                "shapes[" + std::to_string(i) + "]: groups = " + std::to_string(s[2]) + " is out of range");
      o.shapes.push_back({s[0], s[1], int32_t(s[2])});
    }
    // every name between commas, empty ones too: prewarm refuses them ("" alone is no archs)
    if (std::string_view list = args->archs ? args->archs : ""; !list.empty())
      for (size_t start = 0; start <= list.size();) {
        const size_t comma = std::min(list.find(',', start), list.size());
        o.archs.emplace_back(list.substr(start, comma - start));
        start = comma + 1;
      }
    o.sm_count = args->sm_count;
    o.threads = args->threads;
    if (args->variants) o.variants = args->variants;
    if (args->model) o.model = args->model;
    o.tp = args->tp;
    o.ep = args->ep;
    o.load = args->load != 0;
    r = nvfp4::jit::prewarm(o);
  });
  if (result) *result = {r.kernels, r.compiled, r.cached, r.failed, r.not_stored, r.deferred, r.seconds, r.loaded};
  if (status != NVFP4_OK) return status;
  if (r.failed) {
    set_last_error(who, std::to_string(r.failed) + " of " + std::to_string(r.kernels) + " kernels failed; the first: " +
                            r.errors.front());
    return NVFP4_COMPILE_FAILED;
  }
  if (r.not_stored) {
    set_last_error(who, std::to_string(r.not_stored) + " kernels compiled but not stored in the cache (read-only, full or "
                        "foreign root?)");
    return NVFP4_CACHE_ERROR;
  }
  return NVFP4_OK;
}

nvfp4_status nvfp4_jit_model_shapes(const char* model_dir, int32_t tp, int32_t ep, int64_t* shapes, int64_t capacity,
                                    int64_t* count) {
  return guarded("nvfp4_jit_model_shapes", [&] {
    if (!model_dir) throw nvfp4::jit::Error(nvfp4::jit::Status::invalid_argument, "model_dir is null");
    if (!count) throw nvfp4::jit::Error(nvfp4::jit::Status::invalid_argument, "count is null");
    if (capacity < 0)
      throw nvfp4::jit::Error(nvfp4::jit::Status::invalid_argument, "capacity = " + std::to_string(capacity) + " is negative");
    if (capacity > 0 && !shapes) throw nvfp4::jit::Error(nvfp4::jit::Status::invalid_argument, "shapes is null but capacity > 0");
    const std::vector<nvfp4::jit::ModelShape> all = nvfp4::jit::model_shapes(model_dir, tp, ep);
    *count = int64_t(all.size());
    for (int64_t i = 0; i < std::min(capacity, *count); ++i) {
      shapes[3 * i] = all[i].n;
      shapes[3 * i + 1] = all[i].k;
      shapes[3 * i + 2] = all[i].groups;
    }
  });
}

}  // extern "C"
