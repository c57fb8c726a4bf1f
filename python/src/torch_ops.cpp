// nvfp4_jit/_torch_ops.so: the CUDA kernels of the hot torch ops (torch.ops.nvfp4_jit.gemm,
// quantize, dequantize and their _out forms) in C++, registered through torch's stable ABI
// (torch/csrc/stable), so one build serves every torch from the version it targets on.
//
// A Python kernel behind the dispatcher costs a boxed round trip into Python on every call
// (several microseconds); these run as C++ behind it. The schemas are defined in
// nvfp4_jit/ops/ (from the Python implementations' annotations) before this library is
// loaded; each function here takes exactly its schema's arguments, in order, and does what
// the Python implementation of the same name does. nvfp4_jit/ops/_registry.py registers its
// Python kernel for every op this library leaves out. The public functions' checks ran before (eagerly, or
// while torch.compile traced); what reaches these unchecked is checked by the library, whose
// errors surface as RuntimeError with its message.
#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>

#include <cstdint>
#include <exception>
#include <optional>
#include <tuple>

#include "nvfp4/jit.hpp"

namespace {

using torch::headeronly::ScalarType;
using torch::stable::Tensor;
using OptTensor = std::optional<Tensor>;
namespace jit = nvfp4::jit;

jit::DType dtype_of(ScalarType t) {
  switch (t) {
    case ScalarType::BFloat16: return jit::DType::bf16;
    case ScalarType::Half: return jit::DType::fp16;
    case ScalarType::Float: return jit::DType::fp32;
    default: return jit::DType::nvfp4;  // packed E2M1 (uint8 or float4_e2m1fn_x2)
  }
}

const void* ptr(const OptTensor& t) { return t ? t->data_ptr() : nullptr; }

// A global scale as the Python layer passes it: a device tensor (1 or `rows` values), else the value.
jit::GlobalScale global_scale(const OptTensor& t, double value) {
  jit::GlobalScale g;
  g.value = static_cast<float>(value);
  if (t) {
    g.device_ptr = static_cast<const float*>(t->data_ptr());
    g.per_row = t->numel() > 1;
  }
  return g;
}

// Runs `body` on torch's current stream of `t`'s device, that device current; the library's
// errors become torch errors (RuntimeError in Python) with its message.
template <class F>
void on_stream(const Tensor& t, F&& body) {
  const int32_t device = t.get_device_index();
  torch::stable::accelerator::DeviceGuard guard(device);
  void* stream = nullptr;
  TORCH_ERROR_CODE_CHECK(aoti_torch_get_current_cuda_stream(device, &stream));
  try {
    body(static_cast<CUstream>(stream));
  } catch (const std::exception& e) {
    STD_TORCH_CHECK(false, e.what());
  }
}

// gemm ------------------------------------------------------------------------------------------

jit::GemmArgs gemm_args(const Tensor& out, const OptTensor& workspace, const Tensor& a, const OptTensor& a_scales,
                        const OptTensor& a_gs, double a_gs_value, int64_t a_layout, const Tensor& b,
                        const OptTensor& b_scales, const OptTensor& b_gs, double b_gs_value, int64_t b_layout,
                        bool b_prepacked, int64_t n, int64_t k, const OptTensor& bias, double alpha,
                        bool weights_static, int64_t epilogue, int64_t precision, const OptTensor& a_rmsnorm_weight,
                        double a_rmsnorm_eps, const OptTensor& residual, int64_t b_swiglu_interleave) {
  jit::GemmArgs g;
  g.m = out.size(0);
  g.n = n;
  g.k = k;
  if (a_scales) {  // W4A4
    g.a_dtype = jit::DType::nvfp4;
    g.a_fp4.data = a.data_ptr();
    g.a_fp4.row_stride_bytes = a.stride(0);
    g.a_fp4.scales = a_scales->data_ptr();
    g.a_fp4.global_scale = global_scale(a_gs, a_gs_value);
  } else {
    g.a = a.data_ptr();
    g.a_dtype = dtype_of(a.scalar_type());
    g.a_row_stride = a.stride(0);
  }
  g.a_fp4.scale_layout = static_cast<jit::ScaleLayout>(a_layout);
  g.b.data = b.data_ptr();
  g.b.row_stride_bytes = b_prepacked ? 0 : b.stride(0);
  g.b.scales = ptr(b_scales);
  g.b.scale_layout = static_cast<jit::ScaleLayout>(b_layout);
  g.b.global_scale = global_scale(b_gs, b_gs_value);
  g.d = out.data_ptr();
  g.d_dtype = dtype_of(out.scalar_type());
  g.d_row_stride = out.stride(0);
  g.bias = ptr(bias);
  if (bias) g.bias_dtype = dtype_of(bias->scalar_type());
  g.alpha = static_cast<float>(alpha);
  g.workspace = workspace ? workspace->data_ptr() : nullptr;
  g.workspace_bytes = workspace ? workspace->numel() : 0;
  g.b_prepacked = b_prepacked;
  g.weights_static = weights_static;
  g.epilogue = static_cast<jit::GemmEpilogue>(epilogue);
  g.precision = static_cast<jit::GemmPrecision>(precision);
  g.a_rmsnorm_weight = ptr(a_rmsnorm_weight);
  g.a_rmsnorm_weight_fp32 = a_rmsnorm_weight && a_rmsnorm_weight->scalar_type() == ScalarType::Float;
  g.a_rmsnorm_eps = static_cast<float>(a_rmsnorm_eps);
  g.residual = ptr(residual);
  g.residual_row_stride = residual ? residual->stride(0) : 0;
  g.b_swiglu_interleave = b_swiglu_interleave;
  return g;
}

// W4A4 or W4A8 without a workspace: one from torch's allocator (as the Python kernels do), not
// the library's stream-ordered allocation.
void run_gemm(jit::GemmArgs g, const Tensor& a) {
  on_stream(a, [&](CUstream stream) {
    std::optional<Tensor> ws;
    if ((g.a_dtype == jit::DType::nvfp4 || g.precision != jit::GemmPrecision::exact) && !g.workspace) {
      const int64_t bytes = jit::gemm_workspace_bytes(g);
      if (bytes > 0) {  // none where W4A8 runs the exact mode or W4A4 one launch (small m)
        ws = torch::stable::new_empty(a, {bytes}, ScalarType::Byte);
        g.workspace = ws->data_ptr();
        g.workspace_bytes = bytes;
      }
    }
    jit::gemm(g, stream);
  });
}

void gemm_out(Tensor out, OptTensor workspace, Tensor a, OptTensor a_scales, OptTensor a_gs, double a_gs_value,
              int64_t a_layout, Tensor b, OptTensor b_scales, OptTensor b_gs, double b_gs_value, int64_t b_layout,
              bool b_prepacked, int64_t n, int64_t k, OptTensor bias, double alpha, bool weights_static,
              int64_t epilogue, int64_t precision, OptTensor a_rmsnorm_weight, double a_rmsnorm_eps, OptTensor residual,
              int64_t b_swiglu_interleave) {
  run_gemm(gemm_args(out, workspace, a, a_scales, a_gs, a_gs_value, a_layout, b, b_scales, b_gs, b_gs_value, b_layout,
                     b_prepacked, n, k, bias, alpha, weights_static, epilogue, precision, a_rmsnorm_weight,
                     a_rmsnorm_eps, residual, b_swiglu_interleave),
           a);
}

Tensor gemm(Tensor a, OptTensor a_scales, OptTensor a_gs, double a_gs_value, int64_t a_layout, Tensor b,
            OptTensor b_scales, OptTensor b_gs, double b_gs_value, int64_t b_layout, bool b_prepacked, int64_t n,
            int64_t k, OptTensor bias, double alpha, ScalarType out_dtype, bool weights_static, int64_t epilogue,
            int64_t precision, OptTensor a_rmsnorm_weight, double a_rmsnorm_eps, OptTensor residual,
            int64_t b_swiglu_interleave) {
  // SwiGLU's D holds I = n/2 columns (silu(gate) * up)
  const int64_t cols = static_cast<jit::GemmEpilogue>(epilogue) == jit::GemmEpilogue::swiglu ? n / 2 : n;
  Tensor out = torch::stable::new_empty(a, {a.size(0), cols}, out_dtype);
  gemm_out(out, std::nullopt, a, a_scales, a_gs, a_gs_value, a_layout, b, b_scales, b_gs, b_gs_value, b_layout,
           b_prepacked, n, k, bias, alpha, weights_static, epilogue, precision, a_rmsnorm_weight, a_rmsnorm_eps, residual,
           b_swiglu_interleave);
  return out;
}

// quantize --------------------------------------------------------------------------------------

constexpr int64_t kModeGiven = static_cast<int64_t>(jit::GlobalScaleMode::given);
constexpr int64_t kModePerRow = static_cast<int64_t>(jit::GlobalScaleMode::compute_per_row);

void quantize_out(Tensor q, Tensor scales, Tensor g_out, Tensor x, OptTensor gs, double gs_value, int64_t layout,
                  int64_t mode) {
  jit::QuantizeArgs args;
  args.in = x.data_ptr();
  args.in_dtype = dtype_of(x.scalar_type());
  args.in_row_stride = x.stride(0);
  args.rows = x.size(0);
  args.k = x.size(1);
  args.out = q.data_ptr();
  args.out_row_stride_bytes = q.stride(0);
  args.scales = scales.data_ptr();
  args.scale_layout = static_cast<jit::ScaleLayout>(layout);
  args.scale_mode = static_cast<jit::GlobalScaleMode>(mode);
  args.global_scale = global_scale(gs, gs_value);
  args.global_scale_out = mode == kModeGiven ? nullptr : static_cast<float*>(g_out.data_ptr());
  on_stream(x, [&](CUstream stream) { jit::quantize(args, stream); });
}

// _qout_alloc's shapes: [rows, k/2] values, the scales (linear, or the padded swizzled buffer),
// the computed global scales (none when given, 1 per tensor, `rows` per row).
std::tuple<Tensor, Tensor, Tensor> quantize(Tensor x, OptTensor gs, double gs_value, int64_t layout, int64_t mode) {
  const int64_t rows = x.size(0), k = x.size(1);
  const bool linear = layout == static_cast<int64_t>(jit::ScaleLayout::linear);
  Tensor q = torch::stable::new_empty(x, {rows, k / 2}, ScalarType::Byte);
  Tensor scales = torch::stable::new_empty(
      x, {linear ? rows : (rows + 127) / 128 * 128, linear ? k / 16 : (k / 16 + 3) / 4 * 4}, ScalarType::Float8_e4m3fn);
  Tensor g_out = torch::stable::new_empty(x, {mode == kModeGiven ? 0 : mode == kModePerRow ? rows : 1}, ScalarType::Float);
  quantize_out(q, scales, g_out, x, gs, gs_value, layout, mode);
  return {q, scales, g_out};
}

// dequantize ------------------------------------------------------------------------------------

void dequantize_out(Tensor out, Tensor q, Tensor scales, OptTensor gs, double gs_value, int64_t k, int64_t layout,
                    OptTensor row_indices) {
  jit::DequantizeArgs args;
  args.src.data = q.data_ptr();
  args.src.row_stride_bytes = q.stride(0);
  args.src.scales = scales.data_ptr();
  args.src.scale_layout = static_cast<jit::ScaleLayout>(layout);
  args.src.global_scale = global_scale(gs, gs_value);
  args.src_rows = q.size(0);
  args.k = k;
  args.out = out.data_ptr();
  args.out_dtype = dtype_of(out.scalar_type());
  args.out_row_stride = out.stride(0);
  args.row_indices = static_cast<const int32_t*>(ptr(row_indices));
  args.rows = row_indices ? out.size(0) : 0;
  on_stream(q, [&](CUstream stream) { jit::dequantize(args, stream); });
}

Tensor dequantize(Tensor q, Tensor scales, OptTensor gs, double gs_value, int64_t k, int64_t layout, ScalarType dtype,
                  OptTensor row_indices) {
  Tensor out = torch::stable::new_empty(q, {row_indices ? row_indices->size(0) : q.size(0), k}, dtype);
  dequantize_out(out, q, scales, gs, gs_value, k, layout, row_indices);
  return out;
}

}  // namespace

STABLE_TORCH_LIBRARY_IMPL(nvfp4_jit, CUDA, m) {
  m.impl("gemm", TORCH_BOX(&gemm));
  m.impl("gemm_out", TORCH_BOX(&gemm_out));
  m.impl("quantize", TORCH_BOX(&quantize));
  m.impl("quantize_out", TORCH_BOX(&quantize_out));
  m.impl("dequantize", TORCH_BOX(&dequantize));
  m.impl("dequantize_out", TORCH_BOX(&dequantize_out));
}
