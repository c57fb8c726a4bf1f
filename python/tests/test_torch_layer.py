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
        assert nvfp4_jit.prepack(b, s).shape == p.shape
        assert nvfp4_jit.dequantize(b, s, g, dtype=torch.float16).shape == (96, 256)


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
