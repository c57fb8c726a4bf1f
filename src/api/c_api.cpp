// The C API: thin wrappers that turn exceptions into status codes and a per-thread message.
#include <exception>
#include <new>
#include <string>

#include "nvfp4/jit.h"
#include "nvfp4/jit.hpp"

namespace {

thread_local std::string last_error;

template <class F>
nvfp4_status guarded(F&& body) {
  try {
    body();
    last_error.clear();
    return NVFP4_OK;
  } catch (const nvfp4::jit::Error& e) {
    last_error = e.what();
    return static_cast<nvfp4_status>(e.status());
  } catch (const std::bad_alloc&) {
    last_error = "out of host memory";
  } catch (const std::exception& e) {
    last_error = e.what();
  } catch (...) {
    last_error = "unknown error";
  }
  return NVFP4_INTERNAL;
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
  return a;
}

void require(const void* args, const char* who) {
  if (!args) throw nvfp4::jit::Error(nvfp4::jit::Status::invalid_argument, std::string(who) + ": args is null");
}

}  // namespace

extern "C" {

const char* nvfp4_jit_version(void) { return nvfp4::jit::version(); }
const char* nvfp4_jit_last_error(void) { return last_error.c_str(); }

nvfp4_status nvfp4_jit_dequantize(const nvfp4_dequantize_args* args, CUstream stream) {
  return guarded([&] {
    if (!args) throw nvfp4::jit::Error(nvfp4::jit::Status::invalid_argument, "nvfp4_jit_dequantize: args is null");
    nvfp4::jit::DequantizeArgs a;
    a.src = to_cpp(args->src);
    a.src_rows = args->src_rows;
    a.k = args->k;
    a.out = args->out;
    a.out_dtype = static_cast<nvfp4::jit::DType>(args->out_dtype);
    a.out_row_stride = args->out_row_stride;
    a.row_indices = args->row_indices;
    a.rows = args->rows;
    nvfp4::jit::dequantize(a, stream);
  });
}

nvfp4_status nvfp4_jit_quantize(const nvfp4_quantize_args* args, CUstream stream) {
  return guarded([&] {
    if (!args) throw nvfp4::jit::Error(nvfp4::jit::Status::invalid_argument, "nvfp4_jit_quantize: args is null");
    nvfp4::jit::QuantizeArgs a;
    a.in = args->in;
    a.in_dtype = static_cast<nvfp4::jit::DType>(args->in_dtype);
    a.in_row_stride = args->in_row_stride;
    a.rows = args->rows;
    a.k = args->k;
    a.out = args->out;
    a.out_row_stride_bytes = args->out_row_stride_bytes;
    a.scales = args->scales;
    a.scale_layout = static_cast<nvfp4::jit::ScaleLayout>(args->scale_layout);
    a.scale_mode = static_cast<nvfp4::jit::GlobalScaleMode>(args->scale_mode);
    a.global_scale = to_cpp(args->global_scale);
    a.global_scale_out = args->global_scale_out;
    nvfp4::jit::quantize(a, stream);
  });
}

nvfp4_status nvfp4_jit_convert_scales(const nvfp4_convert_scales_args* args, CUstream stream) {
  return guarded([&] {
    if (!args) throw nvfp4::jit::Error(nvfp4::jit::Status::invalid_argument, "nvfp4_jit_convert_scales: args is null");
    nvfp4::jit::convert_scales({args->src, static_cast<nvfp4::jit::ScaleLayout>(args->src_layout), args->dst,
                                static_cast<nvfp4::jit::ScaleLayout>(args->dst_layout), args->rows, args->k},
                               stream);
  });
}

int64_t nvfp4_jit_scale_bytes(nvfp4_scale_layout layout, int64_t rows, int64_t k) {
  try {
    return nvfp4::jit::scale_bytes(static_cast<nvfp4::jit::ScaleLayout>(layout), rows, k);
  } catch (const std::exception& e) {
    last_error = e.what();
    return -1;
  }
}

}  // extern "C"

extern "C" nvfp4_status nvfp4_jit_rmsnorm_quantize(const nvfp4_rmsnorm_quantize_args* args, CUstream stream) {
  return guarded([&] {
    require(args, "nvfp4_jit_rmsnorm_quantize");
    nvfp4::jit::RmsNormQuantizeArgs a;
    a.in = args->in;
    a.in_dtype = static_cast<nvfp4::jit::DType>(args->in_dtype);
    a.in_row_stride = args->in_row_stride;
    a.rows = args->rows;
    a.k = args->k;
    a.weight = args->weight;
    a.eps = args->eps;
    a.out = to_cpp(args->out);
    a.normed = args->normed;
    a.normed_row_stride = args->normed_row_stride;
    a.inv_rms = args->inv_rms;
    a.weight_fp32 = args->weight_fp32 != 0;
    nvfp4::jit::rmsnorm_quantize(a, stream);
  });
}

nvfp4_status nvfp4_jit_mhc_rmsnorm_quantize(const nvfp4_mhc_rmsnorm_quantize_args* args, CUstream stream) {
  return guarded([&] {
    require(args, "nvfp4_jit_mhc_rmsnorm_quantize");
    nvfp4::jit::MhcRmsNormQuantizeArgs a;
    a.in = args->in;
    a.in_dtype = static_cast<nvfp4::jit::DType>(args->in_dtype);
    a.rows = args->rows;
    a.n_hc = args->n_hc;
    a.k = args->k;
    a.in_row_stride = args->in_row_stride;
    a.in_hc_stride = args->in_hc_stride;
    a.mix = args->mix;
    a.mix_row_stride = args->mix_row_stride;
    a.weight = args->weight;
    a.weight_fp32 = args->weight_fp32 != 0;
    a.eps = args->eps;
    a.out = to_cpp(args->out);
    a.h = args->h;
    a.h_row_stride = args->h_row_stride;
    a.normed = args->normed;
    a.normed_row_stride = args->normed_row_stride;
    a.inv_rms = args->inv_rms;
    nvfp4::jit::mhc_rmsnorm_quantize(a, stream);
  });
}

nvfp4_status nvfp4_jit_swiglu_quantize(const nvfp4_swiglu_quantize_args* args, CUstream stream) {
  return guarded([&] {
    require(args, "nvfp4_jit_swiglu_quantize");
    nvfp4::jit::SwigluQuantizeArgs a;
    a.in = args->in;
    a.in_dtype = static_cast<nvfp4::jit::DType>(args->in_dtype);
    a.in_row_stride = args->in_row_stride;
    a.rows = args->rows;
    a.k = args->k;
    a.interleave = args->interleave;
    a.out = to_cpp(args->out);
    nvfp4::jit::swiglu_quantize(a, stream);
  });
}

nvfp4_status nvfp4_jit_moe_stage(const nvfp4_moe_stage_args* args, CUstream stream) {
  return guarded([&] {
    require(args, "nvfp4_jit_moe_stage");
    nvfp4::jit::MoeStageArgs a;
    a.tokens = args->tokens;
    a.in_dtype = static_cast<nvfp4::jit::DType>(args->in_dtype);
    a.in_row_stride = args->in_row_stride;
    a.rows = args->rows;
    a.k = args->k;
    a.out = to_cpp(args->out);
    a.topk = args->topk;
    a.topk_ids = args->topk_ids;
    a.topk_weights = args->topk_weights;
    a.topk_ids_out = args->topk_ids_out;
    a.topk_weights_out = args->topk_weights_out;
    a.topk_ids_type = static_cast<nvfp4::jit::IndexType>(args->topk_ids_type);
    a.topk_ids_out_type = static_cast<nvfp4::jit::IndexType>(args->topk_ids_out_type);
    nvfp4::jit::moe_stage(a, stream);
  });
}

nvfp4_status nvfp4_jit_gemm(const nvfp4_gemm_args* args, CUstream stream) {
  return guarded([&] {
    require(args, "nvfp4_jit_gemm");
    nvfp4::jit::gemm(to_cpp(*args), stream);
  });
}

int64_t nvfp4_jit_gemm_workspace_bytes(const nvfp4_gemm_args* args) {
  int64_t bytes = -1;
  guarded([&] {
    require(args, "nvfp4_jit_gemm_workspace_bytes");
    bytes = nvfp4::jit::gemm_workspace_bytes(to_cpp(*args));
  });
  return bytes;
}

nvfp4_status nvfp4_jit_grouped_gemm(const nvfp4_grouped_gemm_args* args, CUstream stream) {
  return guarded([&] {
    require(args, "nvfp4_jit_grouped_gemm");
    nvfp4::jit::grouped_gemm(to_cpp(*args), stream);
  });
}

int64_t nvfp4_jit_grouped_gemm_workspace_bytes(const nvfp4_grouped_gemm_args* args) {
  int64_t bytes = -1;
  guarded([&] {
    require(args, "nvfp4_jit_grouped_gemm_workspace_bytes");
    bytes = nvfp4::jit::grouped_gemm_workspace_bytes(to_cpp(*args));
  });
  return bytes;
}

nvfp4_status nvfp4_jit_prepack(const nvfp4_prepack_args* args, CUstream stream) {
  return guarded([&] {
    require(args, "nvfp4_jit_prepack");
    nvfp4::jit::prepack({to_cpp(args->weight), args->n, args->k, args->out}, stream);
  });
}

int64_t nvfp4_jit_prepacked_bytes(int64_t n, int64_t k) {
  int64_t bytes = -1;
  guarded([&] { bytes = nvfp4::jit::prepacked_bytes(n, k); });
  return bytes;
}
