"""nvfp4_jit: NVFP4 kernels generated at run time, on torch tensors.

Without torch the binding's torch-free part is here (version, sizes, cache info, errors) and
`nvfp4_jit.cpu` holds the CPU references on numpy arrays. With torch: the ops (also as
torch.ops.nvfp4_jit.*, with fake implementations for torch.compile) and Nvfp4Linear.
"""
try:  # first: torch's own CUDA libraries (its NVRTC among them) then serve the library's needs
    import torch  # noqa: F401
except ImportError:  # the torch layer needs torch; the rest does not
    HAS_TORCH = False
else:
    HAS_TORCH = True

from . import _nvrtc  # noqa: E402

_nvrtc.preload()  # before the binding: the library then finds the nvrtc extra's NVRTC

from ._core import (DTYPES, SCALE_LAYOUTS, SCALE_MODES, Error, InvalidArgument, NotLoadedInCapture,  # noqa: E402,F401
                    Unsupported, cache_info, prepacked_bytes, scale_bytes, version)

__version__ = version()

if HAS_TORCH:
    from .linear import Nvfp4Linear, from_modelopt, quantize_modelopt  # noqa: F401
    from .ops import (convert_scales, dequantize, gemm, grouped_gemm, mhc_rmsnorm_quantize, moe_combine, moe_route,  # noqa: F401
                      moe_stage, prepack, prewarm,
                      quantize, rmsnorm_quantize, swiglu_quantize, tune)
