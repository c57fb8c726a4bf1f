"""A tensor-parallel NVFP4 MLP over torch.distributed (NCCL), one process per GPU.

gate and up are column-parallel (each rank holds a slice of their rows), down is row-parallel
(a slice of its columns, i.e. of K); each rank computes its partial down projection in fp32 and
an all-reduce sums them. The weights are one ModelOpt NVFP4 checkpoint (quantized once by this
library's quantizer, identically on every rank) sliced per rank, as a TP loader slices it: rows
for column-parallel layers, packed bytes and scale columns for row-parallel ones (K slices are
multiples of 32). Every rank then checks the all-reduced result against the single-GPU MLP on
the full weights, and rank 0 counts the cache's kernels (and, with the nvrtc_count.c shim as
NVFP4_JIT_NVRTC and NVRTC_COUNT_FILE set, the compiles: each kernel compiled once across ranks).

    python python/examples/tp_mlp.py --world 2        # spawns one process per GPU
    torchrun --nproc-per-node 2 python/examples/tp_mlp.py

Test mode, for a machine with fewer GPUs than ranks: the ranks share the GPUs (rank r on GPU
r mod count) and talk through the gloo backend (the all-reduce and all-gather go through host
copies), so the sharded math and the shared cache are checked on one GPU; NCCL and two devices
are not. It is chosen by itself when the GPUs are too few (--backend gloo forces it):

    NVFP4_JIT_NVRTC=nvrtc_count.so NVRTC_COUNT_FILE=/tmp/compiles NVFP4_JIT_CACHE_DIR=/tmp/empty \
        python python/examples/tp_mlp.py --world 2
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


def cached_kernels():
    return len(list(pathlib.Path(nvfp4_jit.cache_info()["root"]).rglob("*.cubin")))


def all_reduce(y, backend):
    if backend == "nccl":
        dist.all_reduce(y)
        return y
    host = y.cpu()  # gloo: through the host (the sum of two ranks is the same in either order)
    dist.all_reduce(host)
    return host.to(y.device)


def all_gather(y, world, backend):
    if backend == "nccl":
        gathered = [torch.empty_like(y) for _ in range(world)]
        dist.all_gather(gathered, y)
        return gathered
    gathered = [torch.empty_like(y, device="cpu") for _ in range(world)]
    dist.all_gather(gathered, y.cpu())
    return gathered


def run(rank, world, backend):
    dev = torch.device("cuda", rank % torch.cuda.device_count())
    torch.cuda.set_device(dev)
    before = cached_kernels() if rank == 0 else 0  # no rank runs an op before the rendezvous below
    if backend == "nccl":
        dist.init_process_group("nccl", rank=rank, world_size=world, device_id=dev)
    else:
        dist.init_process_group("gloo", rank=rank, world_size=world)
    ck = checkpoint(dev)
    if INTER % (32 * world):
        raise SystemExit(f"INTER ({INTER}) must split into K slices of multiples of 32 over {world} ranks")
    gate, up = layer(column_slice(ck["gate"], rank, world)), layer(column_slice(ck["up"], rank, world))
    down = layer(row_slice(ck["down"], rank, world))
    torch.manual_seed(1)
    x = torch.randn(TOKENS, HIDDEN, device=dev).to(torch.bfloat16)
    y = all_reduce(mlp(x, gate, up, down), backend)
    ref = mlp(x, layer(ck["gate"]), layer(ck["up"]), layer(ck["down"]))
    err = ((y - ref).norm() / ref.norm()).item()
    gathered = all_gather(y, world, backend)
    same = all(torch.equal(g, gathered[0]) for g in gathered)
    print(f"rank {rank}/{world} on {dev} ({backend}): ||TP - single GPU|| / ||single GPU|| = {err:.2e}, "
          f"every rank the same bits: {same}", flush=True)
    dist.barrier()
    ok = err < 1e-5 and same
    if rank == 0:
        root = nvfp4_jit.cache_info()["root"]
        kernels = cached_kernels() - before
        count_file = os.environ.get("NVRTC_COUNT_FILE")
        if count_file:
            compiles = open(count_file).read().split() if os.path.exists(count_file) else []
            per_rank = sorted(compiles.count(p) for p in set(compiles))
            print(f"cache {root}: {kernels} new kernels, {len(compiles)} compiles (per process {per_rank}): "
                  f"{'each compiled once' if len(compiles) == kernels else 'NOT each compiled once'}")
            ok = ok and len(compiles) == kernels
        else:
            print(f"cache {root}: {kernels} new kernels (set NVFP4_JIT_NVRTC to nvrtc_count.so and NVRTC_COUNT_FILE to count compiles)")
    dist.destroy_process_group()
    if not ok:
        sys.exit(1)


def spawned(rank, world, backend):
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29513")
    run(rank, world, backend)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--world", type=int, default=max(2, torch.cuda.device_count()))
    ap.add_argument("--backend", choices=["nccl", "gloo"], default=None,
                    help="default: nccl with a GPU per rank, else gloo (the one-GPU test mode)")
    args = ap.parse_args()
    world = int(os.environ.get("WORLD_SIZE", args.world))
    backend = args.backend or ("nccl" if torch.cuda.device_count() >= world else "gloo")
    if backend == "gloo":
        print(f"test mode: {world} ranks on {torch.cuda.device_count()} GPU(s) through gloo (NCCL and a GPU per rank "
              f"are not exercised)", flush=True)
    if "RANK" in os.environ:  # torchrun
        run(int(os.environ["RANK"]), world, backend)
    else:
        torch.multiprocessing.spawn(spawned, args=(world, backend), nprocs=world)


if __name__ == "__main__":
    main()
