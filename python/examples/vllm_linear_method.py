"""The shape of a vLLM LinearMethodBase over nvfp4_jit (vLLM is not needed to run it).

vLLM builds each linear layer empty, asks the quantization method for its parameters
(create_weights), copies checkpoint shards into them (weight loaders), calls
process_weights_after_loading once, then apply() on every forward. This method serves a
ModelOpt NVFP4 checkpoint with nvfp4_jit: the parameters are the checkpoint's own tensors,
processing prepacks the weight for the GEMM (and frees the unpacked copy), apply is one gemm
(W4A16), or quantize + gemm (W4A4). A merged gate_up layer (two output shards) is loaded and
checked against float64 below.
"""
import sys

import numpy as np
import torch
from torch.nn import Parameter

import nvfp4_jit
from nvfp4_jit import cpu


class Nvfp4LinearMethod:
    """vllm.model_executor.layers.linear.LinearMethodBase's three calls."""

    def __init__(self, mode="w4a16"):
        self.mode = mode

    def create_weights(self, layer, input_size_per_partition, output_partition_sizes, input_size, output_size,
                       params_dtype, **extra_weight_attrs):
        n, k = sum(output_partition_sizes), input_size_per_partition
        if k % 32:
            raise ValueError(f"NVFP4 needs in_features a multiple of 32, got {k}")
        shards = len(output_partition_sizes)
        layer.output_partition_sizes = list(output_partition_sizes)
        layer.params_dtype = params_dtype
        # ModelOpt's tensors, as its checkpoints name and store them; one global scale per shard.
        layer.register_parameter("weight", Parameter(torch.empty(n, k // 2, dtype=torch.uint8), requires_grad=False))
        layer.register_parameter("weight_scale", Parameter(torch.empty(n, k // 16, dtype=torch.float8_e4m3fn),
                                                           requires_grad=False))
        layer.register_parameter("weight_scale_2", Parameter(torch.empty(shards, dtype=torch.float32), requires_grad=False))
        layer.register_parameter("input_scale", Parameter(torch.empty(shards, dtype=torch.float32), requires_grad=False))

    def process_weights_after_loading(self, layer):
        g2 = layer.weight_scale_2.data
        if not torch.all(g2 == g2[0]):
            # ModelOpt exports fused shards (q/k/v, gate/up) with one shared global scale; shards with
            # different ones would need their block scales rewritten, which this example does not do.
            raise ValueError(f"weight_scale_2 differs between the shards of a fused layer: {g2.tolist()}")
        layer.nvfp4 = nvfp4_jit.Nvfp4Linear.from_modelopt(
            layer.weight.data, layer.weight_scale.data, g2[:1].clone(),
            layer.input_scale.data.max().reshape(1) if self.mode == "w4a4" else None, mode=self.mode)
        del layer.weight, layer.weight_scale  # the prepacked copy replaces them

    def apply(self, layer, x, bias=None):
        y = layer.nvfp4(x)
        return y if bias is None else y + bias


def load_shard(param, loaded, shard_id, layer):
    """A merged column-parallel layer's weight loader: shard `shard_id` goes to its rows (or its
    slot of the per-shard scalars)."""
    if param.dim() == 1:
        param.data[shard_id].copy_(loaded.reshape(()))
        return
    start = sum(layer.output_partition_sizes[:shard_id])
    param.data[start:start + loaded.shape[0]].copy_(loaded)


def main():
    dev = "cuda"
    torch.set_default_device(dev)
    inter, hidden = 1408, 1024
    w = torch.randn(2 * inter, hidden) / hidden ** 0.5
    ckpt = nvfp4_jit.quantize_modelopt(w)  # one global scale for the fused gate_up weight, as ModelOpt exports it
    shards = [{key: (t[i * inter:(i + 1) * inter] if t.dim() else t) for key, t in ckpt.items()} for i in range(2)]

    method = Nvfp4LinearMethod()
    layer = torch.nn.Module()
    method.create_weights(layer, hidden, [inter, inter], hidden, 2 * inter, torch.bfloat16)
    for i, shard in enumerate(shards):  # gate_proj, up_proj
        for name, t in shard.items():
            load_shard(getattr(layer, name), t, i, layer)
        load_shard(layer.input_scale, torch.tensor(4.0 / (6 * 448)), i, layer)
    method.process_weights_after_loading(layer)

    x = torch.randn(5, hidden).to(torch.bfloat16)
    y = method.apply(layer, x)
    dec = cpu.dequantize(ckpt["weight"].cpu().numpy(), ckpt["weight_scale"].cpu().view(torch.uint8).numpy(), 1.0)
    ref = x.double().cpu().numpy() @ dec.astype(np.float64).T * float(ckpt["weight_scale_2"])
    err = np.linalg.norm(y.double().cpu().numpy() - ref) / np.linalg.norm(ref)
    print(f"vLLM-shaped NVFP4 linear method, merged gate_up [{2 * inter}, {hidden}] from two shards: "
          f"relative error vs float64 {err:.2e} (limit 8e-3): {'PASS' if err < 8e-3 else 'FAIL'}")
    sys.exit(0 if err < 8e-3 else 1)


if __name__ == "__main__":
    main()
