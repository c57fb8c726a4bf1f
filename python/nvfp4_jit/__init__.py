"""nvfp4_jit: NVFP4 kernels generated at run time, on torch tensors.

Without torch the binding's torch-free part is here (version, sizes, cache and NVRTC info, errors,
and prewarm from a checkpoint: model_shapes, prewarm_model) and
`nvfp4_jit.cpu` holds the CPU references on numpy arrays. With torch: the ops (also as
torch.ops.nvfp4_jit.*, with fake implementations for torch.compile), Nvfp4Linear, and
mlp_block / moe_block (a decoder block composed of those ops).
"""
try:  # first: torch's own CUDA libraries (its NVRTC among them) then serve the library's needs
    import torch  # noqa: F401
except ImportError:  # the torch layer needs torch; the rest does not
    HAS_TORCH = False
else:
    HAS_TORCH = True

from ._core import (DTYPES, SCALE_LAYOUTS, SCALE_MODES, Error, InvalidArgument, NoDevice, NotLoadedInCapture,  # noqa: E402,F401,E501
                    Unsupported, cache_info, info, nvrtc_info, prepacked_bytes, scale_bytes, version)

from .deploy import model_shapes, prewarm_model  # noqa: E402,F401

__version__ = version()

if HAS_TORCH:
    from .blocks import mlp_block, moe_block  # noqa: F401
    from .linear import Nvfp4Linear, from_modelopt, quantize_modelopt  # noqa: F401
    from .ops import (convert_scales, dequantize, gemm, grouped_gemm, mhc_rmsnorm_quantize, moe_combine, moe_route,  # noqa: F401
                      moe_stage, prepack, prewarm,
                      quantize, rmsnorm_quantize, swiglu_quantize, tune)
