"""A tensor-parallel NVFP4 MLP over torch.distributed (NCCL), one process per GPU.

gate and up are column-parallel (each rank holds a slice of their rows), down is row-parallel
(a slice of its columns, i.e. of K); each rank computes its partial down projection in fp32 and
an all-reduce sums them. The weights are one ModelOpt NVFP4 checkpoint (quantized once by this
library's quantizer, identically on every rank) sliced per rank, as a TP loader slices it: rows
for column-parallel layers, packed bytes and scale columns for row-parallel ones (K slices are
multiples of 32). Every rank then checks the all-reduced result against the single-GPU MLP on
the full weights, and rank 0 counts the cache's kernels (and, with the nvrtc_count.c shim as
LD_PRELOAD and NVRTC_COUNT_FILE set, the compiles: each kernel compiled once across ranks).

    python python/examples/tp_mlp.py --world 2        # spawns one process per GPU
    torchrun --nproc-per-node 2 python/examples/tp_mlp.py
"""
import argparse
import os
import pathlib
import sys

import torch
import torch.distributed as dist

import nvfp4_jit

HIDDEN, INTER, TOKENS = 1024, 2816, 8


def checkpoint(dev):
    torch.manual_seed(0)
    full = {name: torch.randn(n, k, device=dev) / k ** 0.5 for name, (n, k) in
            {"gate": (INTER, HIDDEN), "up": (INTER, HIDDEN), "down": (HIDDEN, INTER)}.items()}
    return {name: nvfp4_jit.quantize_modelopt(w) for name, w in full.items()}


def column_slice(t, rank, world):
    rows = t["weight"].shape[0] // world
    return {key: (v[rank * rows:(rank + 1) * rows] if v.dim() else v) for key, v in t.items()}


def row_slice(t, rank, world):
    k = 2 * t["weight"].shape[1] // world
    return {"weight": t["weight"][:, rank * k // 2:(rank + 1) * k // 2].contiguous(),
            "weight_scale": t["weight_scale"][:, rank * k // 16:(rank + 1) * k // 16].contiguous(),
            "weight_scale_2": t["weight_scale_2"]}


def layer(t):
    return nvfp4_jit.Nvfp4Linear.from_modelopt(t["weight"], t["weight_scale"], t["weight_scale_2"])


def mlp(x, gate, up, down):
    h = torch.nn.functional.silu(gate(x)) * up(x)
    return nvfp4_jit.gemm(h, down.packed, None, down.weight_scale_2, b_prepacked=True, n=down.out_features,
                          out_dtype=torch.float32)


def run(rank, world):
    torch.cuda.set_device(rank)
    dev = torch.device("cuda", rank)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=dev)
    ck = checkpoint(dev)
    if INTER % (32 * world):
        raise SystemExit(f"INTER ({INTER}) must split into K slices of multiples of 32 over {world} ranks")
    gate, up = layer(column_slice(ck["gate"], rank, world)), layer(column_slice(ck["up"], rank, world))
    down = layer(row_slice(ck["down"], rank, world))
    torch.manual_seed(1)
    x = torch.randn(TOKENS, HIDDEN, device=dev).to(torch.bfloat16)
    y = mlp(x, gate, up, down)
    dist.all_reduce(y)
    ref = mlp(x, layer(ck["gate"]), layer(ck["up"]), layer(ck["down"]))
    err = ((y - ref).norm() / ref.norm()).item()
    gathered = [torch.empty_like(y) for _ in range(world)]
    dist.all_gather(gathered, y)
    same = all(torch.equal(g, gathered[0]) for g in gathered)
    print(f"rank {rank}/{world}: ||TP - single GPU|| / ||single GPU|| = {err:.2e}, every rank the same bits: {same}")
    dist.barrier()
    ok = err < 1e-5 and same
    if rank == 0:
        root = pathlib.Path(nvfp4_jit.cache_info()["root"])
        kernels = len(list(root.rglob("*.cubin")))
        count_file = os.environ.get("NVRTC_COUNT_FILE")
        if count_file and os.path.exists(count_file):
            compiles = open(count_file).read().split()
            per_rank = sorted(compiles.count(p) for p in set(compiles))
            print(f"cache {root}: {kernels} kernels, {len(compiles)} compiles (per process {per_rank})")
            ok = ok and len(compiles) <= kernels
        else:
            print(f"cache {root}: {kernels} kernels (set LD_PRELOAD to nvrtc_count.so and NVRTC_COUNT_FILE to count compiles)")
    dist.destroy_process_group()
    if not ok:
        sys.exit(1)


def spawned(rank, world):
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29513")
    run(rank, world)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--world", type=int, default=torch.cuda.device_count())
    args = ap.parse_args()
    if "RANK" in os.environ:  # torchrun
        run(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]))
    else:
        torch.multiprocessing.spawn(spawned, args=(args.world,), nprocs=args.world)


if __name__ == "__main__":
    main()
