// The binding's argument reader: a METH_FASTCALL method's positional arguments, each read under
// its field's name, or (schema mode) only those names recorded.
#pragma once
#include <Python.h>

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

namespace nvfp4_py {

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

}  // namespace nvfp4_py
