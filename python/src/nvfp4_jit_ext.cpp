// nvfp4_jit._C: the Python binding of the public C++ API (include/nvfp4/jit.hpp).
//
// Written against CPython's stable ABI (Py_LIMITED_API 3.10), so one build imports in every
// CPython from 3.10 on: a wheel built here runs under the GPU machine's 3.12 and under
// future versions, with no binding library to match. It knows nothing of torch: every op
// takes plain integers (device or host addresses read from tensors by the Python layer,
// shapes, strides, enum values) and floats, positionally, through METH_FASTCALL, in the order
// of the C++ structs' fields. Each field is read under its name (nested structs' as
// "b.global_scale.value"), and _C.fields(method) returns those names in order: the Python
// layer (nvfp4_jit/_core.py's fields(), used by nvfp4_jit/ops/ and nvfp4_jit/cpu.py) builds
// every call from a dict of named fields through that list, so a field added, removed or
// moved here cannot land in the wrong slot there. A new op is one `read` overload (if it
// brings a new struct) and one line in g_ops. The checked eager fast paths (gemm_checked,
// quantize_checked, dequantize_checked) take the torch function's own arguments instead.
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

// A method's positional arguments, read in order, each under its field's name. The first
// conversion failure is kept and reported with the argument's position and name.
// Schema mode (constructed on a list of names) reads nothing and records each field's name
// instead: _C.fields(method), the list the Python layer builds each call's arguments from.
class Reader {
 public:
  Reader(PyObject* const* args, Py_ssize_t n) : args_(args), n_(n) {}
  explicit Reader(std::vector<std::string>& names) : names_(&names) {}

  int64_t i64(const char* name) {
    PyObject* o = next(name);
    if (!o) return 0;
    const long long v = PyLong_AsLongLong(o);
    if (v == -1 && PyErr_Occurred()) fail("an integer");
    return v;
  }
  template <class T = void>
  T* ptr(const char* name) {
    PyObject* o = next(name);
    if (!o || o == Py_None) return nullptr;
    void* p = PyLong_AsVoidPtr(o);
    if (!p && PyErr_Occurred()) fail("an address (int)");
    return static_cast<T*>(p);
  }
  float f32(const char* name) {
    PyObject* o = next(name);
    if (!o) return 0.0f;
    const double v = PyFloat_AsDouble(o);
    if (v == -1.0 && PyErr_Occurred()) fail("a float");
    return static_cast<float>(v);
  }
  bool flag(const char* name) {
    PyObject* o = next(name);
    if (!o) return false;
    const int v = PyObject_IsTrue(o);
    if (v < 0) fail("a bool");
    return v > 0;
  }
  std::string str(const char* name) {
    PyObject* o = next(name);
    if (!o) return {};
    Py_ssize_t size = 0;
    const char* text = PyUnicode_Check(o) ? PyUnicode_AsUTF8AndSize(o, &size) : nullptr;
    if (!text) {
      fail("a str");
      return {};
    }
    return std::string(text, static_cast<size_t>(size));
  }
  // A list, borrowed (null in schema mode or on failure).
  PyObject* list(const char* name) {
    PyObject* o = next(name);
    if (o && !PyList_Check(o)) fail("a list");
    return failed_ ? nullptr : o;
  }
  template <class E>
  E enumeration(const char* name) {
    return static_cast<E>(i64(name));
  }
  // One field, read by its type.
  void field(const char* name, int64_t& v) { v = i64(name); }
  void field(const char* name, int32_t& v) { v = static_cast<int32_t>(i64(name)); }
  void field(const char* name, float& v) { v = f32(name); }
  void field(const char* name, bool& v) { v = flag(name); }
  void field(const char* name, std::string& v) { v = str(name); }
  template <class T>
  void field(const char* name, T*& v) {
    v = ptr<T>(name);
  }
  template <class E>
    requires std::is_enum_v<E>
  void field(const char* name, E& v) {
    v = enumeration<E>(name);
  }
  // The fields `body` reads are named "<name>.<field>": those of the nested struct `name`.
  template <class F>
  void nested(const char* name, F&& body) {
    Scope scope{name, scope_};
    scope_ = &scope;
    body();
    scope_ = scope.outer;
  }
  // Everything read, nothing left over, no conversion failed (false in schema mode: nothing to run).
  bool done() {
    if (names_ || failed_) return false;
    if (i_ != n_) {
      PyErr_Format(PyExc_TypeError, "nvfp4_jit._C: takes %zd arguments, got %zd%s%s%s", i_, n_,
                   missing_.empty() ? "" : " (the first missing: ", missing_.c_str(), missing_.empty() ? "" : ")");
      return false;
    }
    return true;
  }

 private:
  struct Scope {
    const char* name;
    const Scope* outer;
  };

  PyObject* next(const char* name) {
    if (names_) {
      names_->push_back(full_name(name));
      return nullptr;
    }
    if (failed_) return nullptr;
    if (i_ >= n_) {
      if (i_++ == n_) missing_ = full_name(name);
      return nullptr;
    }
    name_ = name;
    return args_[i_++];
  }
  std::string full_name(const char* name) const {
    std::string full = name;
    for (const Scope* s = scope_; s; s = s->outer) full = std::string(s->name) + "." + full;
    return full;
  }
  void fail(const char* what) {
    failed_ = true;
    PyErr_Clear();
    PyErr_Format(PyExc_TypeError, "nvfp4_jit._C: argument %zd (%s) must be %s", i_ - 1, full_name(name_).c_str(), what);
  }

  PyObject* const* args_ = nullptr;
  Py_ssize_t n_ = 0, i_ = 0;
  std::vector<std::string>* names_ = nullptr;
  const Scope* scope_ = nullptr;
  const char* name_ = "";
  std::string missing_;
  bool failed_ = false;
};

// One overload per public struct, fields in declaration order, each read under its member's
// own name (the macros spell it once, so the name cannot drift from the field).
#define FIELD(r, s, member) (r).field(#member, (s).member)
#define NESTED(r, s, member) (r).nested(#member, [&] { read(r, (s).member); })
void read(Reader& r, GlobalScale& g) {
  FIELD(r, g, value);
  FIELD(r, g, device_ptr);
  FIELD(r, g, per_row);
}
void read(Reader& r, Nvfp4Tensor& t) {
  FIELD(r, t, data);
  FIELD(r, t, row_stride_bytes);
  FIELD(r, t, scales);
  FIELD(r, t, scale_layout);
  NESTED(r, t, global_scale);
}
void read(Reader& r, QuantizedOutput& o) {
  FIELD(r, o, data);
  FIELD(r, o, row_stride_bytes);
  FIELD(r, o, scales);
  FIELD(r, o, scale_layout);
  FIELD(r, o, scale_mode);
  NESTED(r, o, global_scale);
  FIELD(r, o, global_scale_out);
}
void read(Reader& r, DequantizeArgs& a) {
  NESTED(r, a, src);
  FIELD(r, a, src_rows);
  FIELD(r, a, k);
  FIELD(r, a, out);
  FIELD(r, a, out_dtype);
  FIELD(r, a, out_row_stride);
  FIELD(r, a, row_indices);
  FIELD(r, a, rows);
}
void read(Reader& r, QuantizeArgs& a) {
  FIELD(r, a, in);
  FIELD(r, a, in_dtype);
  FIELD(r, a, in_row_stride);
  FIELD(r, a, rows);
  FIELD(r, a, k);
  FIELD(r, a, out);
  FIELD(r, a, out_row_stride_bytes);
  FIELD(r, a, scales);
  FIELD(r, a, scale_layout);
  FIELD(r, a, scale_mode);
  NESTED(r, a, global_scale);
  FIELD(r, a, global_scale_out);
}
void read(Reader& r, RmsNormQuantizeArgs& a) {
  FIELD(r, a, in);
  FIELD(r, a, in_dtype);
  FIELD(r, a, in_row_stride);
  FIELD(r, a, rows);
  FIELD(r, a, k);
  FIELD(r, a, weight);
  FIELD(r, a, weight_fp32);
  FIELD(r, a, eps);
  NESTED(r, a, out);
  FIELD(r, a, normed);
  FIELD(r, a, normed_row_stride);
  FIELD(r, a, inv_rms);
}
void read(Reader& r, SwigluQuantizeArgs& a) {
  FIELD(r, a, in);
  FIELD(r, a, in_dtype);
  FIELD(r, a, in_row_stride);
  FIELD(r, a, rows);
  FIELD(r, a, k);
  FIELD(r, a, interleave);
  NESTED(r, a, out);
}
void read(Reader& r, MoeStageArgs& a) {
  FIELD(r, a, tokens);
  FIELD(r, a, in_dtype);
  FIELD(r, a, in_row_stride);
  FIELD(r, a, rows);
  FIELD(r, a, k);
  NESTED(r, a, out);
  FIELD(r, a, topk);
  FIELD(r, a, topk_ids);
  FIELD(r, a, topk_weights);
  FIELD(r, a, topk_ids_out);
  FIELD(r, a, topk_weights_out);
  FIELD(r, a, topk_ids_type);
  FIELD(r, a, topk_ids_out_type);
}
void read(Reader& r, MhcRmsNormQuantizeArgs& a) {
  FIELD(r, a, in);
  FIELD(r, a, in_dtype);
  FIELD(r, a, rows);
  FIELD(r, a, n_hc);
  FIELD(r, a, k);
  FIELD(r, a, in_row_stride);
  FIELD(r, a, in_hc_stride);
  FIELD(r, a, mix);
  FIELD(r, a, mix_row_stride);
  FIELD(r, a, weight);
  FIELD(r, a, weight_fp32);
  FIELD(r, a, eps);
  NESTED(r, a, out);
  FIELD(r, a, h);
  FIELD(r, a, h_row_stride);
  FIELD(r, a, normed);
  FIELD(r, a, normed_row_stride);
  FIELD(r, a, inv_rms);
}
void read(Reader& r, MoeRouteArgs& a) {
  FIELD(r, a, topk_ids);
  FIELD(r, a, topk_ids_type);
  FIELD(r, a, tokens);
  FIELD(r, a, topk);
  FIELD(r, a, groups);
  FIELD(r, a, first_expert);
  FIELD(r, a, counts);
  FIELD(r, a, group_ends);
  FIELD(r, a, row_index);
  FIELD(r, a, positions);
  FIELD(r, a, workspace);
  FIELD(r, a, workspace_bytes);
}
void read(Reader& r, MoeCombineArgs& a) {
  FIELD(r, a, d);
  FIELD(r, a, d_dtype);
  FIELD(r, a, d_row_stride);
  FIELD(r, a, d_rows);
  FIELD(r, a, positions);
  FIELD(r, a, weights);
  FIELD(r, a, weights_dtype);
  FIELD(r, a, tokens);
  FIELD(r, a, topk);
  FIELD(r, a, n);
  FIELD(r, a, out);
  FIELD(r, a, out_dtype);
  FIELD(r, a, out_row_stride);
}
void read(Reader& r, ConvertScalesArgs& a) {
  FIELD(r, a, src);
  FIELD(r, a, src_layout);
  FIELD(r, a, dst);
  FIELD(r, a, dst_layout);
  FIELD(r, a, rows);
  FIELD(r, a, k);
}
void read(Reader& r, PrepackArgs& a) {
  NESTED(r, a, weight);
  FIELD(r, a, n);
  FIELD(r, a, k);
  FIELD(r, a, out);
}
void read(Reader& r, GemmArgs& a) {
  FIELD(r, a, m);
  FIELD(r, a, n);
  FIELD(r, a, k);
  FIELD(r, a, a);
  FIELD(r, a, a_dtype);
  FIELD(r, a, a_row_stride);
  NESTED(r, a, b);
  FIELD(r, a, d);
  FIELD(r, a, d_dtype);
  FIELD(r, a, d_row_stride);
  FIELD(r, a, bias);
  FIELD(r, a, bias_dtype);
  FIELD(r, a, alpha);
  NESTED(r, a, a_fp4);
  FIELD(r, a, workspace);
  FIELD(r, a, workspace_bytes);
  FIELD(r, a, b_prepacked);
  FIELD(r, a, weights_static);
}
void read(Reader& r, GroupedGemmArgs& a) {
  // The dense GEMM's fields under their own names (GroupedGemmArgs' own repeat none of them):
  // the Python layer builds them once for gemm and grouped_gemm.
  read(r, a.gemm);
  FIELD(r, a, groups);
  FIELD(r, a, layout);
  FIELD(r, a, group_ends);
  FIELD(r, a, masked_m);
  FIELD(r, a, expected_m);
  FIELD(r, a, a_global_scale_per_group);
  FIELD(r, a, row_index);
  FIELD(r, a, a_rows);
}
void read(Reader& r, GemmProblem& p) {
  FIELD(r, p, n);
  FIELD(r, p, k);
  FIELD(r, p, a_dtype);
  FIELD(r, p, d_dtype);
  FIELD(r, p, scale_layout);
  FIELD(r, p, has_bias);
  FIELD(r, p, bias_dtype);
  FIELD(r, p, b_prepacked);
  FIELD(r, p, a_scale_layout);
  FIELD(r, p, groups);
  FIELD(r, p, grouped_layout);
}
void read(Reader& r, TuneOptions& o) {
  FIELD(r, o, m);
  FIELD(r, o, runs);
}
void read(Reader& r, ModelOptLinear& l) {
  FIELD(r, l, n);
  FIELD(r, l, k);
  FIELD(r, l, weight);
  FIELD(r, l, weight_scale);
  NESTED(r, l, weight_scale_2);
  NESTED(r, l, input_scale);
}

// The arguments of the methods that are no single public struct, as structs read like those.
struct ScaleBytesQuery {
  ScaleLayout layout = ScaleLayout::linear;
  int64_t rows = 0, k = 0;
};
void read(Reader& r, ScaleBytesQuery& q) {
  FIELD(r, q, layout);
  FIELD(r, q, rows);
  FIELD(r, q, k);
}
int64_t scale_bytes_of(const ScaleBytesQuery& q) { return scale_bytes(q.layout, q.rows, q.k); }
struct PrepackedBytesQuery {
  int64_t n = 0, k = 0;
};
void read(Reader& r, PrepackedBytesQuery& q) {
  FIELD(r, q, n);
  FIELD(r, q, k);
}
int64_t prepacked_bytes_of(const PrepackedBytesQuery& q) { return prepacked_bytes(q.n, q.k); }

struct FromModeloptCall {  // from_modelopt(layer, layout, swizzled_scales, stream)
  ModelOptLinear layer;
  ScaleLayout layout = ScaleLayout::linear;
  void* swizzled_scales = nullptr;
};
void read(Reader& r, FromModeloptCall& c) {
  read(r, c.layer);
  FIELD(r, c, layout);
  FIELD(r, c, swizzled_scales);
}
Nvfp4Linear from_modelopt_of(const FromModeloptCall& c, CUstream stream) {
  return from_modelopt(c.layer, c.layout, c.swizzled_scales, stream);
}
struct TuneCall {  // tune(problem, options)
  GemmProblem problem;
  TuneOptions options;
};
void read(Reader& r, TuneCall& c) {
  read(r, c.problem);
  read(r, c.options);
}
std::vector<TunedBucket> tune_of(const TuneCall& c) { return tune(c.problem, c.options); }
struct ModelShapesCall {  // model_shapes(model_dir, tp, ep)
  std::string model_dir;
  int tp = 1, ep = 1;
};
void read(Reader& r, ModelShapesCall& c) {
  FIELD(r, c, model_dir);
  FIELD(r, c, tp);
  FIELD(r, c, ep);
}
std::vector<ModelShape> model_shapes_of(const ModelShapesCall& c) { return model_shapes(c.model_dir, c.tp, c.ep); }
// prewarm(model, tp, ep, shapes: [(n, k, groups)], archs, sm_count, variants, threads, load):
// PrewarmOptions but for its shapes (a list, read by py_prewarm) and archs (comma-separated).
struct PrewarmCall {
  std::string model, archs, variants;
  int64_t tp = 1, ep = 1, sm_count = 0, threads = 0;
  PyObject* shapes = nullptr;  // borrowed
  bool load = false;
};
void read(Reader& r, PrewarmCall& c) {
  FIELD(r, c, model);
  FIELD(r, c, tp);
  FIELD(r, c, ep);
  c.shapes = r.list("shapes");
  FIELD(r, c, archs);
  FIELD(r, c, sm_count);
  FIELD(r, c, variants);
  FIELD(r, c, threads);
  FIELD(r, c, load);
}
#undef NESTED
#undef FIELD

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

// A list of one Python object per item, or null with the Python error set.
template <class T, class F>
PyObject* list_of(const std::vector<T>& items, F&& convert) {
  PyObject* list = PyList_New(0);
  for (size_t i = 0; list && i < items.size(); ++i) {
    PyObject* o = convert(items[i]);
    if (!o || PyList_Append(list, o) < 0) Py_CLEAR(list);
    Py_XDECREF(o);
  }
  return list;
}

// The methods' results in Python.
PyObject* to_python(int64_t bytes) { return PyLong_FromLongLong(bytes); }
// from_modelopt -> (scales address, layout)
PyObject* to_python(const Nvfp4Linear& lin) {
  return Py_BuildValue("(Ki)", static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(lin.weight.scales)),
                       static_cast<int>(lin.weight.scale_layout));
}
// tune -> [dict per M bucket]
PyObject* to_python(const std::vector<TunedBucket>& buckets) {
  return list_of(buckets, [](const TunedBucket& b) {
    return Py_BuildValue("{s:L,s:s,s:d,s:s,s:d,s:i}", "m_bucket", static_cast<long long>(b.m_bucket), "heuristic",
                         b.heuristic.c_str(), "heuristic_us", b.heuristic_us, "winner", b.winner.c_str(), "winner_us",
                         b.winner_us, "candidates", b.candidates);
  });
}
// model_shapes -> [(name, n, k, groups)]
PyObject* to_python(const std::vector<ModelShape>& shapes) {
  return list_of(shapes, [](const ModelShape& s) {
    return Py_BuildValue("(sLLi)", s.name.c_str(), static_cast<long long>(s.n), static_cast<long long>(s.k),
                         static_cast<int>(s.groups));
  });
}
// prewarm -> the PrewarmResult's fields as a dict
PyObject* to_python(const PrewarmResult& res) {
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

template <class A, auto F>
constexpr bool kTakesStream = std::is_invocable_v<decltype(F), const A&, CUstream>;

// A method's arguments: A's fields, then the stream for an op that takes one.
template <class A, auto F>
void read_args(Reader& r, A& a, CUstream& stream) {
  read(r, a);
  if constexpr (kTakesStream<A, F>) stream = r.ptr<CUstream_st>("stream");
}

// One method: reads its arguments, calls F with the GIL released, returns None or F's result.
template <class A, auto F>
PyObject* method(PyObject*, PyObject* const* args, Py_ssize_t n) {
  Reader r(args, n);
  A a;
  CUstream stream = nullptr;
  read_args<A, F>(r, a, stream);
  if (!r.done()) return nullptr;
  auto call = [&] {
    if constexpr (kTakesStream<A, F>) return F(a, stream);
    else return F(a);
  };
  if constexpr (std::is_void_v<decltype(call())>) {
    if (!call_released(call)) return nullptr;
    Py_RETURN_NONE;
  } else {
    decltype(call()) result{};
    if (!call_released([&] { result = call(); })) return nullptr;
    return to_python(result);
  }
}

// The names of method<A, F>'s arguments (or of a hand-written method that reads an A), in order.
template <class A, auto F = nullptr>
void fields_of(Reader& r) {
  A a;
  CUstream stream = nullptr;
  if constexpr (F == nullptr) read(r, a);
  else read_args<A, F>(r, a, stream);
}

PyObject* py_prewarm(PyObject*, PyObject* const* args, Py_ssize_t n) {
  Reader r(args, n);
  PrewarmCall c;
  read(r, c);
  if (!r.done()) return nullptr;
  PrewarmOptions o;
  for (Py_ssize_t i = 0; i < PyList_Size(c.shapes); ++i) {
    PrewarmShape s;
    if (!PyArg_ParseTuple(PyList_GetItem(c.shapes, i), "LLi", &s.n, &s.k, &s.groups)) return nullptr;
    o.shapes.push_back(s);
  }
  // read as int64 and narrowed: refused when they do not fit the C++ fields' int
  const std::pair<const char*, int64_t> ints[] = {{"tp", c.tp}, {"ep", c.ep}, {"sm_count", c.sm_count}, {"threads", c.threads}};
  for (const auto& [name, v] : ints) {
    if (v < INT32_MIN || v > INT32_MAX) {
      raise_error(Status::invalid_argument,
                  (std::string("nvfp4_jit.prewarm: ") + name + " = " + std::to_string(v) + " is out of range").c_str());
      return nullptr;
    }
  }
  o.model = c.model;
  o.tp = static_cast<int>(c.tp);
  o.ep = static_cast<int>(c.ep);
  o.sm_count = static_cast<int>(c.sm_count);
  o.variants = c.variants;
  o.threads = static_cast<int>(c.threads);
  o.load = c.load;
  for (size_t start = 0; start < c.archs.size();) {
    const size_t comma = std::min(c.archs.find(',', start), c.archs.size());
    if (comma > start) o.archs.push_back(c.archs.substr(start, comma - start));
    start = comma + 1;
  }
  PrewarmResult res;
  if (!call_released([&] { res = prewarm(o); })) return nullptr;
  return to_python(res);
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
// tensors are read and checked here, as the Python layer's checks (nvfp4_jit/ops/) would
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

// The methods that read their arguments through a Reader: each call's arguments in the order
// and under the names its `fields` records, which _C.fields(name) returns.
struct Op {
  const char* name;
  PyObject* (*call)(PyObject*, PyObject* const*, Py_ssize_t);
  void (*fields)(Reader&);
  const char* doc;
};
template <class A, auto F>
constexpr Op op(const char* name, const char* doc) {
  return {name, method<A, F>, fields_of<A, F>, doc};
}
const Op g_ops[] = {
    op<GemmArgs, gemm>("gemm", "gemm(GemmArgs fields..., stream)"),
    op<GroupedGemmArgs, grouped_gemm>("grouped_gemm", "grouped_gemm(GroupedGemmArgs fields..., stream)"),
    op<DequantizeArgs, dequantize>("dequantize", "dequantize(DequantizeArgs fields..., stream)"),
    op<QuantizeArgs, quantize>("quantize", "quantize(QuantizeArgs fields..., stream)"),
    op<RmsNormQuantizeArgs, rmsnorm_quantize>("rmsnorm_quantize", "rmsnorm_quantize(fields..., stream)"),
    op<SwigluQuantizeArgs, swiglu_quantize>("swiglu_quantize", "swiglu_quantize(fields..., stream)"),
    op<MoeStageArgs, moe_stage>("moe_stage", "moe_stage(MoeStageArgs fields..., stream)"),
    op<ConvertScalesArgs, convert_scales>("convert_scales", "convert_scales(fields..., stream)"),
    op<MhcRmsNormQuantizeArgs, mhc_rmsnorm_quantize>("mhc_rmsnorm_quantize", "mhc_rmsnorm_quantize(fields..., stream)"),
    op<MoeRouteArgs, moe_route>("moe_route", "moe_route(MoeRouteArgs fields..., stream)"),
    op<MoeCombineArgs, moe_combine>("moe_combine", "moe_combine(MoeCombineArgs fields..., stream)"),
    op<PrepackArgs, prepack>("prepack", "prepack(PrepackArgs fields..., stream)"),
    op<DequantizeArgs, cpu::dequantize>("cpu_dequantize", "CPU reference, host addresses"),
    op<QuantizeArgs, cpu::quantize>("cpu_quantize", "CPU reference, host addresses"),
    op<RmsNormQuantizeArgs, cpu::rmsnorm_quantize>("cpu_rmsnorm_quantize", "CPU reference"),
    op<SwigluQuantizeArgs, cpu::swiglu_quantize>("cpu_swiglu_quantize", "CPU reference"),
    op<MoeStageArgs, cpu::moe_stage>("cpu_moe_stage", "CPU reference"),
    op<ConvertScalesArgs, cpu::convert_scales>("cpu_convert_scales", "CPU reference"),
    op<PrepackArgs, cpu::prepack>("cpu_prepack", "CPU reference"),
    op<MhcRmsNormQuantizeArgs, cpu::mhc_rmsnorm_quantize>("cpu_mhc_rmsnorm_quantize", "CPU reference"),
    op<MoeRouteArgs, cpu::moe_route>("cpu_moe_route", "CPU reference"),
    op<MoeCombineArgs, cpu::moe_combine>("cpu_moe_combine", "CPU reference"),
    op<GemmArgs, gemm_workspace_bytes>("gemm_workspace_bytes", "gemm_workspace_bytes(GemmArgs fields...)"),
    op<GroupedGemmArgs, grouped_gemm_workspace_bytes>("grouped_gemm_workspace_bytes",
                                                      "grouped_gemm_workspace_bytes(GroupedGemmArgs fields...)"),
    op<MoeRouteArgs, moe_route_workspace_bytes>("moe_route_workspace_bytes", "moe_route_workspace_bytes(MoeRouteArgs fields...)"),
    op<ScaleBytesQuery, scale_bytes_of>("scale_bytes", "scale_bytes(layout, rows, k)"),
    op<PrepackedBytesQuery, prepacked_bytes_of>("prepacked_bytes", "prepacked_bytes(n, k)"),
    op<FromModeloptCall, from_modelopt_of>("from_modelopt",
                                           "from_modelopt(ModelOptLinear fields..., layout, swizzled_scales, stream) -> "
                                           "(scales address, layout)"),
    op<TuneCall, tune_of>("tune", "tune(GemmProblem fields..., m, runs) -> [dict per M bucket]"),
    op<ModelShapesCall, model_shapes_of>("model_shapes", "model_shapes(model_dir, tp, ep) -> [(name, n, k, groups)]"),
    {"prewarm", py_prewarm, fields_of<PrewarmCall>,
     "prewarm(model, tp, ep, shapes, archs, sm_count, variants, threads, load) -> dict"},
};

// fields() -> the names of the methods above; fields(name) -> that method's argument names, in order.
PyObject* py_fields(PyObject*, PyObject* const* args, Py_ssize_t n) {
  if (n == 0) {
    PyObject* names = PyTuple_New(static_cast<Py_ssize_t>(std::size(g_ops)));
    for (Py_ssize_t i = 0; names && i < PyTuple_Size(names); ++i) {
      PyObject* name = PyUnicode_FromString(g_ops[i].name);
      if (!name) Py_CLEAR(names);
      else PyTuple_SetItem(names, i, name);
    }
    return names;
  }
  const char* wanted = n == 1 && PyUnicode_Check(args[0]) ? PyUnicode_AsUTF8AndSize(args[0], nullptr) : nullptr;
  if (!wanted) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "nvfp4_jit._C.fields(method: str)");
    return nullptr;
  }
  for (const Op& o : g_ops) {
    if (std::string_view(o.name) != wanted) continue;
    std::vector<std::string> names;
    Reader schema(names);
    o.fields(schema);
    for (size_t i = 0; i < names.size(); ++i) {
      if (std::find(names.begin(), names.begin() + static_cast<std::ptrdiff_t>(i), names[i]) != names.begin() + static_cast<std::ptrdiff_t>(i)) {
        PyErr_Format(PyExc_RuntimeError, "nvfp4_jit._C.fields: %s names the field %s twice", o.name, names[i].c_str());
        return nullptr;
      }
    }
    PyObject* list = list_of(names, [](const std::string& s) { return PyUnicode_FromString(s.c_str()); });
    PyObject* tuple = list ? PyList_AsTuple(list) : nullptr;
    Py_XDECREF(list);
    return tuple;
  }
  PyErr_Format(PyExc_KeyError, "nvfp4_jit._C.fields: no method %s reads named fields", wanted);
  return nullptr;
}

#define FASTCALL(f) reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(f)), METH_FASTCALL
PyMethodDef g_methods[] = {
    {"fields", FASTCALL(py_fields), "fields() -> the methods that take named fields; fields(method) -> its argument names"},
    {"version", py_version, METH_NOARGS, "the library's version"},
    {"nvrtc_info", py_nvrtc_info, METH_NOARGS, "the NVRTC this process compiles with: {path, version, source, error}"},
    {"bind_torch", FASTCALL(nvfp4_py::bind_torch), "bind_torch(Tensor, dtypes, current_device, current_stream): once, from nvfp4_jit.ops"},
    {"dlpack_dtypes", nvfp4_py::dlpack_dtypes, METH_NOARGS, "the bound dtypes the fast path reads through DLPack"},
    {"gemm_checked", FASTCALL(checked::gemm_checked), "nvfp4_jit.gemm's eager fast path (NotImplemented: not taken)"},
    {"quantize_checked", FASTCALL(checked::quantize_checked), "nvfp4_jit.quantize's eager fast path"},
    {"dequantize_checked", FASTCALL(checked::dequantize_checked), "nvfp4_jit.dequantize's eager fast path"},
    {nullptr, nullptr, 0, nullptr}};

// g_ops as method definitions, filled at import (they must outlive the module).
PyMethodDef g_op_methods[std::size(g_ops) + 1] = {};

bool add_ops(PyObject* module) {
  for (size_t i = 0; i < std::size(g_ops); ++i)
    g_op_methods[i] = {g_ops[i].name, FASTCALL(g_ops[i].call), g_ops[i].doc};
  return PyModule_AddFunctions(module, g_op_methods) == 0;
}
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
  if (!m || !add_ops(m)) return nullptr;
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
