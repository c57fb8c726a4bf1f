"""A ModelOpt NVFP4 checkpoint, written and served.

1. Writes a small decoder (2 layers: q/k/v/o and gate/up/down projections, RMSNorm weights) as
   ModelOpt stores NVFP4: `<layer>.weight` uint8 [n, k/2], `.weight_scale` float8_e4m3fn
   [n, k/16], `.weight_scale_2` and `.input_scale` fp32 scalars, plus hf_quant_config.json. The
   weights are quantized by this library's own quantizer (no hub is reachable).
2. Loads it: one Nvfp4Linear.from_modelopt per linear (checked, prepacked at load).
3. Runs a decode step (batch 4, a 16-position KV cache, attention over it plus the new token)
   under a CUDA graph, replays it with new tokens and caches, and checks every replay against
   a float64 reference computed from the checkpoint's decoded weights.
Exits non-zero when a check fails.
"""
import argparse
import json
import math
import os
import sys
import tempfile

import numpy as np
import torch
from safetensors.torch import load_file, save_file

import nvfp4_jit
from nvfp4_jit import cpu

HIDDEN, INTER, HEADS, LAYERS, PAST, BATCH = 1024, 2816, 8, 2, 16, 4
HEAD_DIM = HIDDEN // HEADS
LINEARS = {"self_attn.q_proj": (HIDDEN, HIDDEN), "self_attn.k_proj": (HIDDEN, HIDDEN),
           "self_attn.v_proj": (HIDDEN, HIDDEN), "self_attn.o_proj": (HIDDEN, HIDDEN),
           "mlp.gate_proj": (INTER, HIDDEN), "mlp.up_proj": (INTER, HIDDEN), "mlp.down_proj": (HIDDEN, INTER)}


def write_checkpoint(path, dev):
    tensors = {}
    for i in range(LAYERS):
        for name, (n, k) in LINEARS.items():
            w = torch.randn(n, k, device=dev) / math.sqrt(k)
            for key, t in nvfp4_jit.quantize_modelopt(w).items():
                tensors[f"model.layers.{i}.{name}.{key}"] = t.cpu()
            tensors[f"model.layers.{i}.{name}.input_scale"] = torch.tensor(4.0 / (6 * 448))  # calibrated amax 4
        for norm in ("input_layernorm", "post_attention_layernorm"):
            tensors[f"model.layers.{i}.{norm}.weight"] = (torch.rand(HIDDEN) + 0.5).to(torch.bfloat16)
    save_file(tensors, os.path.join(path, "model.safetensors"))
    with open(os.path.join(path, "hf_quant_config.json"), "w") as f:
        json.dump({"producer": {"name": "modelopt"},
                   "quantization": {"quant_algo": "NVFP4", "group_size": 16, "exclude_modules": ["lm_head"]}}, f)


def load(path, dev):
    with open(os.path.join(path, "hf_quant_config.json")) as f:
        assert json.load(f)["quantization"]["quant_algo"] == "NVFP4"
    sd = load_file(os.path.join(path, "model.safetensors"), device=dev)
    layers = []
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        layer = {name: nvfp4_jit.Nvfp4Linear.from_modelopt(sd[p + name + ".weight"], sd[p + name + ".weight_scale"],
                                                          sd[p + name + ".weight_scale_2"], sd[p + name + ".input_scale"])
                 for name in LINEARS}
        layer["norms"] = [sd[p + "input_layernorm.weight"], sd[p + "post_attention_layernorm.weight"]]
        layers.append(layer)
    return sd, layers


def rmsnorm(x, w, eps=1e-5):
    x32 = x.float()
    return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps) * w.float()).to(x.dtype)


def attention(q, k_new, v_new, k_cache, v_cache):
    """One new position per sequence over PAST cached ones, fp32 softmax."""
    b = q.shape[0]
    q = q.view(b, HEADS, 1, HEAD_DIM).float()
    keys = torch.cat([k_cache, k_new.view(b, HEADS, 1, HEAD_DIM)], 2).float()
    vals = torch.cat([v_cache, v_new.view(b, HEADS, 1, HEAD_DIM)], 2).float()
    p = torch.softmax(q @ keys.transpose(-1, -2) / math.sqrt(HEAD_DIM), -1)
    return (p @ vals).view(b, HIDDEN).to(torch.bfloat16)


def decode_step(x, layers, caches):
    for layer, (kc, vc) in zip(layers, caches):
        h = rmsnorm(x, layer["norms"][0])
        a = attention(layer["self_attn.q_proj"](h), layer["self_attn.k_proj"](h), layer["self_attn.v_proj"](h), kc, vc)
        x = x + layer["self_attn.o_proj"](a)
        h = rmsnorm(x, layer["norms"][1])
        x = x + layer["mlp.down_proj"](torch.nn.functional.silu(layer["mlp.gate_proj"](h)) * layer["mlp.up_proj"](h))
    return x


def reference(x, sd, caches):
    """float64 throughout, on the checkpoint's decoded weights (the library's CPU reference)."""
    def w64(name):
        q, s, g = sd[name + ".weight"], sd[name + ".weight_scale"], sd[name + ".weight_scale_2"]
        dec = cpu.dequantize(q.cpu().numpy(), s.cpu().view(torch.uint8).numpy(), 1.0)
        return torch.from_numpy(dec.astype(np.float64)) * float(g)

    x = x.double().cpu()
    for i, (kc, vc) in enumerate(caches):
        p = f"model.layers.{i}."
        n0, n1 = (sd[p + n + ".weight"].double().cpu() for n in ("input_layernorm", "post_attention_layernorm"))
        norm = lambda t, w: t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + 1e-5) * w  # noqa: E731
        lin = lambda t, name: t @ w64(p + name).T  # noqa: E731
        h = norm(x, n0)
        b = x.shape[0]
        q = lin(h, "self_attn.q_proj").view(b, HEADS, 1, HEAD_DIM)
        keys = torch.cat([kc.double().cpu(), lin(h, "self_attn.k_proj").view(b, HEADS, 1, HEAD_DIM)], 2)
        vals = torch.cat([vc.double().cpu(), lin(h, "self_attn.v_proj").view(b, HEADS, 1, HEAD_DIM)], 2)
        a = (torch.softmax(q @ keys.transpose(-1, -2) / math.sqrt(HEAD_DIM), -1) @ vals).view(b, HIDDEN)
        x = x + lin(a, "self_attn.o_proj")
        h = norm(x, n1)
        x = x + lin(torch.nn.functional.silu(lin(h, "mlp.gate_proj")) * lin(h, "mlp.up_proj"), "mlp.down_proj")
    return x


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", help="checkpoint directory (default: a temporary one)")
    ap.add_argument("--replays", type=int, default=3)
    args = ap.parse_args()
    dev = "cuda"
    with tempfile.TemporaryDirectory() as tmp:
        path = args.dir or tmp
        os.makedirs(path, exist_ok=True)
        write_checkpoint(path, dev)
        sd, layers = load(path, dev)
        static_x = torch.empty(BATCH, HIDDEN, dtype=torch.bfloat16, device=dev)
        caches = [(torch.empty(BATCH, HEADS, PAST, HEAD_DIM, dtype=torch.bfloat16, device=dev),
                   torch.empty(BATCH, HEADS, PAST, HEAD_DIM, dtype=torch.bfloat16, device=dev)) for _ in range(LAYERS)]

        def fill():
            static_x.copy_(torch.randn(BATCH, HIDDEN, device=dev))
            for kc, vc in caches:
                kc.copy_(torch.randn_like(kc, dtype=torch.float32))
                vc.copy_(torch.randn_like(vc, dtype=torch.float32))

        fill()
        decode_step(static_x, layers, caches)  # warm-up: loads every kernel before the capture
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_y = decode_step(static_x, layers, caches)
        worst = 0.0
        for r in range(args.replays):
            fill()
            graph.replay()
            torch.cuda.synchronize()
            ref = reference(static_x, sd, caches)
            got = static_y.double().cpu()
            err = ((got - ref).norm() / ref.norm()).item()
            eager = decode_step(static_x, layers, caches)
            same = torch.equal(eager, static_y)
            print(f"replay {r}: ||graph - float64|| / ||float64|| = {err:.2e}; graph == eager bit for bit: {same}")
            worst = max(worst, err) if math.isfinite(err) else math.inf
        # bf16 activations between layers: ~2^-9 per rounding, a few dozen roundings deep
        limit = 2e-2
        print(f"decode step under a CUDA graph: {LAYERS} layers, {len(LINEARS) * LAYERS} NVFP4 linears, batch {BATCH}; "
              f"worst relative error {worst:.2e} (limit {limit:.0e}): {'PASS' if worst < limit else 'FAIL'}")
        sys.exit(0 if worst < limit else 1)


if __name__ == "__main__":
    main()
