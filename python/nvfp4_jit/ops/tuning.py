"""tune (the fastest GEMM tile per M bucket, recorded in the cache root's tuning table) and
prewarm (a GEMM's kernels loaded before a CUDA graph is captured)."""
import torch

from .. import _C
from .._core import GEMM_EPILOGUES, GEMM_PRECISIONS, GROUPED_LAYOUTS, SCALE_LAYOUTS, Error, bad, enum_value, fields
from ..deploy import prewarm_shapes
from ._tensors import _ACT, _FP4, _NVFP4
from .layouts import convert_scales, prepack
from .matmul import gemm

_TUNE = fields("tune")
_A_RMSNORM = {"none": 0, "input": 1, "fp32": 2}  # gemm's a_rmsnorm_weight: none, in A's dtype, fp32


def _dtype_code(op, name, dtype):
    if dtype in (torch.uint8, "nvfp4") or dtype in _FP4:
        return _NVFP4
    if dtype not in _ACT:
        bad(op, f"{name} must be bfloat16, float16, float32 or 'nvfp4', got {dtype}")
    return _ACT[dtype]


def tune(n, k, *, a_dtype=torch.bfloat16, out_dtype=torch.bfloat16, scale_layout="linear", bias_dtype=None,
         b_prepacked=False, m=0, runs=10, a_scale_layout="swizzled128x4", groups=0, grouped_layout="contiguous",
         epilogue="none", precision="exact", a_rmsnorm="none", residual=False):
    """Times gemm's candidate tiles for the weight shape [n, k] on the current GPU per M bucket
    (or only m's bucket) and records the fastest in the cache root's tuning table, where every
    later gemm of that problem finds it. a_dtype "nvfp4" (W4A4) with a_scale_layout, the
    activation scales' layout (sm_120a's kernels read them). groups > 0: a grouped weight of that
    many experts (grouped_layout "contiguous" or "masked"), whose buckets are rows per expert
    (grouped_gemm's expected_m), up to 512. epilogue / precision: as in gemm (both need
    b_prepacked). a_rmsnorm ("input": gemm's a_rmsnorm_weight in A's dtype, "fp32") and residual:
    the kernels of gemm with those. -> one dict per bucket (winner, heuristic, times)."""
    op = "tune"
    norm = enum_value(_A_RMSNORM, a_rmsnorm, op, "a_rmsnorm")
    layout = enum_value(SCALE_LAYOUTS, scale_layout, op, "scale_layout")
    a_layout = enum_value(SCALE_LAYOUTS, a_scale_layout, op, "a_scale_layout")
    g_layout = enum_value(GROUPED_LAYOUTS, grouped_layout, op, "grouped_layout")
    bias_code = _dtype_code(op, "bias_dtype", bias_dtype) if bias_dtype is not None else 0
    device = torch.cuda.current_device()
    # the library tunes in the thread's current CUDA context: a synchronize creates torch's
    # primary one and makes it current, even as the process's first CUDA call
    torch.cuda.synchronize(device)
    with torch.cuda.device(device):
        return _C.tune(*_TUNE({
            "n": int(n), "k": int(k), "a_dtype": _dtype_code(op, "a_dtype", a_dtype),
            "d_dtype": _dtype_code(op, "out_dtype", out_dtype), "scale_layout": layout, "has_bias": bias_dtype is not None,
            "bias_dtype": bias_code, "b_prepacked": bool(b_prepacked), "a_scale_layout": a_layout, "groups": int(groups),
            "grouped_layout": g_layout, "m": int(m), "runs": int(runs),
            "epilogue": enum_value(GEMM_EPILOGUES, epilogue, op, "epilogue"),
            "precision": enum_value(GEMM_PRECISIONS, precision, op, "precision"), "a_rmsnorm": norm > 0,
            "a_rmsnorm_weight_fp32": norm == 2, "residual": bool(residual)}))


def prewarm(n, k, ms=(1,), *, a_dtype=torch.bfloat16, out_dtype=None, scale_layout="linear", b_prepacked=False,
            bias_dtype=None, device=None, load=False, epilogue="none", precision="exact", a_rmsnorm="none",
            residual=False):
    """Loads (compiling where the disk cache misses) the kernels a gemm of weight shape [n, k]
    runs for each M in `ms`, by running it once on scratch tensors (random weight, unit scales)
    and synchronizing. A CUDA graph captured afterwards finds them loaded. For a layer in hand,
    Nvfp4Linear.prewarm(ms) does the same with its own weight. load=True: no call, no scratch
    tensors; the library's prewarm of this variant loads its kernels for every M (`ms` unused),
    W4A4's activations quantized with linear scales; returns how many are loaded. epilogue /
    precision: as in gemm (both need b_prepacked). a_rmsnorm / residual: as in tune."""
    op = "prewarm"
    modes = enum_value(GEMM_EPILOGUES, epilogue, op, "epilogue"), enum_value(GEMM_PRECISIONS, precision, op, "precision")
    norm = enum_value(_A_RMSNORM, a_rmsnorm, op, "a_rmsnorm")
    if any(modes) and not b_prepacked:
        bad(op, f"epilogue={epilogue!r} / precision={precision!r} run on prepacked weights: pass b_prepacked=True")
    device = torch.device("cuda", torch.cuda.current_device()) if device is None else torch.device(device)
    if load:
        return prewarm_load(device, n, k, _prewarm_variants(a_dtype, out_dtype, scale_layout, b_prepacked, bias_dtype)
                            + f" epilogue={epilogue} precision={precision} a-rmsnorm={a_rmsnorm}"
                            + f" residual={'add' if residual else 'none'}")
    gen = torch.Generator(device=device).manual_seed(0)
    b = torch.randint(0, 256, (n, k // 2), dtype=torch.uint8, device=device, generator=gen)
    scales = torch.full((n, k // 16), 0x38, dtype=torch.uint8, device=device).view(torch.float8_e4m3fn)
    if scale_layout != "linear":
        scales = convert_scales(scales, n, k, dst_layout=scale_layout)
    if b_prepacked:
        swiglu = 0 if epilogue == "swiglu" else None
        b, scales = prepack(b, scales, scale_layout=scale_layout, swiglu_interleave=swiglu), None
    bias = torch.zeros(n, dtype=bias_dtype, device=device) if bias_dtype is not None else None
    w4a4 = _dtype_code("prewarm", "a_dtype", a_dtype) == _NVFP4
    fused = {}
    if norm:
        fused["a_rmsnorm_weight"] = torch.ones(k, dtype=torch.float32 if norm == 2 else a_dtype, device=device)
    for m in ms:
        if w4a4:
            a = torch.randint(0, 256, (m, k // 2), dtype=torch.uint8, device=device, generator=gen)
            a_scales = torch.full((m, k // 16), 0x38, dtype=torch.uint8, device=device).view(torch.float8_e4m3fn)
            gemm(a, b, scales, 1.0, b_scale_layout=scale_layout, b_prepacked=b_prepacked, n=n, a_scales=a_scales,
                 a_global_scale=1.0, bias=bias, out_dtype=out_dtype, epilogue=epilogue, precision=precision)
        else:
            a = torch.randn(m, k, dtype=a_dtype, device=device, generator=gen)
            if residual:
                fused["residual"] = torch.zeros(m, n, dtype=out_dtype or a_dtype, device=device)
            gemm(a, b, scales, 1.0, b_scale_layout=scale_layout, b_prepacked=b_prepacked, n=n, bias=bias,
                 out_dtype=out_dtype, epilogue=epilogue, precision=precision, **fused)
    torch.cuda.synchronize(device)


def _prewarm_variants(a_dtype, out_dtype, scale_layout, b_prepacked, bias_dtype, in_dtype=torch.bfloat16):
    """The prewarm variant fields of one gemm (see `nvfp4-jit prewarm --help`)."""
    name = {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32"}
    w4a4 = _dtype_code("prewarm", "a_dtype", a_dtype) == _NVFP4
    layout = "prepacked" if b_prepacked else "swizzled" if scale_layout == "swizzled128x4" else "linear"
    fields = [f"a-dtype={'nvfp4' if w4a4 else name[a_dtype]}", f"d-dtype={name[out_dtype or torch.bfloat16]}",
              f"bias={'none' if bias_dtype is None else name[bias_dtype]}", f"b-layout={layout}", "a-scales=linear"]
    if w4a4:
        fields += ["a-from=quantize", f"in-dtype={name[in_dtype]}"]
    return " ".join(fields)


def prewarm_load(device, n, k, variants):
    """nvfp4::jit::prewarm with load for weight shape [n, k] and `variants` (manifest fields), into
    `device`'s context (torch's); returns how many kernels are loaded there."""
    with torch.cuda.device(torch.device(device)):
        r = prewarm_shapes("prewarm", "", 1, 1, [(int(n), int(k), 1)], None, 0, variants, 0, True)
    if r["failed"]:
        raise Error(f"nvfp4_jit.prewarm: {r['failed']} of {r['kernels']} kernels failed; the first: {r['errors'][0]}")
    return r["loaded"]
