#include "binding_errors.hpp"

namespace nvfp4_py {

using nvfp4::jit::Status;

namespace {

PyObject* g_error = nullptr;             // nvfp4_jit.Error(RuntimeError)
PyObject* g_invalid_argument = nullptr;  // nvfp4_jit.InvalidArgument(Error, ValueError)
PyObject* g_unsupported = nullptr;       // nvfp4_jit.Unsupported(Error, NotImplementedError)
PyObject* g_not_loaded = nullptr;        // nvfp4_jit.NotLoadedInCapture(Error)
PyObject* g_no_device = nullptr;         // nvfp4_jit.NoDevice(Error)

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

bool add_exceptions(PyObject* module) {
  PyObject* m = module;
  g_error = add_exception(m, "Error", PyExc_RuntimeError, "An nvfp4-jit call failed; .status is the library's status.");
  if (!g_error) return false;
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
  if (!g_invalid_argument || !g_unsupported || !g_not_loaded || !g_no_device) return false;
  return true;
}

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

}  // namespace nvfp4_py
