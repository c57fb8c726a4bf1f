// The binding's Python exceptions (nvfp4_jit.Error and its subclasses, one per library Status)
// and the one way it calls into the library: the GIL released, C++ exceptions turned into them.
#pragma once
#include <Python.h>

#include <exception>
#include <new>
#include <string>
#include <string_view>

#include "nvfp4/jit.hpp"

namespace nvfp4_py {

// Adds the exception classes to `module`; false with a Python error set.
bool add_exceptions(PyObject* module);

// Raised from a C++ exception: the library's own message, the status as `.status`.
void raise_error(nvfp4::jit::Status status, const char* message);

// Runs `body` with the GIL released (a first call may compile for seconds), turning the
// library's exceptions into Python ones. Returns false with a Python error set on failure.
// From the checked torch functions a missing kernel in a capture also says what to do in Python.
constexpr std::string_view kCaptureHint =
    " From Python: run the op once before capturing (the usual warm-up pass), or nvfp4_jit.prewarm(...) / "
    "Nvfp4Linear.prewarm(...) for a GEMM.";

template <class F>
bool call_released(F&& body, std::string_view capture_hint = {}) {
  using nvfp4::jit::Status;
  Status status = Status::ok;
  std::string message;
  PyThreadState* ts = PyEval_SaveThread();
  try {
    body();
  } catch (const nvfp4::jit::Error& e) {
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

}  // namespace nvfp4_py
