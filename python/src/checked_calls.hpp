// The checked eager fast paths of the torch functions (nvfp4_jit.gemm, quantize, dequantize): the
// tensors are read and checked here, as the Python layer's checks (nvfp4_jit/ops/) would
// check them, and the op is launched on torch's current stream. Whatever these checks do not
// accept (a wrong argument, or a case the fast path leaves out: a tensor subclass, a CPU-held
// scale, another device current) returns NotImplemented before anything is launched or
// allocated, and the Python layer runs its own checks, which name the wrong argument.
#pragma once
#include <Python.h>

namespace nvfp4_py::checked {

// gemm_checked(a, b, b_scales, b_global_scale, b_scale_layout, b_prepacked, n, a_scales,
//              a_global_scale, a_scale_layout, bias, alpha, out_dtype, out, workspace,
//              weights_static, epilogue, precision, a_rmsnorm_weight, a_rmsnorm_eps, residual)
// -> out (allocated when None) or NotImplemented.
PyObject* gemm_checked(PyObject*, PyObject* const* args, Py_ssize_t nargs);
PyObject* quantize_checked(PyObject*, PyObject* const* args, Py_ssize_t nargs);
PyObject* dequantize_checked(PyObject*, PyObject* const* args, Py_ssize_t nargs);

}  // namespace nvfp4_py::checked
