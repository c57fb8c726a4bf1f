"""The binding's checked fast path (nvfp4_jit._C.gemm_checked / quantize_checked / dequantize_checked) without torch:
a stand-in tensor type with torch's attributes is bound in torch's place, so CI (which has no
torch) runs the binding's tensor reading and checks. A call the checks accept reaches the
library (which then fails on the stand-ins' null addresses or the missing GPU, never
launching); a call they reject is declined with NotImplemented for the Python layer to explain.
Where torch is installed, test_fast_path.py runs the same checks on real tensors instead."""
import importlib.util

import pytest

import nvfp4_jit
from nvfp4_jit import _C, prepacked_bytes

if importlib.util.find_spec("torch") is not None:
    pytest.skip("torch is installed: test_fast_path.py checks the fast path on real tensors (binding stand-ins here "
                "would replace torch's types)", allow_module_level=True)


class Dtype:
    def __init__(self, name):
        self.name = name


BF16, FP16, FP32, U8, I32, I64, E4M3, FP4 = (Dtype(n) for n in "bf16 fp16 fp32 u8 i32 i64 e4m3 fp4".split())
allocated = []


class Tensor:
    """What the binding reads of a torch.Tensor: dtype, shape, stride(), data_ptr(), get_device()
    (-1 off a CUDA device, as torch's), new_empty(shape, dtype=)."""

    def __init__(self, shape, dtype, stride=None, device=0, cuda=True):
        self.shape, self.dtype, self._device = tuple(shape), dtype, device if cuda else -1
        if stride is None:
            stride, step = [], 1
            for d in reversed(shape):
                stride.insert(0, step)
                step *= d
        self._stride = tuple(stride)

    def stride(self):
        return self._stride

    def data_ptr(self):
        return 0

    def get_device(self):
        return self._device

    def new_empty(self, shape, dtype):
        allocated.append((tuple(shape), dtype.name))
        return Tensor(shape, dtype)


_C.bind_torch(Tensor, (BF16, FP16, FP32, U8, I32, I64, E4M3, FP4), lambda: 0, lambda index: 0)
DEFAULTS = dict(b_scales=None, b_global_scale=1.0, b_scale_layout="linear", b_prepacked=False, n=None, a_scales=None,
                a_global_scale=None, a_scale_layout="linear", bias=None, alpha=1.0, out_dtype=None, out=None,
                workspace=None, weights_static=False, epilogue="none", precision="exact", a_rmsnorm_weight=None,
                a_rmsnorm_eps=1e-6, residual=None)


def gemm(a, b, *args, **kw):
    fields = dict(DEFAULTS)
    fields.update(zip(list(DEFAULTS), args))
    fields.update(kw)
    return _C.gemm_checked(a, b, *fields.values())


def accepted(call):
    allocated.clear()
    try:
        r = call()
    except nvfp4_jit.Error:  # the library's own check or the missing driver: reached, not declined
        return True
    assert r is not NotImplemented
    return True


A, W, S, Y = Tensor((16, 256), BF16), Tensor((64, 128), U8), Tensor((64, 16), E4M3), Tensor((16, 64), BF16)
QA, QS = Tensor((16, 128), U8), Tensor((16, 16), E4M3)


@pytest.mark.parametrize("name,call,allocates", [
    ("w4a16 out=", lambda: gemm(A, W, S, 0.5, out=Y), []),
    ("w4a16 allocates", lambda: gemm(A, W, S, 0.5), [((16, 64), "bf16")]),
    ("fp32 out, bias", lambda: gemm(A, W, S, out_dtype=FP32, bias=Tensor((64,), FP32)), [((16, 64), "fp32")]),
    ("fp4 weight, swizzled scales", lambda: gemm(A, Tensor((64, 128), FP4), Tensor((128, 16), E4M3),
                                                            b_scale_layout="swizzled128x4", out=Y), []),
    # (4 rows: W4A4 in one launch on sm_90a, no workspace; 16: A decoded into one first)
    ("w4a4, per-row scale, one launch", lambda: gemm(Tensor((4, 128), U8), W, S, a_scales=Tensor((4, 16), E4M3),
                                                     a_global_scale=Tensor((4,), FP32), out=Tensor((4, 64), BF16)), []),
    ("w4a4, A decoded first", lambda: gemm(QA, W, S, a_scales=QS, a_global_scale=Tensor((16,), FP32), out=Y),
     [((16 * 256 * 2,), "u8")]),
    ("swiglu: out [m, n/2]", lambda: gemm(A, Tensor((prepacked_bytes(64, 256),), U8), b_prepacked=True, n=64,
                                          epilogue="swiglu"), [((16, 32), "bf16")]),
    ("w4a8, workspace asked for", lambda: gemm(A, Tensor((prepacked_bytes(64, 256),), U8), b_prepacked=True, n=64,
                                               precision="w4a8", out=Y), []),
    ("w4a8 prefill, workspace allocated", lambda: gemm(Tensor((512, 256), BF16), Tensor((prepacked_bytes(64, 256),), U8),
                                                       b_prepacked=True, n=64, precision="w4a8",
                                                       out=Tensor((512, 64), BF16)), [((512 * 256 + 4 * 512,), "u8")]),
    ("a_rmsnorm_weight in A's dtype, residual", lambda: gemm(A, W, S, a_rmsnorm_weight=Tensor((256,), BF16),
                                                             a_rmsnorm_eps=1e-5, residual=Y, out=Y), []),
    ("a_rmsnorm_weight fp32", lambda: gemm(A, W, S, a_rmsnorm_weight=Tensor((256,), FP32)), [((16, 64), "bf16")]),
    ("quantize per_row swizzled", lambda: _C.quantize_checked(A, None, "per_row", "swizzled128x4", None, None, None),
     [((16, 128), "u8"), ((128, 16), "e4m3"), ((16,), "fp32")]),
    ("quantize given, out=", lambda: _C.quantize_checked(A, 0.5, "per_tensor", "linear", QA, QS, None), []),
    ("dequantize allocates", lambda: _C.dequantize_checked(W, S, 0.5, None, "linear", FP16, None, None),
     [((64, 256), "fp16")]),
    ("dequantize gathered, device scale per row, out=", lambda: _C.dequantize_checked(
        W, S, Tensor((64,), FP32), 256, "linear", BF16, Tensor((16,), I32), Tensor((16, 256), BF16)), []),
    ("dequantize swizzled", lambda: _C.dequantize_checked(W, Tensor((128, 16), E4M3), 1.0, None, "swizzled128x4", BF16,
                                                          None, None), [((64, 256), "bf16")]),
])
def test_accepted_calls_reach_the_library(name, call, allocates):
    assert accepted(call), name
    assert allocated == allocates, name


@pytest.mark.parametrize("name,call", [
    ("a not a tensor", lambda: gemm([1], W, S)),
    ("a fp32", lambda: gemm(Tensor((16, 256), FP32), W, S)),
    ("a not contiguous along k", lambda: gemm(Tensor((16, 256), BF16, stride=(1, 16)), W, S)),
    ("a on the host", lambda: gemm(Tensor((16, 256), BF16, cuda=False), W, S)),
    ("b of another k", lambda: gemm(A, Tensor((64, 100), U8), S)),
    ("b on another device", lambda: gemm(A, Tensor((64, 128), U8, device=1), S)),
    ("b_scales of another shape", lambda: gemm(A, W, Tensor((64, 8), E4M3))),
    ("b_scales fp32", lambda: gemm(A, W, Tensor((64, 16), FP32))),
    ("swizzled scales too small", lambda: gemm(A, W, S, b_scale_layout="swizzled128x4")),
    ("negative global scale", lambda: gemm(A, W, S, -1.0)),
    ("NaN global scale", lambda: gemm(A, W, S, float("nan"))),
    ("bool global scale", lambda: gemm(A, W, S, True)),
    ("global scale of 2 values", lambda: gemm(A, W, S, Tensor((2,), FP32))),
    ("unknown layout", lambda: gemm(A, W, S, b_scale_layout="swizzled")),
    ("prepacked without n", lambda: gemm(A, Tensor((1000,), U8), b_prepacked=True)),
    ("prepacked of the wrong size", lambda: gemm(A, Tensor((1000,), U8), b_prepacked=True, n=64)),
    ("prepacked, k not a multiple of 32", lambda: gemm(Tensor((16, 100), BF16), Tensor((1000,), U8), b_prepacked=True, n=64)),
    ("prepacked, n negative", lambda: gemm(A, Tensor((1000,), U8), b_prepacked=True, n=-4)),
    ("a_global_scale with W4A16", lambda: gemm(A, W, S, a_global_scale=1.0)),
    ("W4A4 without a_scales", lambda: gemm(QA, W, S)),
    ("bias of another n", lambda: gemm(A, W, S, bias=Tensor((63,), BF16))),
    ("bias fp16", lambda: gemm(A, W, S, bias=Tensor((64,), FP16))),
    ("out of another shape", lambda: gemm(A, W, S, out=Tensor((16, 63), BF16))),
    ("out int32", lambda: gemm(A, W, S, out=Tensor((16, 64), I32))),
    ("a_rmsnorm_weight of another k", lambda: gemm(A, W, S, a_rmsnorm_weight=Tensor((128,), BF16))),
    ("a_rmsnorm_weight fp16 on bf16 A", lambda: gemm(A, W, S, a_rmsnorm_weight=Tensor((256,), FP16))),
    ("a_rmsnorm_weight with W4A4", lambda: gemm(QA, W, S, a_scales=QS, a_global_scale=1.0,
                                                a_rmsnorm_weight=Tensor((256,), FP32))),
    ("a_rmsnorm_eps not a number", lambda: gemm(A, W, S, a_rmsnorm_weight=Tensor((256,), BF16), a_rmsnorm_eps="x")),
    ("residual of another shape", lambda: gemm(A, W, S, residual=Tensor((16, 63), BF16))),
    ("residual fp32 with bf16 out", lambda: gemm(A, W, S, residual=Tensor((16, 64), FP32))),
    ("out_dtype uint8", lambda: gemm(A, W, S, out_dtype=U8)),
    ("unknown epilogue", lambda: gemm(A, W, S, epilogue="gelu")),
    ("unknown precision", lambda: gemm(A, W, S, precision="fp8")),
    ("swiglu out of n columns", lambda: gemm(A, Tensor((prepacked_bytes(64, 256),), U8), b_prepacked=True, n=64,
                                             epilogue="swiglu", out=Y)),
    ("workspace 2-D", lambda: gemm(QA, W, S, a_scales=QS, a_global_scale=1.0, workspace=Tensor((2, 8), U8))),
    ("another device current", lambda: gemm(Tensor((16, 256), BF16, device=3), Tensor((64, 128), U8, device=3),
                                            Tensor((64, 16), E4M3, device=3))),
    ("quantize mode 'given' without a scale", lambda: _C.quantize_checked(A, None, "given", "linear", None, None, None)),
    ("quantize zero scale", lambda: _C.quantize_checked(A, 0.0, "per_tensor", "linear", None, None, None)),
    ("quantize out= without its global scale", lambda: _C.quantize_checked(A, None, "per_tensor", "linear", QA, QS, None)),
    ("quantize out of another shape", lambda: _C.quantize_checked(A, 0.5, "per_tensor", "linear", Tensor((16, 64), U8), QS,
                                                                  None)),
    ("quantize int32 input", lambda: _C.quantize_checked(Tensor((16, 256), I32), 0.5, "per_tensor", "linear", None, None,
                                                         None)),
    ("dequantize q bf16", lambda: _C.dequantize_checked(A, S, 1.0, None, "linear", BF16, None, None)),
    ("dequantize scales of another k", lambda: _C.dequantize_checked(W, S, 1.0, 512, "linear", BF16, None, None)),
    ("dequantize k not an int", lambda: _C.dequantize_checked(W, S, 1.0, 256.0, "linear", BF16, None, None)),
    ("dequantize zero scale", lambda: _C.dequantize_checked(W, S, 0.0, None, "linear", BF16, None, None)),
    ("dequantize dtype uint8", lambda: _C.dequantize_checked(W, S, 1.0, None, "linear", U8, None, None)),
    ("dequantize row_indices int64", lambda: _C.dequantize_checked(W, S, 1.0, None, "linear", BF16, Tensor((4,), I64),
                                                                   None)),
    ("dequantize out of another shape", lambda: _C.dequantize_checked(W, S, 1.0, None, "linear", BF16, None,
                                                                      Tensor((64, 128), BF16))),
    ("dequantize scales on another device", lambda: _C.dequantize_checked(W, Tensor((64, 16), E4M3, device=1), 1.0,
                                                                          None, "linear", BF16, None, None)),
])
def test_rejected_calls_are_declined_before_any_work(name, call):
    allocated.clear()
    assert call() is NotImplemented, name
    assert allocated == [], f"{name}: allocated before declining"
