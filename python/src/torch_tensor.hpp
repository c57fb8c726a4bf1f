// Torch tensors read through the CPython API (stable ABI, no libtorch), for the checked eager
// fast path of the binding.
//
// The Python layer hands torch's objects over once (bind_torch): the Tensor type, the dtypes,
// the functions giving the current device and its current stream, and optionally
// torch.utils.dlpack.to_dlpack with one small CPU tensor per dtype. A tensor is then read with
// one to_dlpack call (device, dtype, shape, strides and address in one DLPack struct, about a
// quarter of the five attribute reads it replaces); the DLPack dtype codes are learnt from the
// sample tensors rather than written here, and a dtype whose sample did not export as plain
// row-major is read through its attributes. Without to_dlpack (the CI stand-ins) every tensor
// is read through dtype, shape, stride(), data_ptr() and get_device(), with interned names and
// dtypes compared by identity. What the fast path does not take (a subclass such as a
// FakeTensor, a tensor not on a CUDA device, more than 4 dimensions) reads as "not here" with
// no Python error set, and the caller leaves the call to the Python layer.
#pragma once

#include <Python.h>

#include <cstdint>
#include <initializer_list>

namespace nvfp4_py {

// The dtypes the ops take, in the order bind_torch receives them. The first three are the
// library's DType codes (bf16, fp16, fp32).
enum Dt : int { kBf16, kFp16, kFp32, kU8, kI32, kI64, kE4m3, kFp4x2, kDtCount };
constexpr unsigned bit(int d) { return d < 0 ? 0u : 1u << d; }
constexpr unsigned kAct = bit(kBf16) | bit(kFp16) | bit(kFp32);
constexpr unsigned kHalf = bit(kBf16) | bit(kFp16);
constexpr unsigned kFp4 = bit(kU8) | bit(kFp4x2);      // packed E2M1 as ModelOpt stores it
constexpr unsigned kE4m3Bytes = bit(kU8) | bit(kE4m3);  // E4M3 block scales

// DLPack's C structs (dlpack.h, DLPack 0.5-1.x, unversioned "dltensor" capsule): what
// to_dlpack hands over. Only the fields read here; the layout is the ABI DLPack fixes.
struct DLDataType {
  uint8_t code, bits;
  uint16_t lanes;
};
struct DLTensor {
  void* data;
  int32_t device_type, device_id;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;  // null: compact row-major
  uint64_t byte_offset;
};
constexpr int32_t kDLCUDA = 2;
inline uint32_t dl_code(DLDataType d) { return d.code | d.bits << 8 | uint32_t(d.lanes) << 16; }

struct Torch {
  PyObject* tensor_type = nullptr;
  PyObject* to_dlpack = nullptr;          // torch.utils.dlpack.to_dlpack, or null
  uint32_t dl_dtypes[kDtCount] = {};      // each Dt's DLPack dtype (dl_code), 0: read its attributes
  PyObject* dtypes[kDtCount] = {};
  PyObject* dtype_kwargs[kDtCount] = {};  // {"dtype": dtype}, for new_empty
  PyObject* current_device = nullptr;     // torch._C._cuda_getDevice
  PyObject* current_stream = nullptr;     // torch._C._cuda_getCurrentRawStream(index)
  PyObject *s_dtype = nullptr, *s_shape, *s_stride, *s_data_ptr, *s_get_device, *s_new_empty;
  bool bound() const { return tensor_type != nullptr; }
};
inline Torch g_torch;

struct Tensor {
  PyObject* obj = nullptr;  // borrowed
  int dt = -1;              // a Dt, -1 for any other dtype
  int ndim = 0;
  int64_t shape[4] = {}, stride[4] = {};
  uintptr_t ptr = 0;
  long device = -1;

  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < ndim; ++i) n *= shape[i];
    return n;
  }
  // _tensor()'s rule: the last dimension has stride 1 (or at most one element).
  bool last_contiguous() const { return ndim == 0 || stride[ndim - 1] == 1 || shape[ndim - 1] <= 1; }
  // torch's is_contiguous(): dimensions of size 1 may have any stride.
  bool contiguous() const {
    if (numel() == 0) return true;
    int64_t expected = 1;
    for (int i = ndim - 1; i >= 0; --i) {
      if (shape[i] == 1) continue;
      if (stride[i] != expected) return false;
      expected *= shape[i];
    }
    return true;
  }
  bool has_shape(std::initializer_list<int64_t> want) const {
    if (static_cast<int>(want.size()) != ndim) return false;
    int i = 0;
    for (int64_t w : want)
      if (shape[i++] != w) return false;
    return true;
  }
};

namespace detail {
inline bool read_ints(PyObject* tuple, int64_t* out, int n) {
  for (int i = 0; i < n; ++i) {
    const long long v = PyLong_AsLongLong(PyTuple_GetItem(tuple, i));
    if (v == -1 && PyErr_Occurred()) return false;
    out[i] = v;
  }
  return true;
}
// Steals `o`; true when it is a tuple of `n` ints (or n < 0: any length, returned in n).
inline bool read_tuple(PyObject* o, int64_t* out, int& n) {
  bool ok = o && PyTuple_Check(o);
  if (ok) {
    const Py_ssize_t size = PyTuple_Size(o);
    if (n < 0) n = static_cast<int>(size);
    ok = size == n && n <= 4 && read_ints(o, out, n);
  }
  Py_XDECREF(o);
  return ok;
}
}  // namespace detail

// to_dlpack(o)'s DLTensor, held while in scope (the capsule's destructor then hands it back to
// torch); null where the call failed, with no Python error left set.
class DlpackView {
 public:
  DlpackView(PyObject* to_dlpack, PyObject* o) : capsule_(PyObject_CallFunctionObjArgs(to_dlpack, o, nullptr)) {
    if (capsule_) dl_ = static_cast<const DLTensor*>(PyCapsule_GetPointer(capsule_, "dltensor"));
    if (PyErr_Occurred()) PyErr_Clear();
  }
  ~DlpackView() { Py_XDECREF(capsule_); }
  DlpackView(const DlpackView&) = delete;
  DlpackView& operator=(const DlpackView&) = delete;
  const DLTensor* get() const { return dl_; }

 private:
  PyObject* capsule_;
  const DLTensor* dl_ = nullptr;
};

// The DLPack view of `o` (a torch.Tensor) in t: 1 read, 0 not a plain CUDA tensor of at most 4
// dimensions, -1 not read this way (to_dlpack failed, or a dtype whose codes are unknown).
inline int read_dlpack(PyObject* o, Tensor& t) {
  const Torch& T = g_torch;
  const DlpackView view(T.to_dlpack, o);
  const DLTensor* dl = view.get();
  int read = -1;
  if (dl) {
    t.dt = -1;
    for (int i = 0; i < kDtCount; ++i)
      if (T.dl_dtypes[i] && T.dl_dtypes[i] == dl_code(dl->dtype)) t.dt = i;
    if (dl->device_type != kDLCUDA || dl->ndim > 4) {
      read = 0;
    } else if (t.dt >= 0) {
      t.device = dl->device_id;
      t.ndim = dl->ndim;
      int64_t step = 1;
      for (int i = t.ndim - 1; i >= 0; --i) {
        t.shape[i] = dl->shape[i];
        t.stride[i] = dl->strides ? dl->strides[i] : step;
        step *= t.shape[i];
      }
      t.ptr = reinterpret_cast<uintptr_t>(dl->data) + dl->byte_offset;
      read = 1;
    }
  }
  return read;
}

// Reads a plain CUDA tensor of at most 4 dimensions; false (no Python error set) otherwise.
inline bool read_tensor(PyObject* o, Tensor& t) {
  const Torch& T = g_torch;
  if (!o || reinterpret_cast<PyObject*>(Py_TYPE(o)) != T.tensor_type) return false;
  t.obj = o;
  if (T.to_dlpack) {
    const int read = read_dlpack(o, t);
    if (read >= 0) return read == 1;
  }
  // get_device(): the CUDA device's index, -1 for any other device (read first: it decides)
  PyObject* d = PyObject_CallMethodObjArgs(o, T.s_get_device, nullptr);
  t.device = d ? PyLong_AsLong(d) : -1;
  Py_XDECREF(d);
  bool ok = !PyErr_Occurred() && t.device >= 0;
  if (ok) {
    PyObject* dtype = PyObject_GetAttr(o, T.s_dtype);  // torch's dtypes live as long as torch
    t.dt = -1;
    for (int i = 0; i < kDtCount; ++i)
      if (dtype == T.dtypes[i]) t.dt = i;
    Py_XDECREF(dtype);
    t.ndim = -1;
    ok = detail::read_tuple(PyObject_GetAttr(o, T.s_shape), t.shape, t.ndim) &&
         detail::read_tuple(PyObject_CallMethodObjArgs(o, T.s_stride, nullptr), t.stride, t.ndim);
  }
  if (ok) {
    PyObject* p = PyObject_CallMethodObjArgs(o, T.s_data_ptr, nullptr);
    t.ptr = p ? static_cast<uintptr_t>(PyLong_AsUnsignedLongLong(p)) : 0;
    Py_XDECREF(p);
    ok = !PyErr_Occurred();
  }
  if (PyErr_Occurred()) PyErr_Clear();
  return ok;
}

// like.new_empty(shape, dtype=dt): torch's caching allocator, like's device. New reference or
// null with a Python error set.
inline PyObject* new_empty(PyObject* like, std::initializer_list<int64_t> shape, Dt dt) {
  PyObject* size = PyTuple_New(static_cast<Py_ssize_t>(shape.size()));
  if (!size) return nullptr;
  Py_ssize_t i = 0;
  for (int64_t s : shape) {
    PyObject* v = PyLong_FromLongLong(s);
    if (!v) {
      Py_DECREF(size);
      return nullptr;
    }
    PyTuple_SetItem(size, i++, v);
  }
  PyObject* args = PyTuple_Pack(1, size);
  Py_DECREF(size);
  PyObject* method = args ? PyObject_GetAttr(like, g_torch.s_new_empty) : nullptr;
  PyObject* out = method ? PyObject_Call(method, args, g_torch.dtype_kwargs[dt]) : nullptr;
  Py_XDECREF(method);
  Py_XDECREF(args);
  return out;
}

// The current CUDA device is `device`: then its current stream (torch's) in `stream`. False
// (no Python error set) when another device is current: the Python layer switches devices.
inline bool current_stream_of(long device, uintptr_t& stream) {
  PyObject* cur = PyObject_CallNoArgs(g_torch.current_device);
  const long d = cur ? PyLong_AsLong(cur) : -2;
  Py_XDECREF(cur);
  PyObject* s = nullptr;
  if (d == device) {
    PyObject* index = PyLong_FromLong(device);
    s = index ? PyObject_CallFunctionObjArgs(g_torch.current_stream, index, nullptr) : nullptr;
    Py_XDECREF(index);
    stream = s ? static_cast<uintptr_t>(PyLong_AsUnsignedLongLong(s)) : 0;
    Py_XDECREF(s);
  }
  const bool ok = d == device && s && !PyErr_Occurred();
  if (PyErr_Occurred()) PyErr_Clear();
  return ok;
}

// The DLPack dtype of `sample` (a [2, 3] CPU tensor) when it exports as plain row-major; 0
// otherwise (its tensors are then read through their attributes).
inline uint32_t learn_dl_dtype(PyObject* to_dlpack, PyObject* sample) {
  const DlpackView view(to_dlpack, sample);
  const DLTensor* dl = view.get();
  const bool plain = dl && dl->ndim == 2 && dl->shape[0] == 2 && dl->shape[1] == 3 &&
                     (!dl->strides || (dl->strides[0] == 3 && dl->strides[1] == 1));
  return plain ? dl_code(dl->dtype) : 0;
}

// bind_torch(Tensor, dtypes (in Dt order; None for one this torch lacks), current_device,
// current_stream[, to_dlpack, samples (a [2, 3] CPU tensor per dtype, or None)]): called once
// by nvfp4_jit.ops at import.
inline PyObject* bind_torch(PyObject*, PyObject* const* args, Py_ssize_t n) {
  if ((n != 4 && n != 6) || !PyTuple_Check(args[1]) || PyTuple_Size(args[1]) != kDtCount ||
      (n == 6 && (!PyTuple_Check(args[5]) || PyTuple_Size(args[5]) != kDtCount))) {
    PyErr_SetString(PyExc_TypeError,
                    "bind_torch(Tensor, dtypes[8], current_device, current_stream[, to_dlpack, samples[8]])");
    return nullptr;
  }
  Torch T;
  const char* names[] = {"dtype", "shape", "stride", "data_ptr", "get_device", "new_empty"};
  PyObject** slots[] = {&T.s_dtype, &T.s_shape, &T.s_stride, &T.s_data_ptr, &T.s_get_device, &T.s_new_empty};
  for (int i = 0; i < 6; ++i)
    if (!(*slots[i] = PyUnicode_InternFromString(names[i]))) return nullptr;
  for (int i = 0; i < kDtCount; ++i) {
    PyObject* dt = PyTuple_GetItem(args[1], i);
    if (dt == Py_None) continue;
    Py_INCREF(dt);
    T.dtypes[i] = dt;
    T.dtype_kwargs[i] = Py_BuildValue("{s:O}", "dtype", dt);
    if (!T.dtype_kwargs[i]) return nullptr;
  }
  if (n == 6 && args[4] != Py_None) {
    uint32_t learnt[kDtCount] = {};
    for (int i = 0; i < kDtCount; ++i) {
      PyObject* sample = PyTuple_GetItem(args[5], i);
      if (T.dtypes[i] && sample != Py_None) learnt[i] = learn_dl_dtype(args[4], sample);
    }
    bool any = false;
    for (int i = 0; i < kDtCount; ++i) {
      T.dl_dtypes[i] = learnt[i];
      for (int j = 0; j < kDtCount; ++j)  // two dtypes with one code: neither is told apart by it
        if (j != i && learnt[j] == learnt[i]) T.dl_dtypes[i] = 0;
      any = any || T.dl_dtypes[i] != 0;
    }
    if (any) {
      Py_INCREF(args[4]);
      T.to_dlpack = args[4];
    }
  }
  for (int i : {0, 2, 3}) Py_INCREF(args[i]);
  T.tensor_type = args[0];
  T.current_device = args[2];
  T.current_stream = args[3];
  g_torch = T;  // bound once per process; the references are kept for its life
  Py_RETURN_NONE;
}

// dlpack_dtypes() -> a bool per bound dtype (Dt order): read through DLPack.
inline PyObject* dlpack_dtypes(PyObject*, PyObject*) {
  PyObject* out = PyTuple_New(kDtCount);
  for (int i = 0; out && i < kDtCount; ++i) {
    PyObject* b = g_torch.to_dlpack && g_torch.dl_dtypes[i] ? Py_True : Py_False;
    Py_INCREF(b);
    PyTuple_SetItem(out, i, b);
  }
  return out;
}

}  // namespace nvfp4_py
