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

#include <algorithm>
#include <cstdint>
#include <exception>
#include <cmath>
#include <new>
#include <utility>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "nvfp4/jit.hpp"
#include "torch_tensor.hpp"

namespace {

using namespace nvfp4::jit;

PyObject* g_error = nullptr;          // nvfp4_jit.Error(RuntimeError)
PyObject* g_invalid_argument = nullptr;  // nvfp4_jit.InvalidArgument(Error, ValueError)
PyObject* g_unsupported = nullptr;       // nvfp4_jit.Unsupported(Error, NotImplementedError)
PyObject* g_not_loaded = nullptr;        // nvfp4_jit.NotLoadedInCapture(Error)
PyObject* g_no_device = nullptr;         // nvfp4_jit.NoDevice(Error)

// Raised from a C++ exception: the library's own message, the status as `.status`.
void raise_error(Status status, const char* message) {
  PyObject* type = status == Status::invalid_argument        ? g_invalid_argument
                   : status == Status::unsupported           ? g_unsupported
                   : status == Status::not_loaded_in_capture ? g_not_loaded
                   : status == Status::no_device             ? g_no_device
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
  std::string str() {
    PyObject* o = next();
    if (!o) return {};
    Py_ssize_t size = 0;
    const char* text = PyUnicode_Check(o) ? PyUnicode_AsUTF8AndSize(o, &size) : nullptr;
    if (!text) {
      fail("a str");
      return {};
    }
    return std::string(text, static_cast<size_t>(size));
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
  a.weight_fp32 = r.flag();
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
  a.topk_ids = r.ptr();
  a.topk_weights = r.ptr<const float>();
  a.topk_ids_out = r.ptr();
  a.topk_weights_out = r.ptr<float>();
  a.topk_ids_type = r.enumeration<IndexType>();
  a.topk_ids_out_type = r.enumeration<IndexType>();
}
void read(Reader& r, MhcRmsNormQuantizeArgs& a) {
  a.in = r.ptr();
  a.in_dtype = r.enumeration<DType>();
  a.rows = r.i64();
  a.n_hc = r.i64();
  a.k = r.i64();
  a.in_row_stride = r.i64();
  a.in_hc_stride = r.i64();
  a.mix = r.ptr<const float>();
  a.mix_row_stride = r.i64();
  a.weight = r.ptr();
  a.weight_fp32 = r.flag();
  a.eps = r.f32();
  read(r, a.out);
  a.h = r.ptr();
  a.h_row_stride = r.i64();
  a.normed = r.ptr();
  a.normed_row_stride = r.i64();
  a.inv_rms = r.ptr<float>();
}
void read(Reader& r, MoeRouteArgs& a) {
  a.topk_ids = r.ptr();
  a.topk_ids_type = r.enumeration<IndexType>();
  a.tokens = r.i64();
  a.topk = r.i64();
  a.groups = static_cast<int32_t>(r.i64());
  a.first_expert = r.i64();
  a.counts = r.ptr<int32_t>();
  a.group_ends = r.ptr<int32_t>();
  a.row_index = r.ptr<int32_t>();
  a.positions = r.ptr<int32_t>();
  a.workspace = r.ptr();
  a.workspace_bytes = r.i64();
}
void read(Reader& r, MoeCombineArgs& a) {
  a.d = r.ptr();
  a.d_dtype = r.enumeration<DType>();
  a.d_row_stride = r.i64();
  a.d_rows = r.i64();
  a.positions = r.ptr<const int32_t>();
  a.weights = r.ptr();
  a.weights_dtype = r.enumeration<DType>();
  a.tokens = r.i64();
  a.topk = r.i64();
  a.n = r.i64();
  a.out = r.ptr();
  a.out_dtype = r.enumeration<DType>();
  a.out_row_stride = r.i64();
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
  a.a_global_scale_per_group = r.flag();
  a.row_index = r.ptr<const int32_t>();
  a.a_rows = r.i64();
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
  p.a_scale_layout = r.enumeration<ScaleLayout>();
  p.groups = static_cast<int32_t>(r.i64());
  p.grouped_layout = r.enumeration<GroupedLayout>();
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
// From the checked torch functions a missing kernel in a capture also says what to do in Python.
constexpr std::string_view kCaptureHint =
    " From Python: run the op once before capturing (the usual warm-up pass), or nvfp4_jit.prewarm(...) / "
    "Nvfp4Linear.prewarm(...) for a GEMM.";

template <class F>
bool call_released(F&& body, std::string_view capture_hint = {}) {
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
  if (status == Status::not_loaded_in_capture) message += capture_hint;
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

// A list of str, or null with the Python error set.
PyObject* str_list(const std::vector<std::string>& items) {
  PyObject* list = PyList_New(0);
  for (size_t i = 0; list && i < items.size(); ++i) {
    PyObject* s = PyUnicode_FromStringAndSize(items[i].data(), static_cast<Py_ssize_t>(items[i].size()));
    if (!s || PyList_Append(list, s) < 0) Py_CLEAR(list);
    Py_XDECREF(s);
  }
  return list;
}

// model_shapes(model_dir, tp, ep) -> [(name, n, k, groups)]
PyObject* py_model_shapes(PyObject*, PyObject* const* args, Py_ssize_t n) {
  Reader r("model_shapes", args, n);
  const std::string dir = r.str();
  const int tp = static_cast<int>(r.i64()), ep = static_cast<int>(r.i64());
  if (!r.done()) return nullptr;
  std::vector<ModelShape> shapes;
  if (!call_released([&] { shapes = model_shapes(dir, tp, ep); })) return nullptr;
  PyObject* list = PyList_New(0);
  for (size_t i = 0; list && i < shapes.size(); ++i) {
    const ModelShape& s = shapes[i];
    PyObject* t = Py_BuildValue("(sLLi)", s.name.c_str(), static_cast<long long>(s.n), static_cast<long long>(s.k),
                                static_cast<int>(s.groups));
    if (!t || PyList_Append(list, t) < 0) Py_CLEAR(list);
    Py_XDECREF(t);
  }
  return list;
}

// prewarm(model, tp, ep, shapes: [(n, k, groups)], archs, sm_count, variants, threads, load)
// -> the PrewarmResult's fields as a dict (nvfp4::jit::prewarm; "" for no model / archs / variants)
PyObject* py_prewarm(PyObject*, PyObject* const* args, Py_ssize_t n) {
  if (n != 9 || !PyList_Check(args[3])) {
    PyErr_SetString(PyExc_TypeError, "nvfp4_jit._C.prewarm(model, tp, ep, shapes: list, archs, sm_count, variants, threads, load)");
    return nullptr;
  }
  PrewarmOptions o;
  for (Py_ssize_t i = 0; i < PyList_Size(args[3]); ++i) {
    PrewarmShape s;
    if (!PyArg_ParseTuple(PyList_GetItem(args[3], i), "LLi", &s.n, &s.k, &s.groups)) return nullptr;
    o.shapes.push_back(s);
  }
  PyObject* rest[] = {args[0], args[1], args[2], args[4], args[5], args[6], args[7], args[8]};
  Reader r("prewarm", rest, 8);
  o.model = r.str();
  o.tp = static_cast<int>(r.i64());
  o.ep = static_cast<int>(r.i64());
  const std::string archs = r.str();
  o.sm_count = static_cast<int>(r.i64());
  o.variants = r.str();
  o.threads = static_cast<int>(r.i64());
  o.load = r.flag();
  if (!r.done()) return nullptr;
  // read as int64 above and narrowed: refused when they do not fit the C++ fields' int
  PyObject* ints[] = {args[1], args[2], args[5], args[7]};
  const char* names[] = {"tp", "ep", "sm_count", "threads"};
  for (int i = 0; i < 4; ++i) {
    const long long v = PyLong_AsLongLong(ints[i]);
    if (v < INT32_MIN || v > INT32_MAX) {
      raise_error(Status::invalid_argument, (std::string("nvfp4_jit.prewarm: ") + names[i] + " = " + std::to_string(v) +
                                             " is out of range").c_str());
      return nullptr;
    }
  }
  for (size_t start = 0; start < archs.size();) {
    const size_t comma = std::min(archs.find(',', start), archs.size());
    if (comma > start) o.archs.push_back(archs.substr(start, comma - start));
    start = comma + 1;
  }
  PrewarmResult res;
  if (!call_released([&] { res = prewarm(o); })) return nullptr;
  PyObject* errors = str_list(res.errors);
  PyObject* notes = errors ? str_list(res.notes) : nullptr;
  PyObject* d = notes ? Py_BuildValue("{s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:d,s:O,s:O}", "kernels", static_cast<long long>(res.kernels),
                                      "compiled", static_cast<long long>(res.compiled), "cached",
                                      static_cast<long long>(res.cached), "failed", static_cast<long long>(res.failed),
                                      "not_stored", static_cast<long long>(res.not_stored), "deferred",
                                      static_cast<long long>(res.deferred), "loaded", static_cast<long long>(res.loaded),
                                      "seconds", res.seconds, "errors", errors, "notes", notes)
                      : nullptr;
  Py_XDECREF(errors);
  Py_XDECREF(notes);
  return d;
}

PyObject* py_version(PyObject*, PyObject*) { return PyUnicode_FromString(version()); }

PyObject* py_nvrtc_info(PyObject*, PyObject*) {
  NvrtcInfo n;
  if (!call_released([&] { n = nvrtc_info(); })) return nullptr;
  return Py_BuildValue("{s:s,s:s,s:s,s:s}", "path", n.path.c_str(), "version", n.version.c_str(), "source",
                       n.source.c_str(), "error", n.error.c_str());
}

// ---------------------------------------------------------------------------------------------
// The checked eager fast path of the torch functions (nvfp4_jit.gemm, nvfp4_jit.quantize): the
// tensors are read and checked here, as the Python layer's checks (nvfp4_jit/ops.py) would
// check them, and the op is launched on torch's current stream. Whatever these checks do not
// accept (a wrong argument, or a case the fast path leaves out: a tensor subclass, a CPU-held
// scale, another device current) returns NotImplemented before anything is launched or
// allocated, and the Python layer runs its own checks, which name the wrong argument.

namespace checked {

using nvfp4_py::Tensor;
namespace tt = nvfp4_py;

PyObject* not_here() { Py_RETURN_NOTIMPLEMENTED; }

// _tensor(): a plain CUDA tensor of one of `dts`, `dim` dimensions (any when < 0), on `device`
// (any when < 0), its last dimension contiguous.
bool arg(PyObject* o, Tensor& t, unsigned dts, int dim, long device) {
  return tt::read_tensor(o, t) && (dts & tt::bit(t.dt)) && (dim < 0 || t.ndim == dim) &&
         (device < 0 || t.device == device) && t.last_contiguous();
}

// "linear" / "swizzled128x4" -> the layout; false for anything else.
bool layout_of(PyObject* o, ScaleLayout& layout) {
  if (!PyUnicode_Check(o)) return false;
  if (PyUnicode_CompareWithASCIIString(o, "linear") == 0) layout = ScaleLayout::linear;
  else if (PyUnicode_CompareWithASCIIString(o, "swizzled128x4") == 0) layout = ScaleLayout::swizzled128x4;
  else return false;
  return true;
}

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
    const double v = PyFloat_AsDouble(o);
    if (v == -1.0 && PyErr_Occurred()) {
      PyErr_Clear();
      return false;
    }
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

// gemm_checked(a, b, b_scales, b_global_scale, b_scale_layout, b_prepacked, n, a_scales,
//              a_global_scale, a_scale_layout, bias, alpha, out_dtype, out, workspace,
//              weights_static) -> out (allocated when None) or NotImplemented.
PyObject* gemm_checked(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 16 || !tt::g_torch.bound()) return not_here();
  PyObject *o_a = args[0], *o_b = args[1], *o_bs = args[2], *o_bg = args[3], *o_n = args[6], *o_as = args[7],
           *o_ag = args[8], *o_bias = args[10], *o_out_dtype = args[12], *o_out = args[13], *o_ws = args[14];
  GemmArgs g;
  ScaleLayout a_layout, b_layout;
  Tensor a, b, bs, as, bias, out, ws;
  bool prepacked = false;
  if (!arg(o_a, a, tt::kHalf | tt::kFp4, 2, -1) || !layout_of(args[9], a_layout) || !layout_of(args[4], b_layout) ||
      !flag(args[5], prepacked) || !flag(args[15], g.weights_static))
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
  g.alpha = static_cast<float>(PyFloat_AsDouble(args[11]));
  if (PyErr_Occurred()) {
    PyErr_Clear();
    return not_here();
  }
  int out_dt = (tt::kHalf & tt::bit(a.dt)) ? a.dt : tt::kBf16;
  if (o_out != Py_None) {
    if (!arg(o_out, out, tt::kAct, 2, dev) || !out.has_shape({g.m, g.n})) return not_here();
    out_dt = out.dt;
  } else if (o_out_dtype != Py_None) {
    if ((out_dt = act_dtype(o_out_dtype)) < 0) return not_here();
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
  if (!output(o_out, o_a, {g.m, g.n}, out_dt, owned, out)) return PyErr_Occurred() ? nullptr : not_here();
  g.d = reinterpret_cast<void*>(out.ptr);
  g.d_dtype = static_cast<DType>(out_dt);
  g.d_row_stride = out.stride[0];
  if (w4a4 && o_ws == Py_None) {
    int64_t bytes = 0;
    if (!call_released([&] { bytes = gemm_workspace_bytes(g); })) return nullptr;
    PyObject* w = owned.keep(tt::new_empty(o_a, {bytes}, tt::kU8));
    if (!w || !tt::read_tensor(w, ws)) return PyErr_Occurred() ? nullptr : not_here();
    g.workspace = reinterpret_cast<void*>(ws.ptr);
    g.workspace_bytes = bytes;
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

}  // namespace checked

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
    {"mhc_rmsnorm_quantize", FASTCALL((method<MhcRmsNormQuantizeArgs, mhc_rmsnorm_quantize>)), "mhc_rmsnorm_quantize(fields..., stream)"},
    {"moe_route", FASTCALL((method<MoeRouteArgs, moe_route>)), "moe_route(MoeRouteArgs fields..., stream)"},
    {"moe_combine", FASTCALL((method<MoeCombineArgs, moe_combine>)), "moe_combine(MoeCombineArgs fields..., stream)"},
    {"prepack", FASTCALL((method<PrepackArgs, prepack>)), "prepack(PrepackArgs fields..., stream)"},
    {"cpu_dequantize", FASTCALL((method<DequantizeArgs, cpu::dequantize>)), "CPU reference, host addresses"},
    {"cpu_quantize", FASTCALL((method<QuantizeArgs, cpu::quantize>)), "CPU reference, host addresses"},
    {"cpu_rmsnorm_quantize", FASTCALL((method<RmsNormQuantizeArgs, cpu::rmsnorm_quantize>)), "CPU reference"},
    {"cpu_swiglu_quantize", FASTCALL((method<SwigluQuantizeArgs, cpu::swiglu_quantize>)), "CPU reference"},
    {"cpu_moe_stage", FASTCALL((method<MoeStageArgs, cpu::moe_stage>)), "CPU reference"},
    {"cpu_convert_scales", FASTCALL((method<ConvertScalesArgs, cpu::convert_scales>)), "CPU reference"},
    {"cpu_prepack", FASTCALL((method<PrepackArgs, cpu::prepack>)), "CPU reference"},
    {"cpu_mhc_rmsnorm_quantize", FASTCALL((method<MhcRmsNormQuantizeArgs, cpu::mhc_rmsnorm_quantize>)), "CPU reference"},
    {"cpu_moe_route", FASTCALL((method<MoeRouteArgs, cpu::moe_route>)), "CPU reference"},
    {"cpu_moe_combine", FASTCALL((method<MoeCombineArgs, cpu::moe_combine>)), "CPU reference"},
    {"gemm_workspace_bytes", FASTCALL((method<GemmArgs, gemm_workspace_bytes>)), "gemm_workspace_bytes(GemmArgs fields...)"},
    {"grouped_gemm_workspace_bytes", FASTCALL((method<GroupedGemmArgs, grouped_gemm_workspace_bytes>)),
     "grouped_gemm_workspace_bytes(GroupedGemmArgs fields...)"},
    {"moe_route_workspace_bytes", FASTCALL((method<MoeRouteArgs, moe_route_workspace_bytes>)),
     "moe_route_workspace_bytes(MoeRouteArgs fields...)"},
    {"scale_bytes", FASTCALL((method<ScaleBytesQuery, scale_bytes_of>)), "scale_bytes(layout, rows, k)"},
    {"prepacked_bytes", FASTCALL((method<PrepackedBytesQuery, prepacked_bytes_of>)), "prepacked_bytes(n, k)"},
    {"from_modelopt", FASTCALL(py_from_modelopt), "from_modelopt(ModelOptLinear fields..., layout, swizzled_scales, stream)"},
    {"tune", FASTCALL(py_tune), "tune(GemmProblem fields..., m, runs)"},
    {"model_shapes", FASTCALL(py_model_shapes), "model_shapes(model_dir, tp, ep) -> [(name, n, k, groups)]"},
    {"prewarm", FASTCALL(py_prewarm), "prewarm(model, tp, ep, shapes, archs, sm_count, variants, threads, load) -> dict"},
    {"version", py_version, METH_NOARGS, "the library's version"},
    {"nvrtc_info", py_nvrtc_info, METH_NOARGS, "the NVRTC this process compiles with: {path, version, source, error}"},
    {"bind_torch", FASTCALL(nvfp4_py::bind_torch), "bind_torch(Tensor, dtypes, current_device, current_stream): once, from nvfp4_jit.ops"},
    {"dlpack_dtypes", nvfp4_py::dlpack_dtypes, METH_NOARGS, "the bound dtypes the fast path reads through DLPack"},
    {"gemm_checked", FASTCALL(checked::gemm_checked), "nvfp4_jit.gemm's eager fast path (NotImplemented: not taken)"},
    {"quantize_checked", FASTCALL(checked::quantize_checked), "nvfp4_jit.quantize's eager fast path"},
    {"dequantize_checked", FASTCALL(checked::dequantize_checked), "nvfp4_jit.dequantize's eager fast path"},
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
  g_no_device = add_exception(m, "NoDevice", g_error,
                              "No CUDA driver or no GPU this library can run on (codegen, prewarm and the cache still work).");
  if (!g_invalid_argument || !g_unsupported || !g_not_loaded || !g_no_device) return nullptr;
  return m;
}
