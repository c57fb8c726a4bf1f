"""Binding calls on torch's current stream."""
import torch

from .._core import NotLoadedInCapture


def _launch(fn, index, args):
    """fn(*args, stream) on torch's current stream of CUDA device `index` (args: the binding
    method's fields, packed by _core.fields' packer of that method), with that device
    current (the library runs a call in its stream's context; torch's current stream of a device
    that is not current would still be another device's legacy stream)."""
    try:
        if torch._C._cuda_getDevice() == index:
            return fn(*args, torch._C._cuda_getCurrentRawStream(index))
        with torch.cuda.device(index):
            return fn(*args, torch._C._cuda_getCurrentRawStream(index))
    except NotLoadedInCapture as e:
        raise NotLoadedInCapture(f"{e} From Python: run the op once before capturing (the usual warm-up "
                                 f"pass), or nvfp4_jit.prewarm(...) / Nvfp4Linear.prewarm(...) for a GEMM.") from None
