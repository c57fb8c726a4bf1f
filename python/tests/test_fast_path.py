"""The checked eager fast path of nvfp4_jit.gemm and nvfp4_jit.quantize: the binding reads and
checks the tensors itself (nvfp4_jit._C.gemm_checked / quantize_checked). It must give the
same bits as the Python path, be taken for the common calls, and decline (NotImplemented,
nothing launched) every call the Python checks reject, so those still raise the Python
layer's messages naming the argument."""
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed here: the torch layer runs on the GPU machine")
import nvfp4_jit  # noqa: E402
from nvfp4_jit import _C  # noqa: E402
from test_gpu import DEV, activations, assert_same_bits, host, nvfp4_weight, poisoned_like  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.torch_layer]
N, K = 192, 512


def gemm_fast(a, b, b_scales=None, b_global_scale=1.0, *, b_scale_layout="linear", b_prepacked=False, n=None,
              a_scales=None, a_global_scale=None, a_scale_layout="linear", bias=None, alpha=1.0, out_dtype=None,
              out=None, workspace=None, weights_static=False, epilogue="none", precision="exact", a_rmsnorm_weight=None,
              a_rmsnorm_eps=1e-6, residual=None):
    return _C.gemm_checked(a, b, b_scales, b_global_scale, b_scale_layout, b_prepacked, n, a_scales, a_global_scale,
                           a_scale_layout, bias, alpha, out_dtype, out, workspace, weights_static, epilogue, precision,
                           a_rmsnorm_weight, a_rmsnorm_eps, residual)


def gemm_cases():
    w, s = nvfp4_weight(N, K)
    x = activations(7, K) / 8
    q, qs, qg = nvfp4_jit.quantize(activations(5, K), scale_mode="per_row")
    g = torch.tensor([0.004], device=DEV)
    return [
        ("w4a16 float scale", (x, w, s, 0.004), {}),
        ("w4a16 device scale, bias, fp32 out", (x, w, s, g), dict(bias=torch.randn(N, device=DEV).to(torch.bfloat16),
                                                                   out_dtype=torch.float32, alpha=0.5)),
        ("w4a16 swizzled", (x, w, nvfp4_jit.convert_scales(s, N, K), g), dict(b_scale_layout="swizzled128x4")),
        ("w4a16 prepacked", (x, nvfp4_jit.prepack(w, s), None, g), dict(b_prepacked=True, n=N, weights_static=True)),
        ("w4a4 per-row scale", (q, w, s, 0.004), dict(a_scales=qs, a_global_scale=qg)),
        ("w4a4 workspace", (q, w, s, 0.004), dict(a_scales=qs, a_global_scale=qg,
                                                   workspace=torch.empty(5 * K * 2, dtype=torch.uint8, device=DEV))),
        ("swiglu", (x, nvfp4_jit.prepack(w, s, swiglu_interleave=0), None, g), dict(b_prepacked=True, n=N,
                                                                                    epilogue="swiglu")),
        ("w4a8 prefill", (activations(300, K) / 8, nvfp4_jit.prepack(w, s), None, g), dict(b_prepacked=True, n=N,
                                                                                           precision="w4a8")),
    ]


def test_gemm_fast_path_is_taken_and_equals_the_python_path(monkeypatch):
    cases = gemm_cases()
    fast = []
    for name, args, kw in cases:
        y = gemm_fast(*args, **kw)
        assert y is not NotImplemented, f"{name}: the fast path declined a valid call"
        out = poisoned_like(y)
        assert gemm_fast(*args, **kw, out=out) is out
        fast.append((y, out))
    monkeypatch.setattr(_C, "gemm_checked", lambda *a: NotImplemented)  # the Python path only
    for (name, args, kw), (y, out) in zip(cases, fast):
        want = host(nvfp4_jit.gemm(*args, **kw))
        assert_same_bits(y, want, f"{name}: fast path")
        assert_same_bits(out, want, f"{name}: fast path, out=")


def test_tensors_are_read_through_dlpack_and_views_keep_their_offsets_and_strides(monkeypatch):
    # torch >= 2.4 exports these dtypes as plain DLPack; fp8 / fp4 may fall back to attributes
    read = dict(zip("bf16 fp16 fp32 u8 i32 i64 e4m3 fp4x2".split(), _C.dlpack_dtypes()))
    assert all(read[d] for d in "bf16 fp16 fp32 u8 i32 i64".split()), f"not read through DLPack: {read}"
    w_big, s_big = nvfp4_weight(N + 5, K + 64)
    w, s = w_big[3:3 + N, 16:16 + K // 2], s_big[2:2 + N, :K // 16].contiguous()  # w: offset, padded rows
    x = (activations(9, K + 32) / 8)[2:, 32:]
    q, qs, qg = nvfp4_jit.quantize(activations(6, K))
    q_big = torch.zeros(8, K // 2 + 48, dtype=torch.uint8, device=DEV)
    q_big[1:7, 48:] = q
    cases = [("views", (x, w, s, 0.004), {}),
             ("views, w4a4", (q_big[1:7, 48:], w, s, 0.004), dict(a_scales=qs, a_global_scale=qg))]
    out_big = torch.empty(10, N + 40, dtype=torch.bfloat16, device=DEV)
    fast = []
    for name, args, kw in cases:
        out = poisoned_like(out_big)[1:1 + args[0].shape[0], 40:]
        assert gemm_fast(*args, **kw, out=out) is out, f"{name}: the fast path declined a valid call"
        fast.append(out)
    monkeypatch.setattr(_C, "gemm_checked", lambda *a: NotImplemented)
    for (name, args, kw), out in zip(cases, fast):
        assert_same_bits(out, host(nvfp4_jit.gemm(*args, **kw)), f"{name}: fast path")


def test_quantize_fast_path_is_taken_and_equals_the_python_path(monkeypatch):
    x = activations(37, K, nan=True)
    cases = [("per_tensor", (x,), {}), ("per_row swizzled", (x,), dict(scale_mode="per_row", scale_layout="swizzled128x4")),
             ("float", (x, 0.02), {}), ("row tensor", (x, torch.rand(37, device=DEV) + 0.01), {}),
             ("fp32 input", (activations(9, K, torch.float32), torch.tensor([0.5], device=DEV)), {})]
    fast = []
    for name, args, kw in cases:
        r = _C.quantize_checked(args[0], args[1] if len(args) > 1 else None, kw.get("scale_mode", "per_tensor"),
                                kw.get("scale_layout", "linear"), None, None, None)
        assert r is not NotImplemented, f"{name}: the fast path declined a valid call"
        fast.append(r)
    monkeypatch.setattr(_C, "quantize_checked", lambda *a: NotImplemented)
    for (name, args, kw), r in zip(cases, fast):
        want = nvfp4_jit.quantize(*args, **kw)
        for got, w, what in zip(r, want, ("values", "scales", "global scale")):
            if isinstance(w, torch.Tensor):
                assert_same_bits(got, host(w), f"{name}: {what}")
            else:
                assert got == w
    q, s, g = (poisoned_like(t) for t in fast[0])
    monkeypatch.undo()
    r = nvfp4_jit.quantize(x, out=q, out_scales=s, out_global_scale=g)
    assert r[0] is q and r[1] is s and r[2] is g
    for got, w, what in zip((q, s, g), fast[0], ("values", "scales", "global scale")):
        assert_same_bits(got, host(w), f"out= {what}")


def test_dequantize_fast_path_is_taken_and_equals_the_python_path(monkeypatch):
    w, s = nvfp4_weight(N, K)
    idx = torch.tensor([5, 0, N - 1, N + 3], dtype=torch.int32, device=DEV)  # the last one out of range: NaN row
    cases = [("float scale", (w, s, 0.004), {}),
             ("row scales, fp32, gathered", (w, s, torch.rand(N, device=DEV) + 0.01), dict(dtype=torch.float32, row_indices=idx)),
             ("swizzled, fp16", (w, nvfp4_jit.convert_scales(s, N, K), 0.5), dict(scale_layout="swizzled128x4",
                                                                                  dtype=torch.float16))]
    fast = []
    for name, args, kw in cases:
        call = lambda out=None: _C.dequantize_checked(*args, None, kw.get("scale_layout", "linear"),  # noqa: E731
                                                      kw.get("dtype", torch.bfloat16), kw.get("row_indices"), out)
        y = call()
        assert y is not NotImplemented, f"{name}: the fast path declined a valid call"
        out = poisoned_like(y)
        assert call(out) is out
        fast.append((y, out))
    monkeypatch.setattr(_C, "dequantize_checked", lambda *a: NotImplemented)
    for (name, args, kw), (y, out) in zip(cases, fast):
        want = host(nvfp4_jit.dequantize(*args, **kw))
        assert_same_bits(y, want, f"{name}: fast path")
        assert_same_bits(out, want, f"{name}: fast path, out=")


def test_torch_ops_equal_their_python_kernels(monkeypatch):
    """torch.ops.nvfp4_jit.* (C++ kernels where _torch_ops.so serves them) against the Python
    kernels on the Python path alone, bit for bit, allocating and into out=."""
    import os
    from nvfp4_jit import ops as ops_module
    from nvfp4_jit.ops import dequant, matmul, quant
    if os.path.exists(os.path.join(os.path.dirname(nvfp4_jit.__file__), "_torch_ops.so")):
        assert {"gemm", "gemm_out", "quantize", "quantize_out", "dequantize", "dequantize_out"} <= set(
            ops_module.NATIVE_TORCH_OPS), f"_torch_ops.so is here but serves only {ops_module.NATIVE_TORCH_OPS}"
    w, s = nvfp4_weight(N, K)
    x = activations(7, K) / 8
    q4, s4, g4 = nvfp4_jit.quantize(activations(7, K), scale_mode="per_row")
    top = torch.ops.nvfp4_jit
    bias = torch.randn(N, device=DEV).to(torch.bfloat16)
    sw, x300 = nvfp4_jit.prepack(w, s, swiglu_interleave=0), activations(300, K) / 8
    unfused = (None, 1e-6, None)  # a_rmsnorm_weight, a_rmsnorm_eps, residual
    norm, residual = torch.rand(K, device=DEV) + 0.5, torch.randn(7, N, device=DEV).to(torch.bfloat16)
    gemm_args = [("w4a16", (x, None, None, 1.0, 0, w, s, None, 0.004, 0, False, N, K, bias, 0.5, torch.float32, False, 0, 0,
                            *unfused)),
                 ("w4a4 per-row", (q4, s4, g4, 1.0, 0, w, s, None, 0.004, 0, False, N, K, None, 1.0, torch.bfloat16, False,
                                   0, 0, *unfused)),
                 ("swiglu", (x, None, None, 1.0, 0, sw, None, None, 0.004, 0, True, N, K, bias, 1.0, torch.bfloat16, False,
                             1, 0, *unfused)),
                 ("w4a8", (x300, None, None, 1.0, 0, nvfp4_jit.prepack(w, s), None, None, 0.004, 0, True, N, K, None, 1.0,
                           torch.bfloat16, False, 0, 1, *unfused)),
                 ("rmsnorm, residual", (x, None, None, 1.0, 0, w, s, None, 0.004, 0, False, N, K, None, 1.0, torch.bfloat16,
                                        False, 0, 0, norm, 1e-5, residual))]
    quantize_args = [("per_row swizzled", (x, None, 1.0, 1, 2)), ("per_tensor", (x, None, 1.0, 0, 1)),
                     ("given", (x, torch.tensor([0.02], device=DEV), 1.0, 0, 0))]
    dequantize_args = [("gathered", (w, s, None, 0.004, K, 0, torch.float16,
                                     torch.tensor([3, 0, N + 1], dtype=torch.int32, device=DEV)))]
    got = {}
    for name, args in gemm_args:
        y = top.gemm(*args)
        out = poisoned_like(y)
        top.gemm_out(out, None, *args[:15], *args[16:])
        got["gemm " + name] = (y, out)
    for name, args in quantize_args:
        r = top.quantize(*args)
        outs = tuple(poisoned_like(t) for t in r)
        top.quantize_out(*outs, *args)
        got["quantize " + name] = (r, outs)
    for name, args in dequantize_args:
        y = top.dequantize(*args)
        out = poisoned_like(y)
        top.dequantize_out(out, *args[:6], args[7])
        got["dequantize " + name] = (y, out)
    for name in ("gemm_checked", "quantize_checked", "dequantize_checked"):  # the Python kernels' own path
        monkeypatch.setattr(_C, name, lambda *a: NotImplemented)
    want = {**{"gemm " + n: matmul._gemm(*a) for n, a in gemm_args},
            **{"quantize " + n: quant._quantize(*a) for n, a in quantize_args},
            **{"dequantize " + n: dequant._dequantize(*a) for n, a in dequantize_args}}
    for name, (alloc, into) in got.items():
        w_ = want[name] if isinstance(want[name], tuple) else (want[name],)
        a_ = alloc if isinstance(alloc, tuple) else (alloc,)
        o_ = into if isinstance(into, tuple) else (into,)
        for i, (ga, go, wt) in enumerate(zip(a_, o_, w_)):
            assert_same_bits(ga, host(wt), f"torch.ops.nvfp4_jit.{name} [{i}]")
            assert_same_bits(go, host(wt), f"torch.ops.nvfp4_jit.{name}_out [{i}]")


def test_the_fast_path_declines_what_the_python_checks_reject():
    w, s = nvfp4_weight(N, K)
    x = activations(7, K)
    bad_calls = [
        ("a must be a torch.Tensor", ([1, 2], w, s), {}),
        ("a must be bfloat16 or float16", (x.float(), w, s), {}),
        ("a must be contiguous along its last dimension", (x.t().contiguous().t(), w, s), {}),
        (r"b must have shape \[192, 256\]", (x, w[:, :100], s), {}),
        (r"b_scales must have shape \[192, 32\]", (x, w, s[:, :16]), {}),
        ("b_scales must be contiguous", (x, w, torch.cat([s, s], 1)[:, 32:]), {}),
        ("b_global_scale must be positive", (x, w, s, -1.0), {}),
        ("b_global_scale must be positive", (x, w, s, float("nan")), {}),
        ("a_scales and a_global_scale must be None", (x, w, s), dict(a_global_scale=1.0)),
        (r"bias must have shape \[192\]", (x, w, s), dict(bias=torch.zeros(5, dtype=torch.bfloat16, device=DEV))),
        ("n must be given with b_prepacked", (x, nvfp4_jit.prepack(w, s)), dict(b_prepacked=True)),
        ("b_scale_layout must be one of", (x, w, s), dict(b_scale_layout="swizzled")),
        (r"out must have shape \[7, 192\]", (x, w, s), dict(out=torch.empty(7, 100, dtype=torch.bfloat16, device=DEV))),
        ("out_dtype must be bfloat16, float16 or float32", (x, w, s), dict(out=torch.empty(7, N, dtype=torch.int32,
                                                                                             device=DEV))),
        ("out must be on a CUDA device", (x, w, s), dict(out=torch.empty(7, N, dtype=torch.bfloat16))),
    ]
    for message, args, kw in bad_calls:
        assert gemm_fast(*args, **kw) is NotImplemented, f"the fast path took a call the checks reject: {message}"
        with pytest.raises((nvfp4_jit.InvalidArgument, TypeError), match=message):
            nvfp4_jit.gemm(*args, **kw)
    with pytest.raises(nvfp4_jit.InvalidArgument, match="scale_mode must be one of"):
        nvfp4_jit.quantize(x, scale_mode="given")
    assert _C.quantize_checked(x, None, "given", "linear", None, None, None) is NotImplemented
    assert _C.quantize_checked(x, 0.0, "per_tensor", "linear", None, None, None) is NotImplemented
    q = torch.empty(7, K // 2, dtype=torch.uint8, device=DEV)
    with pytest.raises(nvfp4_jit.InvalidArgument, match="out_global_scale must be given"):
        nvfp4_jit.quantize(x, out=q, out_scales=torch.empty(7, K // 16, dtype=torch.float8_e4m3fn, device=DEV))


def test_the_eager_functions_take_the_fast_path(monkeypatch):
    taken = []
    for name in ("gemm_checked", "quantize_checked", "dequantize_checked"):
        def spy(*args, real=getattr(_C, name), name=name):
            r = real(*args)
            taken.append((name, r is not NotImplemented))
            return r
        monkeypatch.setattr(_C, name, spy)
    w, s = nvfp4_weight(N, K)
    x = activations(4, K)
    q, sc, g = nvfp4_jit.quantize(x)
    nvfp4_jit.gemm(x, w, s, 0.5)
    nvfp4_jit.gemm(q, w, s, 0.5, a_scales=sc, a_global_scale=g)
    nvfp4_jit.dequantize(w, s, 0.5)
    assert taken == [("quantize_checked", True), ("gemm_checked", True), ("gemm_checked", True),
                     ("dequantize_checked", True)]
