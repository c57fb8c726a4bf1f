// nvfp4_jit._C: the Python binding of the public C++ API (include/nvfp4/jit.hpp).
//
// Written against CPython's stable ABI (Py_LIMITED_API 3.10), so one build imports in every
// CPython from 3.10 on: a wheel built here runs under the GPU machine's 3.12 and under
// future versions, with no binding library to match. It knows nothing of torch: every
// function takes plain integers (device or host addresses read from tensors by the Python
// layer, shapes, strides, enum values) and floats, positionally, through METH_FASTCALL, in
// the order of the C++ structs' fields. The Python layer (nvfp4_jit/_ops.py) reads tensors
// and calls these; a new op is one `read` overload (if it brings a new struct) and one line
// in the method table.
#include <Python.h>

#include <cstdint>
#include <exception>
#include <new>
#include <string>
#include <type_traits>

#include "nvfp4/jit.hpp"

namespace {

using namespace nvfp4::jit;

PyObject* g_error = nullptr;          // nvfp4_jit.Error(RuntimeError)
PyObject* g_invalid_argument = nullptr;  // nvfp4_jit.InvalidArgument(Error, ValueError)
PyObject* g_unsupported = nullptr;       // nvfp4_jit.Unsupported(Error, NotImplementedError)
PyObject* g_not_loaded = nullptr;        // nvfp4_jit.NotLoadedInCapture(Error)

// Raised from a C++ exception: the library's own message, the status as `.status`.
void raise_error(Status status, const char* message) {
  PyObject* type = status == Status::invalid_argument        ? g_invalid_argument
                   : status == Status::unsupported           ? g_unsupported
                   : status == Status::not_loaded_in_capture ? g_not_loaded
                                                             : g_error;
  PyObject* exc = PyObject_CallFunction(type, "s", message);
  if (!exc) return;
  PyObject* code = PyLong_FromLong(static_cast<long>(status));
  if (code) {
    PyObject_SetAttrString(exc, "status", code);
    Py_DECREF(code);
  }
  PyErr_SetObject(type, exc);
  Py_DECREF(exc);
}

// Positional arguments read in order; the first conversion failure is kept and reported
// with the argument's position (and the function's name, where given).
class Reader {
 public:
  Reader(const char* fn, PyObject* const* args, Py_ssize_t n) : fn_(fn), args_(args), n_(n) {}

  int64_t i64() {
    PyObject* o = next();
    if (!o) return 0;
    const long long v = PyLong_AsLongLong(o);
    if (v == -1 && PyErr_Occurred()) fail("an integer");
    return v;
  }
  template <class T = void>
  T* ptr() {
    PyObject* o = next();
    if (!o || o == Py_None) return nullptr;
    void* p = PyLong_AsVoidPtr(o);
    if (!p && PyErr_Occurred()) fail("an address (int)");
    return static_cast<T*>(p);
  }
  float f32() {
    PyObject* o = next();
    if (!o) return 0.0f;
    const double v = PyFloat_AsDouble(o);
    if (v == -1.0 && PyErr_Occurred()) fail("a float");
    return static_cast<float>(v);
  }
  bool flag() {
    PyObject* o = next();
    if (!o) return false;
    const int v = PyObject_IsTrue(o);
    if (v < 0) fail("a bool");
    return v > 0;
  }
  template <class E>
  E enumeration() {
    return static_cast<E>(i64());
  }
  // Everything read, nothing left over, no conversion failed.
  bool done() {
    if (failed_) return false;
    if (i_ != n_) {
      PyErr_Format(PyExc_TypeError, "nvfp4_jit._C%s%s takes %zd arguments, got %zd", fn_ ? "." : "", fn_ ? fn_ : "", i_, n_);
      return false;
    }
    return true;
  }

 private:
  PyObject* next() {
    if (failed_) return nullptr;
    if (i_ >= n_) {
      ++i_;
      return nullptr;
    }
    return args_[i_++];
  }
  void fail(const char* what) {
    failed_ = true;
    PyErr_Clear();
    PyErr_Format(PyExc_TypeError, "nvfp4_jit._C%s%s: argument %zd must be %s", fn_ ? "." : "", fn_ ? fn_ : "", i_ - 1, what);
  }

  const char* fn_;
  PyObject* const* args_;
  Py_ssize_t n_, i_ = 0;
  bool failed_ = false;
};

// One overload per public struct, fields in declaration order.
void read(Reader& r, GlobalScale& g) {
  g.value = r.f32();
  g.device_ptr = r.ptr<const float>();
  g.per_row = r.flag();
}
void read(Reader& r, Nvfp4Tensor& t) {
  t.data = r.ptr();
  t.row_stride_bytes = r.i64();
  t.scales = r.ptr();
  t.scale_layout = r.enumeration<ScaleLayout>();
  read(r, t.global_scale);
}
void read(Reader& r, QuantizedOutput& o) {
  o.data = r.ptr();
  o.row_stride_bytes = r.i64();
  o.scales = r.ptr();
  o.scale_layout = r.enumeration<ScaleLayout>();
  o.scale_mode = r.enumeration<GlobalScaleMode>();
  read(r, o.global_scale);
  o.global_scale_out = r.ptr<float>();
}
void read(Reader& r, DequantizeArgs& a) {
  read(r, a.src);
  a.src_rows = r.i64();
  a.k = r.i64();
  a.out = r.ptr();
  a.out_dtype = r.enumeration<DType>();
  a.out_row_stride = r.i64();
  a.row_indices = r.ptr<const int32_t>();
  a.rows = r.i64();
}
void read(Reader& r, QuantizeArgs& a) {
  a.in = r.ptr();
  a.in_dtype = r.enumeration<DType>();
  a.in_row_stride = r.i64();
  a.rows = r.i64();
  a.k = r.i64();
  a.out = r.ptr();
  a.out_row_stride_bytes = r.i64();
  a.scales = r.ptr();
  a.scale_layout = r.enumeration<ScaleLayout>();
  a.scale_mode = r.enumeration<GlobalScaleMode>();
  read(r, a.global_scale);
  a.global_scale_out = r.ptr<float>();
}
void read(Reader& r, RmsNormQuantizeArgs& a) {
  a.in = r.ptr();
  a.in_dtype = r.enumeration<DType>();
  a.in_row_stride = r.i64();
  a.rows = r.i64();
  a.k = r.i64();
  a.weight = r.ptr();
  a.eps = r.f32();
  read(r, a.out);
  a.normed = r.ptr();
  a.normed_row_stride = r.i64();
  a.inv_rms = r.ptr<float>();
}
void read(Reader& r, SwigluQuantizeArgs& a) {
  a.in = r.ptr();
  a.in_dtype = r.enumeration<DType>();
  a.in_row_stride = r.i64();
  a.rows = r.i64();
  a.k = r.i64();
  a.interleave = r.i64();
  read(r, a.out);
}
void read(Reader& r, MoeStageArgs& a) {
  a.tokens = r.ptr();
  a.in_dtype = r.enumeration<DType>();
  a.in_row_stride = r.i64();
  a.rows = r.i64();
  a.k = r.i64();
  read(r, a.out);
  a.topk = r.i64();
  a.topk_ids = r.ptr<const int32_t>();
  a.topk_weights = r.ptr<const float>();
  a.topk_ids_out = r.ptr<int32_t>();
  a.topk_weights_out = r.ptr<float>();
}
void read(Reader& r, ConvertScalesArgs& a) {
  a.src = r.ptr();
  a.src_layout = r.enumeration<ScaleLayout>();
  a.dst = r.ptr();
  a.dst_layout = r.enumeration<ScaleLayout>();
  a.rows = r.i64();
  a.k = r.i64();
}
void read(Reader& r, PrepackArgs& a) {
  read(r, a.weight);
  a.n = r.i64();
  a.k = r.i64();
  a.out = r.ptr();
}
void read(Reader& r, GemmArgs& a) {
  a.m = r.i64();
  a.n = r.i64();
  a.k = r.i64();
  a.a = r.ptr();
  a.a_dtype = r.enumeration<DType>();
  a.a_row_stride = r.i64();
  read(r, a.b);
  a.d = r.ptr();
  a.d_dtype = r.enumeration<DType>();
  a.d_row_stride = r.i64();
  a.bias = r.ptr();
  a.bias_dtype = r.enumeration<DType>();
  a.alpha = r.f32();
  read(r, a.a_fp4);
  a.workspace = r.ptr();
  a.workspace_bytes = r.i64();
  a.b_prepacked = r.flag();
  a.weights_static = r.flag();
}
void read(Reader& r, GroupedGemmArgs& a) {
  read(r, a.gemm);
  a.groups = static_cast<int32_t>(r.i64());
  a.layout = r.enumeration<GroupedLayout>();
  a.group_ends = r.ptr<const int32_t>();
  a.masked_m = r.ptr<const int32_t>();
  a.expected_m = r.i64();
}
void read(Reader& r, GemmProblem& p) {
  p.n = r.i64();
  p.k = r.i64();
  p.a_dtype = r.enumeration<DType>();
  p.d_dtype = r.enumeration<DType>();
  p.scale_layout = r.enumeration<ScaleLayout>();
  p.has_bias = r.flag();
  p.bias_dtype = r.enumeration<DType>();
  p.b_prepacked = r.flag();
}
void read(Reader& r, TuneOptions& o) {
  o.m = r.i64();
  o.runs = static_cast<int>(r.i64());
}
void read(Reader& r, ModelOptLinear& l) {
  l.n = r.i64();
  l.k = r.i64();
  l.weight = r.ptr();
  l.weight_scale = r.ptr();
  read(r, l.weight_scale_2);
  read(r, l.input_scale);
}

// The size queries' arguments, as structs so bytes_of serves them too.
struct ScaleBytesQuery {
  ScaleLayout layout = ScaleLayout::linear;
  int64_t rows = 0, k = 0;
};
void read(Reader& r, ScaleBytesQuery& q) {
  q.layout = r.enumeration<ScaleLayout>();
  q.rows = r.i64();
  q.k = r.i64();
}
int64_t scale_bytes_of(const ScaleBytesQuery& q) { return scale_bytes(q.layout, q.rows, q.k); }
struct PrepackedBytesQuery {
  int64_t n = 0, k = 0;
};
void read(Reader& r, PrepackedBytesQuery& q) {
  q.n = r.i64();
  q.k = r.i64();
}
int64_t prepacked_bytes_of(const PrepackedBytesQuery& q) { return prepacked_bytes(q.n, q.k); }

// Runs `body` with the GIL released (a first call may compile for seconds), turning the
// library's exceptions into Python ones. Returns false with a Python error set on failure.
template <class F>
bool call_released(F&& body) {
  Status status = Status::ok;
  std::string message;
  PyThreadState* ts = PyEval_SaveThread();
  try {
    body();
  } catch (const Error& e) {
    status = e.status();
    message = e.what();
  } catch (const std::bad_alloc&) {
    status = Status::internal;
    message = "out of host memory";
  } catch (const std::exception& e) {
    status = Status::internal;
    message = e.what();
  }
  PyEval_RestoreThread(ts);
  if (status == Status::ok) return true;
  raise_error(status, message.c_str());
  return false;
}

// One method: reads A's fields (then the stream, for an op that takes one), calls F with the GIL
// released, returns None, or F's byte count for a size query.
template <class A, auto F>
PyObject* method(PyObject*, PyObject* const* args, Py_ssize_t n) {
  Reader r(nullptr, args, n);
  A a;
  read(r, a);
  if constexpr (std::is_invocable_v<decltype(F), const A&, CUstream>) {
    CUstream stream = r.ptr<CUstream_st>();
    if (!r.done() || !call_released([&] { F(a, stream); })) return nullptr;
    Py_RETURN_NONE;
  } else if constexpr (std::is_void_v<std::invoke_result_t<decltype(F), const A&>>) {
    if (!r.done() || !call_released([&] { F(a); })) return nullptr;
    Py_RETURN_NONE;
  } else {
    int64_t bytes = 0;
    if (!r.done() || !call_released([&] { bytes = F(a); })) return nullptr;
    return PyLong_FromLongLong(bytes);
  }
}

// from_modelopt(layer fields..., layout, swizzled_scales, stream) -> (scales address, layout):
// the library's check of a ModelOpt layer, and its scales swizzled once where asked.
PyObject* py_from_modelopt(PyObject*, PyObject* const* args, Py_ssize_t n) {
  Reader r("from_modelopt", args, n);
  ModelOptLinear layer;
  read(r, layer);
  const auto layout = r.enumeration<ScaleLayout>();
  void* swizzled = r.ptr();
  CUstream stream = r.ptr<CUstream_st>();
  if (!r.done()) return nullptr;
  Nvfp4Linear lin;
  if (!call_released([&] { lin = from_modelopt(layer, layout, swizzled, stream); })) return nullptr;
  return Py_BuildValue("(Ki)", static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(lin.weight.scales)),
                       static_cast<int>(lin.weight.scale_layout));
}

// tune(problem fields..., m, runs) -> [dict per M bucket]
PyObject* py_tune(PyObject*, PyObject* const* args, Py_ssize_t n) {
  Reader r("tune", args, n);
  GemmProblem p;
  TuneOptions o;
  read(r, p);
  read(r, o);
  if (!r.done()) return nullptr;
  std::vector<TunedBucket> buckets;
  if (!call_released([&] { buckets = tune(p, o); })) return nullptr;
  PyObject* list = PyList_New(0);
  if (!list) return nullptr;
  for (const TunedBucket& b : buckets) {
    PyObject* d = Py_BuildValue("{s:L,s:s,s:d,s:s,s:d,s:i}", "m_bucket", static_cast<long long>(b.m_bucket), "heuristic",
                                b.heuristic.c_str(), "heuristic_us", b.heuristic_us, "winner", b.winner.c_str(),
                                "winner_us", b.winner_us, "candidates", b.candidates);
    if (!d || PyList_Append(list, d) < 0) {
      Py_XDECREF(d);
      Py_DECREF(list);
      return nullptr;
    }
    Py_DECREF(d);
  }
  return list;
}

PyObject* py_version(PyObject*, PyObject*) { return PyUnicode_FromString(version()); }

#define FASTCALL(f) reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(f)), METH_FASTCALL
PyMethodDef g_methods[] = {
    {"gemm", FASTCALL((method<GemmArgs, gemm>)), "gemm(GemmArgs fields..., stream)"},
    {"grouped_gemm", FASTCALL((method<GroupedGemmArgs, grouped_gemm>)), "grouped_gemm(GroupedGemmArgs fields..., stream)"},
    {"dequantize", FASTCALL((method<DequantizeArgs, dequantize>)), "dequantize(DequantizeArgs fields..., stream)"},
    {"quantize", FASTCALL((method<QuantizeArgs, quantize>)), "quantize(QuantizeArgs fields..., stream)"},
    {"rmsnorm_quantize", FASTCALL((method<RmsNormQuantizeArgs, rmsnorm_quantize>)), "rmsnorm_quantize(fields..., stream)"},
    {"swiglu_quantize", FASTCALL((method<SwigluQuantizeArgs, swiglu_quantize>)), "swiglu_quantize(fields..., stream)"},
    {"moe_stage", FASTCALL((method<MoeStageArgs, moe_stage>)), "moe_stage(MoeStageArgs fields..., stream)"},
    {"convert_scales", FASTCALL((method<ConvertScalesArgs, convert_scales>)), "convert_scales(fields..., stream)"},
    {"prepack", FASTCALL((method<PrepackArgs, prepack>)), "prepack(PrepackArgs fields..., stream)"},
    {"cpu_dequantize", FASTCALL((method<DequantizeArgs, cpu::dequantize>)), "CPU reference, host addresses"},
    {"cpu_quantize", FASTCALL((method<QuantizeArgs, cpu::quantize>)), "CPU reference, host addresses"},
    {"cpu_rmsnorm_quantize", FASTCALL((method<RmsNormQuantizeArgs, cpu::rmsnorm_quantize>)), "CPU reference"},
    {"cpu_swiglu_quantize", FASTCALL((method<SwigluQuantizeArgs, cpu::swiglu_quantize>)), "CPU reference"},
    {"cpu_moe_stage", FASTCALL((method<MoeStageArgs, cpu::moe_stage>)), "CPU reference"},
    {"cpu_convert_scales", FASTCALL((method<ConvertScalesArgs, cpu::convert_scales>)), "CPU reference"},
    {"cpu_prepack", FASTCALL((method<PrepackArgs, cpu::prepack>)), "CPU reference"},
    {"gemm_workspace_bytes", FASTCALL((method<GemmArgs, gemm_workspace_bytes>)), "gemm_workspace_bytes(GemmArgs fields...)"},
    {"grouped_gemm_workspace_bytes", FASTCALL((method<GroupedGemmArgs, grouped_gemm_workspace_bytes>)),
     "grouped_gemm_workspace_bytes(GroupedGemmArgs fields...)"},
    {"scale_bytes", FASTCALL((method<ScaleBytesQuery, scale_bytes_of>)), "scale_bytes(layout, rows, k)"},
    {"prepacked_bytes", FASTCALL((method<PrepackedBytesQuery, prepacked_bytes_of>)), "prepacked_bytes(n, k)"},
    {"from_modelopt", FASTCALL(py_from_modelopt), "from_modelopt(ModelOptLinear fields..., layout, swizzled_scales, stream)"},
    {"tune", FASTCALL(py_tune), "tune(GemmProblem fields..., m, runs)"},
    {"version", py_version, METH_NOARGS, "the library's version"},
    {nullptr, nullptr, 0, nullptr}};
#undef FASTCALL

PyModuleDef g_module = {PyModuleDef_HEAD_INIT, "_C", "nvfp4-jit binding (stable ABI, no torch)", -1, g_methods,
                        nullptr, nullptr, nullptr, nullptr};

// Adds an exception class `name` with `bases` to the module; null on failure.
PyObject* add_exception(PyObject* module, const char* name, PyObject* bases, const char* doc) {
  const std::string qualified = std::string("nvfp4_jit.") + name;
  PyObject* cls = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases, nullptr);
  if (!cls) return nullptr;
  Py_INCREF(cls);
  if (PyModule_AddObject(module, name, cls) < 0) {
    Py_DECREF(cls);
    Py_DECREF(cls);
    return nullptr;
  }
  return cls;
}

}  // namespace

PyMODINIT_FUNC PyInit__C() {
  PyObject* m = PyModule_Create(&g_module);
  if (!m) return nullptr;
  g_error = add_exception(m, "Error", PyExc_RuntimeError, "An nvfp4-jit call failed; .status is the library's status.");
  if (!g_error) return nullptr;
  PyObject* bases = Py_BuildValue("(OO)", g_error, PyExc_ValueError);
  g_invalid_argument = bases ? add_exception(m, "InvalidArgument", bases, "An argument is wrong; the message names it.") : nullptr;
  Py_XDECREF(bases);
  bases = Py_BuildValue("(OO)", g_error, PyExc_NotImplementedError);
  g_unsupported = bases ? add_exception(m, "Unsupported", bases, "The arch, dtype or layout combination is not supported.") : nullptr;
  Py_XDECREF(bases);
  g_not_loaded = add_exception(m, "NotLoadedInCapture", g_error,
                               "A kernel was not loaded before a CUDA graph capture: call the op once before capturing.");
  if (!g_invalid_argument || !g_unsupported || !g_not_loaded) return nullptr;
  return m;
}
