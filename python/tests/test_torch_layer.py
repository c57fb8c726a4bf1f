"""The torch layer without a GPU: argument checks (their messages name the argument), the
custom ops' schemas and fake implementations (what torch.compile traces)."""
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed here: the torch layer runs on the GPU machine")
import nvfp4_jit  # noqa: E402

pytestmark = pytest.mark.torch_layer


def fake():
    from torch._subclasses.fake_tensor import FakeTensorMode
    return FakeTensorMode()


def cuda_fakes(*shapes_dtypes):
    """Fake CUDA tensors: no GPU needed to trace shapes."""
    with fake():
        return [torch.empty(s, dtype=d, device="cuda") for s, d in shapes_dtypes]


def test_every_op_is_registered_with_its_out_form():
    for name in ["gemm", "grouped_gemm", "quantize", "rmsnorm_quantize", "swiglu_quantize", "moe_stage", "dequantize",
                 "convert_scales", "prepack", "moe_route", "moe_combine", "mhc_rmsnorm_quantize"]:
        assert hasattr(torch.ops.nvfp4_jit, name) and hasattr(torch.ops.nvfp4_jit, name + "_out"), name


def test_checks_name_the_argument():
    x = torch.randn(4, 64)
    with pytest.raises(nvfp4_jit.InvalidArgument, match=r"nvfp4_jit.quantize: x must be on a CUDA device"):
        nvfp4_jit.quantize(x)
    with pytest.raises(nvfp4_jit.InvalidArgument, match=r"x must be bfloat16 or float16 or float32, got int32"):
        nvfp4_jit.quantize(torch.zeros(4, 64, dtype=torch.int32))
    with pytest.raises(TypeError, match="a must be a torch.Tensor"):
        nvfp4_jit.gemm([1, 2], None)


def test_fake_shapes_of_the_quantizers():
    with fake():
        x = torch.empty(5, 256, dtype=torch.bfloat16, device="cuda")
        w = torch.empty(256, dtype=torch.bfloat16, device="cuda")
        q, s, g = nvfp4_jit.quantize(x, scale_mode="per_row")
        assert (q.shape, q.dtype, s.shape, s.dtype, g.shape) == ((5, 128), torch.uint8, (5, 16), torch.float8_e4m3fn, (5,))
        q, s, g = nvfp4_jit.quantize(x, 0.5, scale_layout="swizzled128x4")
        assert s.shape == (128, 16) and s.numel() == nvfp4_jit.scale_bytes(5, 256, "swizzled128x4") and g == 0.5
        q, s, g, normed, inv = nvfp4_jit.rmsnorm_quantize(x, w, 1e-5, return_normed=True, return_inv_rms=True)
        assert normed.shape == (5, 256) and inv.shape == (5,) and g.shape == (5,)
        q, s, g = nvfp4_jit.swiglu_quantize(x)
        assert q.shape == (5, 64) and s.shape == (5, 8)
        ids = torch.empty(5, 8, dtype=torch.int32, device="cuda")
        out = nvfp4_jit.moe_stage(x, ids, torch.empty(5, 8, device="cuda"))
        assert out[3].shape == (5, 8) and out[4].dtype == torch.float32


def test_fake_shapes_of_the_gemms():
    with fake():
        a = torch.empty(7, 256, dtype=torch.bfloat16, device="cuda")
        b = torch.empty(96, 128, dtype=torch.uint8, device="cuda")
        s = torch.empty(96, 16, dtype=torch.float8_e4m3fn, device="cuda")
        g = torch.empty((), dtype=torch.float32, device="cuda")
        y = nvfp4_jit.gemm(a, b, s, g, out_dtype=torch.float32)
        assert y.shape == (7, 96) and y.dtype == torch.float32
        b3 = torch.empty(4, 96, 128, dtype=torch.uint8, device="cuda")
        s3 = torch.empty(4, 96, 16, dtype=torch.float8_e4m3fn, device="cuda")
        ends = torch.empty(4, dtype=torch.int32, device="cuda")
        assert nvfp4_jit.grouped_gemm(a, b3, s3, 1.0, group_ends=ends).shape == (7, 96)
        a3 = torch.empty(4, 3, 256, dtype=torch.bfloat16, device="cuda")
        assert nvfp4_jit.grouped_gemm(a3, b3, s3, 1.0, masked_m=ends).shape == (4, 3, 96)
        p = torch.empty(nvfp4_jit.prepacked_bytes(96, 256), dtype=torch.uint8, device="cuda")
        assert nvfp4_jit.gemm(a, p, None, g, b_prepacked=True, n=96).shape == (7, 96)
        assert nvfp4_jit.gemm(a, p, None, g, b_prepacked=True, n=96, epilogue="swiglu").shape == (7, 48)
        assert nvfp4_jit.grouped_gemm(a, p.repeat(4), None, 1.0, group_ends=ends, b_prepacked=True, n=96,
                                      epilogue="swiglu").shape == (7, 48)
        assert nvfp4_jit.gemm(a, p, None, g, b_prepacked=True, n=96, precision="w4a8").shape == (7, 96)
        assert nvfp4_jit.prepack(b, s).shape == p.shape
        assert nvfp4_jit.dequantize(b, s, g, dtype=torch.float16).shape == (96, 256)


def test_fake_shapes_of_the_blocks_and_their_checks():
    hidden, inter, count = 256, 128, 3
    gu_bytes, down_bytes = nvfp4_jit.prepacked_bytes(2 * inter, hidden), nvfp4_jit.prepacked_bytes(hidden, inter)
    with fake():
        x = torch.empty(5, hidden, dtype=torch.bfloat16, device="cuda")
        ids = torch.empty(5, 2, dtype=torch.int32, device="cuda")
        wts = torch.empty(5, 2, dtype=torch.float32, device="cuda")
        gu = torch.empty(count * gu_bytes, dtype=torch.uint8, device="cuda")
        down = torch.empty(count * down_bytes, dtype=torch.uint8, device="cuda")
        y = nvfp4_jit.moe_block(x, ids, wts, gu, down, intermediate=inter)
        assert y.shape == (5, hidden) and y.dtype == torch.bfloat16
        y = nvfp4_jit.mlp_block(x, gu[:gu_bytes], down[:down_bytes], intermediate=inter, residual=x, out=x)
        assert y is x
        with pytest.raises(nvfp4_jit.InvalidArgument, match=r"nvfp4_jit.moe_block: down holds 2 experts of 256 x 128"):
            nvfp4_jit.moe_block(x, ids, wts, gu, down[:2 * down_bytes], intermediate=inter)
        with pytest.raises(nvfp4_jit.InvalidArgument, match="gate_up holds .* not a whole number of 256 x 256 experts"):
            nvfp4_jit.moe_block(x, ids, wts, gu[:-1], down, intermediate=inter)
        with pytest.raises(nvfp4_jit.InvalidArgument, match="gate_up and down must each hold one prepacked weight"):
            nvfp4_jit.mlp_block(x, gu, down, intermediate=inter)
        with pytest.raises(nvfp4_jit.InvalidArgument, match="gate_up must be a 1-D uint8 tensor"):
            nvfp4_jit.mlp_block(x, gu.view(count, -1), down, intermediate=inter)


def test_gemm_checks_shapes_against_each_other():
    with fake():
        a = torch.empty(7, 256, dtype=torch.bfloat16, device="cuda")
        b = torch.empty(96, 100, dtype=torch.uint8, device="cuda")
        s = torch.empty(96, 16, dtype=torch.float8_e4m3fn, device="cuda")
        with pytest.raises(nvfp4_jit.InvalidArgument, match=r"gemm: b must have shape \[96, 128\], got \[96, 100\]"):
            nvfp4_jit.gemm(a, b, s)
        b = torch.empty(96, 128, dtype=torch.uint8, device="cuda")
        with pytest.raises(nvfp4_jit.InvalidArgument, match=r"b_scales must have shape \[96, 16\]"):
            nvfp4_jit.gemm(a, b, s[:, :8])
        with pytest.raises(nvfp4_jit.InvalidArgument, match=r"bias must have shape \[96\]"):
            nvfp4_jit.gemm(a, b, s, bias=torch.empty(95, dtype=torch.bfloat16, device="cuda"))
        with pytest.raises(nvfp4_jit.InvalidArgument, match="a_scales .* must be given"):
            nvfp4_jit.gemm(torch.empty(7, 128, dtype=torch.uint8, device="cuda"), b, s)
        with pytest.raises(nvfp4_jit.InvalidArgument, match="n must be given with b_prepacked"):
            nvfp4_jit.gemm(a, b, None, b_prepacked=True)
        with pytest.raises(nvfp4_jit.InvalidArgument, match="b_global_scale must be positive"):
            nvfp4_jit.gemm(a, b, s, -1.0)
        with pytest.raises(nvfp4_jit.InvalidArgument, match=r"a must be contiguous along its last dimension"):
            nvfp4_jit.gemm(torch.empty(256, 7, dtype=torch.bfloat16, device="cuda").t(), b, s)
        for g in (2.0, True, "2"):
            with pytest.raises(nvfp4_jit.InvalidArgument, match=r"gemm: b_swiglu_interleave must be an int"):
                nvfp4_jit.gemm(a, b, s, epilogue="swiglu", b_swiglu_interleave=g)
        with pytest.raises(nvfp4_jit.InvalidArgument, match=r"grouped_gemm: b_swiglu_interleave must be an int"):
            nvfp4_jit.grouped_gemm(a, b.reshape(1, 96, 128), s.reshape(1, 96, 16),
                                   group_ends=torch.empty(1, dtype=torch.int32, device="cuda"), b_swiglu_interleave=None)
        # an interleaved gate_up weight as stored traces to its [m, I] output
        assert nvfp4_jit.gemm(a, b, s, epilogue="swiglu", b_swiglu_interleave=8).shape == (7, 48)


def test_float4_and_float8_tensors_are_accepted_as_modelopt_stores_them():
    if not hasattr(torch, "float4_e2m1fn_x2"):
        pytest.skip("this torch has no float4_e2m1fn_x2")
    with fake():
        a = torch.empty(3, 256, dtype=torch.bfloat16, device="cuda")
        b = torch.empty(64, 128, dtype=torch.float4_e2m1fn_x2, device="cuda")
        s = torch.empty(64, 16, dtype=torch.float8_e4m3fn, device="cuda")
        assert nvfp4_jit.gemm(a, b, s, 2.0).shape == (3, 64)


def test_fake_shapes_of_the_routing_ops_and_mhc():
    with fake():
        ids = torch.empty(6, 4, dtype=torch.int64, device="cuda")
        ends, row_index, positions, counts = nvfp4_jit.moe_route(ids, 8)
        assert (ends.shape, row_index.shape, positions.shape, counts.shape) == ((8,), (24,), (6, 4), (8,))
        d = torch.empty(24, 96, dtype=torch.bfloat16, device="cuda")
        y = nvfp4_jit.moe_combine(d, positions, torch.empty(6, 4, device="cuda"), out_dtype=torch.float32)
        assert y.shape == (6, 96) and y.dtype == torch.float32
        x = torch.empty(5, 3, 256, dtype=torch.bfloat16, device="cuda")
        q, s, g, h, normed, inv = nvfp4_jit.mhc_rmsnorm_quantize(x, torch.empty(5, 3, device="cuda"),
                                                                 torch.empty(256, dtype=torch.bfloat16, device="cuda"),
                                                                 return_h=True, return_inv_rms=True)
        assert q.shape == (5, 128) and h.shape == (5, 256) and normed is None and inv.shape == (5,)
        out = nvfp4_jit.moe_stage(torch.empty(6, 256, dtype=torch.bfloat16, device="cuda"), ids, ids_dtype=torch.int32)
        assert out[3].dtype == torch.int32 and out[3].shape == (6, 4)
        a = torch.empty(6, 128, dtype=torch.uint8, device="cuda")
        b3 = torch.empty(8, 96, 128, dtype=torch.uint8, device="cuda")
        s3 = torch.empty(8, 96, 16, dtype=torch.float8_e4m3fn, device="cuda")
        y = nvfp4_jit.grouped_gemm(a, b3, s3, 1.0, group_ends=ends, a_scales=torch.empty(6, 16, dtype=torch.float8_e4m3fn,
                                   device="cuda"), a_global_scale=torch.empty(8, device="cuda"),
                                   a_global_scale_per_group=True, row_index=row_index)
        assert y.shape == (24, 96)


def test_checks_of_the_routing_ops_name_the_argument():
    with fake():
        with pytest.raises(nvfp4_jit.InvalidArgument, match="topk_ids must be int32 or int64, got float32"):
            nvfp4_jit.moe_route(torch.empty(6, 4, device="cuda"), 8)
        d = torch.empty(24, 96, dtype=torch.bfloat16, device="cuda")
        with pytest.raises(nvfp4_jit.InvalidArgument, match=r"weights must have shape \[6, 4\]"):
            nvfp4_jit.moe_combine(d, torch.empty(6, 4, dtype=torch.int32, device="cuda"), torch.empty(6, 3, device="cuda"))
        with pytest.raises(nvfp4_jit.InvalidArgument, match=r"mix must have shape \[5, 3\]"):
            nvfp4_jit.mhc_rmsnorm_quantize(torch.empty(5, 3, 256, dtype=torch.bfloat16, device="cuda"),
                                           torch.empty(5, 2, device="cuda"),
                                           torch.empty(256, dtype=torch.bfloat16, device="cuda"))


def test_every_launch_fills_exactly_the_binding_fields(monkeypatch):
    """Each op's binding call built from CPU tensors (the launch recorded, not run): the packers
    check every name against _C.fields, and the values land in the fields they belong to."""
    from nvfp4_jit import _C
    from nvfp4_jit.ops import dequant, layouts, matmul, moe, quant
    calls = {}

    def record(fn, index, args):
        calls[fn.__name__] = dict(zip(_C.fields(fn.__name__), args))

    for module in (dequant, layouts, matmul, moe, quant):
        monkeypatch.setattr(module, "_launch", record)
    for query in ("gemm_workspace_bytes", "grouped_gemm_workspace_bytes", "moe_route_workspace_bytes"):
        monkeypatch.setattr(_C, query, lambda *args, query=query: calls.setdefault(query, dict(
            zip(_C.fields(query), args))) and 64)
    for checked in ("gemm_checked", "quantize_checked", "dequantize_checked"):
        monkeypatch.setattr(_C, checked, lambda *args: NotImplemented)
    bf16, u8, e4m3, i32 = torch.bfloat16, torch.uint8, torch.float8_e4m3fn, torch.int32
    x = torch.zeros(4, 64, dtype=bf16)
    w, ws = torch.zeros(64, dtype=bf16), torch.zeros(4, dtype=torch.float32)
    q, s = torch.zeros(4, 32, dtype=u8), torch.zeros(4, 4, dtype=e4m3)
    ids = torch.zeros(4, 2, dtype=torch.int64)
    quant._quantize(x, None, 0.5, 0, 2)
    quant._rmsnorm_quantize(x, w, 1e-6, None, 1.0, 0, 2, True, False)
    quant._swiglu_quantize(torch.zeros(4, 128, dtype=bf16), 0, None, 1.0, 0, 2)
    quant._mhc_rmsnorm_quantize(torch.zeros(4, 2, 64, dtype=bf16), torch.zeros(4, 2), w, 1e-6, None, 1.0, 1, 2, True,
                                False, True)
    moe._moe_stage(x, ids, torch.zeros(4, 2), None, 1.0, 0, 2, i32)
    moe._moe_route(ids, 3, 1)
    moe._moe_combine(torch.zeros(8, 64, dtype=bf16), torch.zeros(4, 2, dtype=i32), torch.zeros(4, 2), torch.float32)
    dequant._dequantize(q, s, ws, 1.0, 64, 0, bf16, torch.zeros(3, dtype=i32))
    layouts._convert_scales(s, 4, 64, 0, 1)
    layouts._prepack(q, s, 0, 4)
    b = torch.zeros(96, 32, dtype=u8)
    norm_w, residual = torch.zeros(64), torch.zeros(4, 48, dtype=bf16)
    y = matmul._gemm(q, s, ws, 1.0, 0, b, torch.zeros(96, 4, dtype=e4m3), None, 0.25, 0, False, 96, 64, None, 0.5, bf16,
                     True, 1, 0, norm_w, 1e-5, residual, 8)
    matmul._grouped_gemm(x, None, None, 1.0, 0, torch.zeros(2, 96, 32, dtype=u8), torch.zeros(2, 96, 4, dtype=e4m3), None,
                         1.0, 0, False, 96, 64, None, 1.0, bf16, False, 2, 1, torch.zeros(2, dtype=i32), None, 0, False,
                         None, 0, 1, 16)
    assert set(calls) == {"quantize", "rmsnorm_quantize", "swiglu_quantize", "mhc_rmsnorm_quantize", "moe_stage",
                          "moe_route", "moe_route_workspace_bytes", "moe_combine", "dequantize", "convert_scales",
                          "prepack", "gemm", "gemm_workspace_bytes", "grouped_gemm", "grouped_gemm_workspace_bytes"},\
        sorted(calls)
    g = calls["gemm"]
    assert (g["m"], g["n"], g["k"], g["d"], g["alpha"], g["b.global_scale.value"]) == (4, 96, 64, y.data_ptr(), 0.5, 0.25)
    assert (g["a"], g["a_fp4.data"], g["a_fp4.scales"], g["a_fp4.global_scale.device_ptr"]) == (
        0, q.data_ptr(), s.data_ptr(), ws.data_ptr())
    assert g["a_fp4.global_scale.per_row"] and g["weights_static"] and g["workspace_bytes"] == 64
    assert g["epilogue"] == 1 and y.shape == (4, 48) and g["d_row_stride"] == 48  # SwiGLU: I = n/2 columns
    assert (g["a_rmsnorm_weight"], g["a_rmsnorm_weight_fp32"], g["a_rmsnorm_eps"]) == (norm_w.data_ptr(), True, 1e-5)
    assert (g["residual"], g["residual_row_stride"]) == (residual.data_ptr(), 48)
    assert g["b_swiglu_interleave"] == 8 and calls["grouped_gemm"]["b_swiglu_interleave"] == 16
    assert calls["grouped_gemm"]["combine.positions"] == 0 and calls["grouped_gemm"]["combine.out"] == 0
    assert calls["grouped_gemm"]["precision"] == 1 and calls["prepack"]["swiglu_interleave"] == 4
    assert calls["quantize"]["in"] == x.data_ptr() and calls["quantize"]["global_scale.value"] == 0.5
    assert calls["dequantize"]["rows"] == 3 and calls["dequantize"]["src.global_scale.per_row"]
    assert calls["grouped_gemm"]["groups"] == 2 and calls["grouped_gemm"]["a"] == x.data_ptr()
    assert calls["moe_route"]["workspace_bytes"] == 64 and calls["moe_route"]["first_expert"] == 1
