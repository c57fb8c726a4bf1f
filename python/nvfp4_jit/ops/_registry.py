"""The ops' registration with torch: each one a torch.library op nvfp4_jit::<name> (its schema
from its Python implementation's annotations) with a fake implementation, its CUDA kernel
_torch_ops.so's C++ one where there is one, else the Python implementation; and the choice
between the op and the plain function at each call."""
import inspect
import os
import warnings

import torch
from torch import Tensor

_compiling = torch.compiler.is_compiling


# The ops are defined and implemented through torch.library.Library rather than
# torch.library.custom_op: custom_op wraps every call in Python kernels on several dispatch keys
# (autograd, ADInplaceOrView, the backend), which costs tens of microseconds a call; a plain
# CUDA kernel costs one dispatcher hop. The ops have no autograd formula (inference only).
_LIB = torch.library.Library("nvfp4_jit", "DEF")


_PYTHON_KERNELS = {}  # op name -> its Python kernel (the CUDA kernel where _torch_ops.so has none)


def _register(name, fn, fake, mutates=()):
    """The op nvfp4_jit::name (its schema from fn's annotations) with fake as its fake
    implementation (meta and fake tensors: torch.compile, shape propagation). Its CUDA kernel
    is registered once every op is defined (nvfp4_jit/ops/__init__.py): _torch_ops.so's C++ one,
    else fn."""
    # int, not SymInt: the ops' integers are enums and weight sizes, never a traced batch size,
    # and a plain int is the cheaper argument to pass through the dispatcher.
    _LIB.define(name + torch.library.infer_schema(fn, mutates_args=mutates).replace("SymInt ", "int "))
    torch.library.register_fake(f"nvfp4_jit::{name}", fake, lib=_LIB)
    _PYTHON_KERNELS[name] = fn


def _register_cuda_kernels():
    """Loads _torch_ops.so (the hot ops' kernels in C++, one dispatcher hop and no Python) when
    the package has one and NVFP4_JIT_TORCH_OPS is not `python`; Python kernels for the rest.
    -> the ops served in C++."""
    path = os.path.join(os.path.dirname(os.path.dirname(__file__)), "_torch_ops.so")
    if os.path.exists(path) and os.environ.get("NVFP4_JIT_TORCH_OPS", "") != "python":
        try:
            torch.ops.load_library(path)
        except OSError as e:  # a torch older than the stable ABI it targets: the Python kernels serve
            warnings.warn(f"nvfp4_jit: {path} did not load ({e}); the torch ops run their Python kernels")
    native = []
    for name, fn in _PYTHON_KERNELS.items():
        if torch._C._dispatch_has_kernel_for_dispatch_key(f"nvfp4_jit::{name}", "CUDA"):
            native.append(name)
        else:
            _LIB.impl(name, fn, "CUDA")
    return tuple(native)


def _named(fn, fake):
    """fake called with fn's arguments by name (a fake implementation reads the few it needs)."""
    names = tuple(inspect.signature(fn).parameters)
    return lambda *args, **kwargs: fake(**dict(zip(names, args)), **kwargs)


def _none(*args):
    return None


def _pick(name, eager, t):
    """The custom op while torch.compile traces or when `t` is no plain tensor (a fake, functional
    or other subclass tensor), else the plain function (no dispatcher)."""
    return getattr(torch.ops.nvfp4_jit, name) if type(t) is not Tensor or _compiling() else eager
