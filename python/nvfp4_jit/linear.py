"""Nvfp4Linear: a ModelOpt NVFP4 linear layer served by gemm, its weight prepacked at load."""
from typing import Optional

import torch
from torch import Tensor

from . import _C, ops
from ._core import DTYPES, GEMM_PRECISIONS, SCALE_LAYOUTS, SCALE_MODES, bad, fields
from .ops._launch import _launch
from .ops._tensors import _ACT, _E4M3, _FP4, _gs_values, _gscale, _ptr, _scale_shape, _tensor
from .ops.matmul import _GEMM, _GEMM_WORKSPACE_BYTES, _fusion_fields
from .ops.quant import _QUANTIZE
from .ops.tuning import _prewarm_variants

_MODES = ("w4a16", "w4a4", "w4a8")
_FROM_MODELOPT = fields("from_modelopt")


def from_modelopt(weight, weight_scale, weight_scale_2, input_scale=None, *, scale_layout="linear"):
    """The library's check of a ModelOpt NVFP4 layer's tensors (weight uint8 / float4_e2m1fn_x2
    [n, k/2], weight_scale float8_e4m3fn [n, k/16], weight_scale_2 and input_scale fp32 scalars)
    -> the weight scales gemm reads: weight_scale itself when linear (nothing is copied), or
    rewritten once into swizzled128x4."""
    op = "from_modelopt"
    weight = _tensor(weight, op, "weight", _FP4)
    n, k = weight.shape[0], 2 * weight.shape[1]
    dev = weight.get_device()
    _tensor(weight_scale, op, "weight_scale", _E4M3, 2, dev)
    layout = SCALE_LAYOUTS.get(scale_layout)
    if layout is None:
        bad(op, f"scale_layout must be 'linear' or 'swizzled128x4', got {scale_layout!r}")
    g2, g2_value = _gscale(weight_scale_2, op, "weight_scale_2", dev, 1)
    gi, gi_value = _gscale(input_scale, op, "input_scale", dev, 1)
    swizzled = None
    if layout == SCALE_LAYOUTS["swizzled128x4"]:
        swizzled = weight_scale.new_empty(_scale_shape(n, k, layout), dtype=torch.float8_e4m3fn)
    g2_value, g2_ptr, g2_per_row = _gs_values(g2, g2_value)
    gi_value, gi_ptr, gi_per_row = _gs_values(gi, gi_value)
    _launch(_C.from_modelopt, dev, _FROM_MODELOPT({
        "n": n, "k": k, "weight": weight.data_ptr(), "weight_scale": weight_scale.data_ptr(),
        "weight_scale_2.value": g2_value, "weight_scale_2.device_ptr": g2_ptr, "weight_scale_2.per_row": g2_per_row,
        "input_scale.value": gi_value, "input_scale.device_ptr": gi_ptr, "input_scale.per_row": gi_per_row,
        "layout": layout, "swizzled_scales": _ptr(swizzled)}))
    return weight_scale if swizzled is None else swizzled


def quantize_modelopt(w: Tensor):
    """A float weight [n, k] quantized as ModelOpt stores it, by this library's quantizer:
    {'weight': uint8 [n, k/2], 'weight_scale': float8_e4m3fn [n, k/16], 'weight_scale_2': fp32
    scalar = amax / (6 * 448)}."""
    q, scales, g = ops.quantize(w.contiguous(), scale_mode="per_tensor")
    return {"weight": q, "weight_scale": scales, "weight_scale_2": g.reshape(())}


class Nvfp4Linear(torch.nn.Module):
    """y = x . W^T (+ bias) with W a ModelOpt NVFP4 weight, prepacked once at load.

    mode 'w4a16': x (bf16 / fp16) multiplies the weight directly. mode 'w4a4': x is first
    quantized with the checkpoint's input_scale (as ModelOpt serves it), then multiplied.
    mode 'w4a8' (sm_90a): as w4a16, but batches of more than 256 rows run on FP8 tensor cores
    (gemm's precision="w4a8": about 2.5% relative error, see docs/formats.md).
    The global scales stay fp32 tensors on the device, so a captured CUDA graph sees a new
    value copied into them. In eager mode forward takes a raw path: the weight's part of the
    call is built once and only x is read per call.
    """

    def __init__(self, packed: Tensor, n: int, k: int, weight_scale_2: Tensor, input_scale: Optional[Tensor] = None,
                 bias: Optional[Tensor] = None, mode: str = "w4a16", weights_static: bool = True):
        super().__init__()
        if mode not in _MODES:
            bad("Nvfp4Linear", f"mode must be one of {', '.join(repr(m) for m in _MODES)}, got {mode!r}")
        if mode == "w4a4" and input_scale is None:
            bad("Nvfp4Linear", "mode 'w4a4' needs the checkpoint's input_scale")
        self.in_features, self.out_features, self.mode, self.weights_static = k, n, mode, weights_static
        self.register_buffer("packed", packed)
        self.register_buffer("weight_scale_2", weight_scale_2.reshape(1).to(torch.float32))
        self.register_buffer("input_scale", None if input_scale is None else input_scale.reshape(1).to(torch.float32))
        self.register_buffer("bias", bias)
        self._raw = None  # (the packed weight's address it was built for, device index, the weight's GemmArgs fields)

    @classmethod
    def from_modelopt(cls, weight, weight_scale, weight_scale_2, input_scale=None, bias=None, mode="w4a16",
                      weights_static=True):
        """A layer from the checkpoint's tensors (on the GPU it will run on): checked by the
        library, prepacked (one GPU pass, then synchronized, so weights_static holds)."""
        scales = from_modelopt(weight, weight_scale, weight_scale_2, input_scale)
        n, k = weight.shape[0], 2 * weight.shape[1]
        dev = weight.device
        to_dev = lambda t: t if t is None or isinstance(t, (int, float)) else t.to(dev, torch.float32)  # noqa: E731
        g2 = to_dev(torch.as_tensor(weight_scale_2, dtype=torch.float32))
        gi = None if input_scale is None else to_dev(torch.as_tensor(input_scale, dtype=torch.float32))
        packed = ops.prepack(weight, scales)
        torch.cuda.synchronize(dev)
        return cls(packed, n, k, g2, gi, bias, mode, weights_static)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, mode={self.mode}, bias={self.bias is not None}"

    def forward(self, x: Tensor) -> Tensor:
        if (type(x) is Tensor and x.dtype in _RAW_DTYPES and x.is_cuda and x.shape[-1] == self.in_features
                and x.stride()[-1] == 1 and not torch.compiler.is_compiling()):
            return self._raw_forward(x)
        return self._forward(x.reshape(-1, self.in_features)).reshape(*x.shape[:-1], self.out_features)

    def _forward(self, x2):
        common = dict(b_prepacked=True, n=self.out_features, bias=self.bias, weights_static=self.weights_static)
        if self.mode != "w4a4":
            return ops.gemm(x2, self.packed, None, self.weight_scale_2, precision=self._precision(), **common)
        q, s, _ = ops.quantize(x2, self.input_scale)
        return ops.gemm(q, self.packed, None, self.weight_scale_2, a_scales=s, a_global_scale=self.input_scale,
                        out_dtype=x2.dtype, **common)

    def _raw_forward(self, x):
        """gemm (and for w4a4 quantize) straight through the binding: what does not depend on x
        was checked and built at load; the library checks the rest."""
        packed = self.packed
        raw = self._raw
        if raw is None or raw[0] != packed.data_ptr():
            raw = self._raw = self._raw_fields(packed)
        _, dev, weight = raw
        x2 = x if x.dim() == 2 else x.reshape(-1, self.in_features)
        if x2.get_device() != dev:
            return self._forward(x2)  # the checked path names the device mismatch
        m, k, n = x2.shape[0], self.in_features, self.out_features
        out = x2.new_empty((m, n))
        dt = _RAW_DTYPES[x2.dtype]
        if self.mode != "w4a4":
            a = {"a": x2.data_ptr(), "a_dtype": dt, "a_row_stride": x2.stride()[0], **_NO_A_FP4}
            if self.mode == "w4a8" and m > _W4A8_EXACT_ROWS:  # the E4M3 activations' workspace
                fields = {**weight, "m": m, "n": n, "k": k, **a, "d": out.data_ptr(), "d_dtype": dt, "d_row_stride": n}
                ws = x2.new_empty((_C.gemm_workspace_bytes(*_GEMM_WORKSPACE_BYTES(fields)),), dtype=torch.uint8)
                a.update({"workspace": ws.data_ptr(), "workspace_bytes": ws.numel()})
        else:
            q = x2.new_empty((m, k // 2), dtype=torch.uint8)
            s = x2.new_empty((m, k // 16), dtype=torch.float8_e4m3fn)
            gi = self.input_scale.data_ptr()
            _launch(_C.quantize, dev, _QUANTIZE({
                "in": x2.data_ptr(), "in_dtype": dt, "in_row_stride": x2.stride()[0], "rows": m, "k": k,
                "out": q.data_ptr(), "out_row_stride_bytes": k // 2, "scales": s.data_ptr(), "scale_layout": _LINEAR,
                "scale_mode": _GIVEN, "global_scale.value": 1.0, "global_scale.device_ptr": gi,
                "global_scale.per_row": False, "global_scale_out": 0}))
            ws = x2.new_empty((m * k * 2,), dtype=torch.uint8)
            a = {"a": 0, "a_dtype": DTYPES["nvfp4"], "a_row_stride": 0, "a_fp4.data": q.data_ptr(),
                 "a_fp4.row_stride_bytes": k // 2, "a_fp4.scales": s.data_ptr(), "a_fp4.scale_layout": _LINEAR,
                 "a_fp4.global_scale.value": 1.0, "a_fp4.global_scale.device_ptr": gi,
                 "a_fp4.global_scale.per_row": False, "workspace": ws.data_ptr(), "workspace_bytes": ws.numel()}
        _launch(_C.gemm, dev, _GEMM({**weight, "m": m, "n": n, "k": k, **a, "d": out.data_ptr(), "d_dtype": dt,
                                     "d_row_stride": n}))
        return out if x.dim() == 2 else out.view(*x.shape[:-1], n)

    def _raw_fields(self, packed):
        """(packed address, device index, the GemmArgs fields that do not depend on x: the weight's,
        bias, alpha and flags)."""
        bias = self.bias
        weight = {"b.data": packed.data_ptr(), "b.row_stride_bytes": 0, "b.scales": 0, "b.scale_layout": _LINEAR,
                  "b.global_scale.value": 1.0, "b.global_scale.device_ptr": self.weight_scale_2.data_ptr(),
                  "b.global_scale.per_row": False, "bias": _ptr(bias),
                  "bias_dtype": _ACT[bias.dtype] if bias is not None else 0, "alpha": 1.0, "b_prepacked": True,
                  "weights_static": self.weights_static, "epilogue": 0, "precision": GEMM_PRECISIONS[self._precision()],
                  "b_swiglu_interleave": 0, **_fusion_fields()}
        return packed.data_ptr(), packed.get_device(), weight

    def _precision(self):
        return "w4a8" if self.mode == "w4a8" else "exact"

    @torch.no_grad()
    def prewarm(self, ms=(1,), dtype=torch.bfloat16, load=False):
        """Loads the kernels forward runs for each batch size in `ms` (one call each on random
        input, then a synchronize), so a CUDA graph captured afterwards finds them. load=True:
        no call; the library's prewarm of this layer's variant (its quantize too in w4a4) loads
        them for every batch size (`ms` unused) and returns how many are loaded."""
        if load:
            w4a4 = self.mode == "w4a4"
            variants = _prewarm_variants("nvfp4" if w4a4 else dtype, dtype, "linear", True,
                                         None if self.bias is None else self.bias.dtype, in_dtype=dtype)
            variants += f" precision={self._precision()}"
            return ops.prewarm_load(self.packed.device, self.out_features, self.in_features, variants)
        for m in ms:
            self(torch.randn(m, self.in_features, dtype=dtype, device=self.packed.device))
        torch.cuda.synchronize(self.packed.device)


_RAW_DTYPES = {torch.bfloat16: DTYPES["bf16"], torch.float16: DTYPES["fp16"]}
# gemm runs precision="w4a8" calls of at most this many rows in the exact mode, which needs no
# workspace (kW4A8ExactRows in src/ops/gemm/call.hpp; were it to differ, a call given none
# allocates its own on the stream)
_W4A8_EXACT_ROWS = 256
_LINEAR, _GIVEN = SCALE_LAYOUTS["linear"], SCALE_MODES["given"]
# W4A16: GemmArgs' NVFP4 activation fields unused
_NO_A_FP4 = {"a_fp4.data": 0, "a_fp4.row_stride_bytes": 0, "a_fp4.scales": 0, "a_fp4.scale_layout": _LINEAR,
             "a_fp4.global_scale.value": 1.0, "a_fp4.global_scale.device_ptr": 0, "a_fp4.global_scale.per_row": False,
             "workspace": 0, "workspace_bytes": 0}
