#include "checked_calls.hpp"

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <utility>

#include "binding_errors.hpp"
#include "nvfp4/jit.hpp"
#include "torch_tensor.hpp"

namespace nvfp4_py::checked {

using namespace nvfp4::jit;
using nvfp4_py::Tensor;
namespace tt = nvfp4_py;

namespace {

PyObject* not_here() { Py_RETURN_NOTIMPLEMENTED; }

// _tensor(): a plain CUDA tensor of one of `dts`, `dim` dimensions (any when < 0), on `device`
// (any when < 0), its last dimension contiguous.
bool arg(PyObject* o, Tensor& t, unsigned dts, int dim, long device) {
  return tt::read_tensor(o, t) && (dts & tt::bit(t.dt)) && (dim < 0 || t.ndim == dim) &&
         (device < 0 || t.device == device) && t.last_contiguous();
}

// `o` names one of `names` (a Python enum table's keys, their values 0, 1, ...): its value;
// false for anything else.
template <class E, size_t N>
bool enum_of(PyObject* o, const char* const (&names)[N], E& value) {
  if (!PyUnicode_Check(o)) return false;
  for (size_t i = 0; i < N; ++i)
    if (PyUnicode_CompareWithASCIIString(o, names[i]) == 0) {
      value = static_cast<E>(i);
      return true;
    }
  return false;
}

// A Python float (or what converts to one); false, the error cleared, for anything else.
bool number(PyObject* o, double& value) {
  value = PyFloat_AsDouble(o);
  if (value == -1.0 && PyErr_Occurred()) {
    PyErr_Clear();
    return false;
  }
  return true;
}
bool number(PyObject* o, float& value) {
  double v = 0;
  if (!number(o, v)) return false;
  value = static_cast<float>(v);
  return true;
}

// "linear" / "swizzled128x4" -> the layout; false for anything else.
bool layout_of(PyObject* o, ScaleLayout& layout) { return enum_of(o, {"linear", "swizzled128x4"}, layout); }

int64_t padded_rows(int64_t rows) { return (rows + 127) / 128 * 128; }
int64_t padded_cols(int64_t k) { return (k / 16 + 3) / 4 * 4; }

// _scales(): E4M3 block scales of [rows, k] on `device`, contiguous: [rows, k/16] when linear,
// the swizzled buffer's size when swizzled.
bool scales(PyObject* o, Tensor& t, int64_t rows, int64_t k, ScaleLayout layout, long device) {
  if (!arg(o, t, tt::kE4m3Bytes, -1, device)) return false;
  if (layout == ScaleLayout::linear) return t.contiguous() && t.has_shape({rows, k / 16});
  return t.contiguous() && t.numel() == padded_rows(rows) * padded_cols(k);
}

// _gscale(): None, a positive finite float, or an fp32 CUDA tensor of 1 or `rows` values.
bool global_scale(PyObject* o, long device, int64_t rows, GlobalScale& g) {
  g = GlobalScale{};
  if (o == Py_None) return true;
  if (PyFloat_Check(o) || (PyLong_Check(o) && !PyBool_Check(o))) {
    double v = 0;
    if (!number(o, v)) return false;
    g.value = static_cast<float>(v);
    return v > 0 && v != HUGE_VAL;
  }
  Tensor t;
  if (!arg(o, t, tt::bit(tt::kFp32), -1, device) || !t.contiguous()) return false;
  const int64_t count = t.numel();
  g.device_ptr = reinterpret_cast<const float*>(t.ptr);
  g.per_row = count > 1;
  return count == 1 || count == rows;
}

// prepacked_bytes(n, k), or -1 where the library rejects n or k (no exception may cross the
// binding's C entry points; the Python layer then reports the argument).
int64_t prepacked_size(int64_t n, int64_t k) noexcept {
  try {
    return prepacked_bytes(n, k);
  } catch (...) {
    return -1;
  }
}

bool flag(PyObject* o, bool& v) {
  const int r = PyObject_IsTrue(o);
  if (r < 0) PyErr_Clear();
  v = r > 0;
  return r >= 0;
}

// Holds new references (allocated outputs) until the call returns.
struct Owned {
  PyObject* refs[4] = {};
  int n = 0;
  PyObject* keep(PyObject* o) { return o ? (refs[n++] = o) : nullptr; }
  PyObject* release(int i) { return std::exchange(refs[i], nullptr); }
  ~Owned() {
    for (PyObject* o : refs) Py_XDECREF(o);
  }
};

// The activation dtype (bf16, fp16, fp32) a torch dtype names, or -1.
int act_dtype(PyObject* dtype) {
  for (int d : {tt::kBf16, tt::kFp16, tt::kFp32})
    if (dtype == tt::g_torch.dtypes[d]) return d;
  return -1;
}

// The op's output: `given` itself, or [rows, cols] of `dt` allocated like `like` and kept by
// `owned`, read into `out`. False with a Python error set, or none (declined).
bool output(PyObject*& given, PyObject* like, std::initializer_list<int64_t> shape, int dt, Owned& owned, Tensor& out) {
  if (given != Py_None) return true;
  given = owned.keep(tt::new_empty(like, shape, static_cast<tt::Dt>(dt)));
  return given && tt::read_tensor(given, out);
}

// What a checked call returns: the caller's `out` (a new reference), else the one allocated.
PyObject* result(PyObject* out, PyObject* given, Owned& owned) {
  if (out != given) return owned.release(0);
  Py_INCREF(out);
  return out;
}

}  // namespace

// gemm_checked(a, b, b_scales, b_global_scale, b_scale_layout, b_prepacked, n, a_scales,
//              a_global_scale, a_scale_layout, bias, alpha, out_dtype, out, workspace,
//              weights_static, epilogue, precision, a_rmsnorm_weight, a_rmsnorm_eps, residual)
// -> out (allocated when None) or NotImplemented.
PyObject* gemm_checked(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 21 || !tt::g_torch.bound()) return not_here();
  PyObject *o_a = args[0], *o_b = args[1], *o_bs = args[2], *o_bg = args[3], *o_n = args[6], *o_as = args[7],
           *o_ag = args[8], *o_bias = args[10], *o_out_dtype = args[12], *o_out = args[13], *o_ws = args[14],
           *o_norm = args[18], *o_residual = args[20];
  GemmArgs g;
  ScaleLayout a_layout, b_layout;
  Tensor a, b, bs, as, bias, out, ws, norm, residual;
  bool prepacked = false;
  if (!arg(o_a, a, tt::kHalf | tt::kFp4, 2, -1) || !layout_of(args[9], a_layout) || !layout_of(args[4], b_layout) ||
      !flag(args[5], prepacked) || !flag(args[15], g.weights_static) ||
      !enum_of(args[16], {"none", "swiglu"}, g.epilogue) || !enum_of(args[17], {"exact", "w4a8"}, g.precision))
    return not_here();
  const long dev = a.device;
  const bool w4a4 = (tt::kFp4 & tt::bit(a.dt)) != 0;
  g.m = a.shape[0];
  if (w4a4) {  // _activations
    g.k = 2 * a.shape[1];
    if (!scales(o_as, as, g.m, g.k, a_layout, dev) || !global_scale(o_ag, dev, g.m, g.a_fp4.global_scale)) return not_here();
    g.a_dtype = DType::nvfp4;
    g.a_fp4.data = reinterpret_cast<const void*>(a.ptr);
    g.a_fp4.row_stride_bytes = a.stride[0];
    g.a_fp4.scales = reinterpret_cast<const void*>(as.ptr);
  } else {
    if (o_as != Py_None || o_ag != Py_None) return not_here();
    g.k = a.shape[1];
    g.a = reinterpret_cast<const void*>(a.ptr);
    g.a_dtype = static_cast<DType>(a.dt);
    g.a_row_stride = a.stride[0];
  }
  g.a_fp4.scale_layout = a_layout;
  if (o_n != Py_None) {  // _weight
    if (!PyLong_Check(o_n)) return not_here();
    g.n = PyLong_AsLongLong(o_n);
    if (g.n == -1 && PyErr_Occurred()) {
      PyErr_Clear();
      return not_here();
    }
  } else if (prepacked) {
    return not_here();
  }
  if (prepacked) {
    if (o_bs != Py_None || !arg(o_b, b, tt::bit(tt::kU8), -1, dev) || !b.contiguous() ||
        b.numel() != prepacked_size(g.n, g.k))
      return not_here();
  } else {
    if (!arg(o_b, b, tt::kFp4, 2, dev)) return not_here();
    if (o_n == Py_None) g.n = b.shape[0];
    if (!b.has_shape({g.n, g.k / 2}) || !scales(o_bs, bs, g.n, g.k, b_layout, dev)) return not_here();
    g.b.row_stride_bytes = b.stride[0];
    g.b.scales = reinterpret_cast<const void*>(bs.ptr);
  }
  g.b.data = reinterpret_cast<const void*>(b.ptr);
  g.b.scale_layout = b_layout;
  g.b_prepacked = prepacked;
  if (!global_scale(o_bg, dev, 1, g.b.global_scale)) return not_here();
  if (o_bias != Py_None) {  // _epilogue
    if (!arg(o_bias, bias, tt::bit(tt::kBf16) | tt::bit(tt::kFp32), 1, dev) || !bias.has_shape({g.n})) return not_here();
    g.bias = reinterpret_cast<const void*>(bias.ptr);
    g.bias_dtype = static_cast<DType>(bias.dt);
  }
  if (!number(args[11], g.alpha) || !number(args[19], g.a_rmsnorm_eps)) return not_here();
  if (o_norm != Py_None) {  // _prologue: [k] in A's 16-bit dtype or fp32
    if (w4a4 || !arg(o_norm, norm, tt::bit(a.dt) | tt::bit(tt::kFp32), 1, dev) || !norm.has_shape({g.k})) return not_here();
    g.a_rmsnorm_weight = reinterpret_cast<const void*>(norm.ptr);
    g.a_rmsnorm_weight_fp32 = norm.dt == tt::kFp32;
  }
  int out_dt = (tt::kHalf & tt::bit(a.dt)) ? a.dt : tt::kBf16;
  const int64_t cols = g.epilogue == GemmEpilogue::swiglu ? g.n / 2 : g.n;  // _out_cols
  if (o_out != Py_None) {
    if (!arg(o_out, out, tt::kAct, 2, dev) || !out.has_shape({g.m, cols})) return not_here();
    out_dt = out.dt;
  } else if (o_out_dtype != Py_None) {
    if ((out_dt = act_dtype(o_out_dtype)) < 0) return not_here();
  }
  if (o_residual != Py_None) {  // _residual: [m, cols] in out's dtype
    if (!arg(o_residual, residual, tt::bit(out_dt), 2, dev) || !residual.has_shape({g.m, cols})) return not_here();
    g.residual = reinterpret_cast<const void*>(residual.ptr);
    g.residual_row_stride = residual.stride[0];
  }
  if (o_ws != Py_None) {
    if (!arg(o_ws, ws, tt::bit(tt::kU8), 1, dev)) return not_here();
    g.workspace = reinterpret_cast<void*>(ws.ptr);
    g.workspace_bytes = ws.shape[0];
  }
  uintptr_t stream = 0;
  if (!tt::current_stream_of(dev, stream)) return not_here();
  // Checked: from here on the outputs are allocated and the op runs.
  Owned owned;
  if (!output(o_out, o_a, {g.m, cols}, out_dt, owned, out)) return PyErr_Occurred() ? nullptr : not_here();
  g.d = reinterpret_cast<void*>(out.ptr);
  g.d_dtype = static_cast<DType>(out_dt);
  g.d_row_stride = out.stride[0];
  if ((w4a4 || g.precision != GemmPrecision::exact) && o_ws == Py_None) {
    int64_t bytes = 0;
    if (!call_released([&] { bytes = gemm_workspace_bytes(g); })) return nullptr;
    if (bytes > 0) {  // none where W4A8 runs the exact mode (small m)
      PyObject* w = owned.keep(tt::new_empty(o_a, {bytes}, tt::kU8));
      if (!w || !tt::read_tensor(w, ws)) return PyErr_Occurred() ? nullptr : not_here();
      g.workspace = reinterpret_cast<void*>(ws.ptr);
      g.workspace_bytes = bytes;
    }
  }
  if (!call_released([&] { gemm(g, reinterpret_cast<CUstream>(stream)); }, kCaptureHint)) return nullptr;
  return result(o_out, args[13], owned);
}

// quantize_checked(x, global_scale, scale_mode, scale_layout, out, out_scales, out_global_scale)
// -> (q, scales, global scale) or NotImplemented.
PyObject* quantize_checked(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 7 || !tt::g_torch.bound()) return not_here();
  PyObject *o_x = args[0], *o_g = args[1], *o_mode = args[2], *o_out = args[4], *o_scales = args[5], *o_gout = args[6];
  QuantizeArgs q;
  Tensor x, out, sc, gout;
  if (!arg(o_x, x, tt::kAct, 2, -1) || !layout_of(args[3], q.scale_layout)) return not_here();
  const long dev = x.device;
  q.rows = x.shape[0];
  q.k = x.shape[1];
  if (o_g != Py_None) {
    q.scale_mode = GlobalScaleMode::given;
  } else if (PyUnicode_Check(o_mode) && PyUnicode_CompareWithASCIIString(o_mode, "per_tensor") == 0) {
    q.scale_mode = GlobalScaleMode::compute_per_tensor;
  } else if (PyUnicode_Check(o_mode) && PyUnicode_CompareWithASCIIString(o_mode, "per_row") == 0) {
    q.scale_mode = GlobalScaleMode::compute_per_row;
  } else {
    return not_here();
  }
  const bool given = q.scale_mode == GlobalScaleMode::given;
  const int64_t g_count = given ? 0 : q.scale_mode == GlobalScaleMode::compute_per_row ? q.rows : 1;
  if (!global_scale(o_g, dev, q.rows, q.global_scale)) return not_here();
  const ScaleLayout layout = q.scale_layout;
  const int64_t s0 = layout == ScaleLayout::linear ? q.rows : padded_rows(q.rows);
  const int64_t s1 = layout == ScaleLayout::linear ? q.k / 16 : padded_cols(q.k);
  if (o_out != Py_None) {  // _qout_check
    if (!arg(o_out, out, tt::kFp4, 2, dev) || !out.has_shape({q.rows, q.k / 2}) ||
        !scales(o_scales, sc, q.rows, q.k, layout, dev))
      return not_here();
    if (!given && (!arg(o_gout, gout, tt::bit(tt::kFp32), 1, dev) || !gout.has_shape({g_count}))) return not_here();
  }
  uintptr_t stream = 0;
  if (!tt::current_stream_of(dev, stream)) return not_here();
  Owned owned;
  if (o_out == Py_None) {  // _qout_alloc
    o_out = owned.keep(tt::new_empty(o_x, {q.rows, q.k / 2}, tt::kU8));
    o_scales = o_out ? owned.keep(tt::new_empty(o_x, {s0, s1}, tt::kE4m3)) : nullptr;
    o_gout = o_scales && !given ? owned.keep(tt::new_empty(o_x, {g_count}, tt::kFp32)) : o_scales ? Py_None : nullptr;
    if (!o_gout) return nullptr;
    if (!tt::read_tensor(o_out, out) || !tt::read_tensor(o_scales, sc) || (!given && !tt::read_tensor(o_gout, gout)))
      return PyErr_Occurred() ? nullptr : not_here();
  }
  q.in = reinterpret_cast<const void*>(x.ptr);
  q.in_dtype = static_cast<DType>(x.dt);
  q.in_row_stride = x.stride[0];
  q.out = reinterpret_cast<void*>(out.ptr);
  q.out_row_stride_bytes = out.stride[0];
  q.scales = reinterpret_cast<void*>(sc.ptr);
  q.global_scale_out = given ? nullptr : reinterpret_cast<float*>(gout.ptr);
  if (!call_released([&] { quantize(q, reinterpret_cast<CUstream>(stream)); }, kCaptureHint)) return nullptr;
  return PyTuple_Pack(3, o_out, o_scales, given ? o_g : o_gout);
}

// dequantize_checked(q, scales, global_scale, k, scale_layout, dtype, row_indices, out)
// -> out (allocated when None) or NotImplemented.
PyObject* dequantize_checked(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 8 || !tt::g_torch.bound()) return not_here();
  PyObject *o_q = args[0], *o_k = args[3], *o_dtype = args[5], *o_idx = args[6], *o_out = args[7];
  DequantizeArgs d;
  Tensor q, sc, idx, out;
  if (!arg(o_q, q, tt::kFp4, 2, -1) || !layout_of(args[4], d.src.scale_layout)) return not_here();
  const long dev = q.device;
  d.src_rows = q.shape[0];
  d.k = 2 * q.shape[1];
  if (o_k != Py_None) {
    if (!PyLong_Check(o_k)) return not_here();
    d.k = PyLong_AsLongLong(o_k);
    if (d.k == -1 && PyErr_Occurred()) {
      PyErr_Clear();
      return not_here();
    }
  }
  if (!scales(args[1], sc, d.src_rows, d.k, d.src.scale_layout, dev) ||
      !global_scale(args[2], dev, d.src_rows, d.src.global_scale))
    return not_here();
  d.rows = d.src_rows;
  if (o_idx != Py_None) {
    if (!arg(o_idx, idx, tt::bit(tt::kI32), 1, dev)) return not_here();
    d.row_indices = reinterpret_cast<const int32_t*>(idx.ptr);
    d.rows = idx.shape[0];
  }
  int out_dt = -1;
  if (o_out != Py_None) {
    if (!arg(o_out, out, tt::kAct, 2, dev) || !out.has_shape({d.rows, d.k})) return not_here();
    out_dt = out.dt;
  } else if ((out_dt = act_dtype(o_dtype)) < 0) {
    return not_here();
  }
  uintptr_t stream = 0;
  if (!tt::current_stream_of(dev, stream)) return not_here();
  Owned owned;
  if (!output(o_out, o_q, {d.rows, d.k}, out_dt, owned, out)) return PyErr_Occurred() ? nullptr : not_here();
  d.src.data = reinterpret_cast<const void*>(q.ptr);
  d.src.row_stride_bytes = q.stride[0];
  d.src.scales = reinterpret_cast<const void*>(sc.ptr);
  d.out = reinterpret_cast<void*>(out.ptr);
  d.out_dtype = static_cast<DType>(out_dt);
  d.out_row_stride = out.stride[0];
  if (!call_released([&] { dequantize(d, reinterpret_cast<CUstream>(stream)); }, kCaptureHint)) return nullptr;
  return result(o_out, args[7], owned);
}

}  // namespace nvfp4_py::checked
