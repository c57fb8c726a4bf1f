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
// brings a new struct) and one line in g_ops. Beside this file: field_reader.hpp (the Reader),
// binding_errors (the exception classes and call_released, the one way into the library) and
// checked_calls (the torch functions' checked eager fast paths, which take the function's own
// arguments instead of named fields).
#include <Python.h>

#include <algorithm>
#include <cstdint>
#include <utility>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "binding_errors.hpp"
#include "checked_calls.hpp"
#include "field_reader.hpp"
#include "nvfp4/jit.hpp"
#include "torch_tensor.hpp"

namespace {

using namespace nvfp4::jit;
using nvfp4_py::call_released;
using nvfp4_py::raise_error;
using nvfp4_py::Reader;


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
  FIELD(r, a, swiglu_interleave);
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
  FIELD(r, a, epilogue);
  FIELD(r, a, precision);
  FIELD(r, a, a_rmsnorm_weight);
  FIELD(r, a, a_rmsnorm_weight_fp32);
  FIELD(r, a, a_rmsnorm_eps);
  FIELD(r, a, residual);
  FIELD(r, a, residual_row_stride);
  NESTED(r, a, d_fp4);
  FIELD(r, a, b_swiglu_interleave);
}
void read(Reader& r, MoeCombineEpilogue& c) {
  FIELD(r, c, positions);
  FIELD(r, c, row_token);
  FIELD(r, c, weights);
  FIELD(r, c, weights_dtype);
  FIELD(r, c, tokens);
  FIELD(r, c, topk);
  FIELD(r, c, out);
  FIELD(r, c, out_dtype);
  FIELD(r, c, out_row_stride);
  FIELD(r, c, counters);
  FIELD(r, c, counters_bytes);
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
  NESTED(r, a, combine);
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
  FIELD(r, p, epilogue);
  FIELD(r, p, precision);
  FIELD(r, p, a_rmsnorm);
  FIELD(r, p, a_rmsnorm_weight_fp32);
  FIELD(r, p, residual);
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
    {"gemm_checked", FASTCALL(nvfp4_py::checked::gemm_checked), "nvfp4_jit.gemm's eager fast path (NotImplemented: not taken)"},
    {"quantize_checked", FASTCALL(nvfp4_py::checked::quantize_checked), "nvfp4_jit.quantize's eager fast path"},
    {"dequantize_checked", FASTCALL(nvfp4_py::checked::dequantize_checked), "nvfp4_jit.dequantize's eager fast path"},
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

}  // namespace

PyMODINIT_FUNC PyInit__C() {
  PyObject* m = PyModule_Create(&g_module);
  if (!m || !add_ops(m)) return nullptr;
  if (!nvfp4_py::add_exceptions(m)) return nullptr;
  return m;
}
