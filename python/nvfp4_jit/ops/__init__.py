"""The ops on torch tensors, as torch.library custom ops (torch.ops.nvfp4_jit.*) and as a raw
eager path that skips the dispatcher.

Each op exists in three layers:
- `_<op>_args`: the public function's checks (shapes, dtypes, devices, strides; they run on
  fake tensors too, so torch.compile reports them while tracing) and its normalized arguments;
- `_<op>_alloc`: the outputs, allocated with `new_empty` (torch's caching allocator on the
  current device and stream; on fake tensors the fake implementation);
- `_<op>_launch`: the binding call on the tensors' addresses and torch's current stream.
The custom op `nvfp4_jit::<op>` allocates and launches; `nvfp4_jit::<op>_out` launches into
given outputs (CUDA-graph static buffers). The public `nvfp4_jit.<op>` calls the custom op
while torch.compile traces, and the same functions directly otherwise. Every binding call is
built from its fields by name (_core.fields), in the order the binding reads them.

One module a job: _tensors (reading and checking tensors), _registry (torch.library), _launch
(binding calls on torch's current stream), _qout (the quantizers' shared output), quant
(quantize and the fused quantizers), dequant, layouts (convert_scales, prepack), matmul (gemm,
grouped_gemm), moe (moe_stage, moe_route, moe_combine), tuning (tune, prewarm).
"""
from ._registry import _register_cuda_kernels
from .dequant import dequantize
from .layouts import convert_scales, prepack
from .matmul import gemm, grouped_gemm
from .moe import moe_combine, moe_route, moe_stage
from .quant import mhc_rmsnorm_quantize, quantize, rmsnorm_quantize, swiglu_quantize
from .tuning import prewarm, prewarm_load, tune

__all__ = ["convert_scales", "dequantize", "gemm", "grouped_gemm", "mhc_rmsnorm_quantize", "moe_combine", "moe_route",
           "moe_stage", "prepack", "prewarm", "prewarm_load", "quantize", "rmsnorm_quantize", "swiglu_quantize", "tune",
           "NATIVE_TORCH_OPS"]

# Last, once every op is defined: their CUDA kernels.
NATIVE_TORCH_OPS = _register_cuda_kernels()
