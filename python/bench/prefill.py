"""Hopper prefill side by side, in one process: gemm's exact W4A16 mode and its W4A8 mode on a
prepacked NVFP4 weight, against what an engine would run instead, torch BF16 (cuBLAS) on the
dequantized weight and torch._scaled_mm FP8 (row-wise scales) on an FP8 copy of it.

Each column is a CUDA graph of CALLS calls, every call on another copy of its weight (the
copies together more than twice the H200's 50 MB L2), timed with CUDA events; the columns run
in turns, ROUNDS rounds, and each cell is the median per call. W4A8's activation pass is timed
(it is part of the call). _scaled_mm is timed twice: on activations quantized before timing (the
GEMM alone), and after quantizing them per token in the call (torch.compile of the few torch ops
an engine would write, one generated kernel: what a user of _scaled_mm pays per call). Prints a
table and writes --out JSON.
"""
import argparse
import json
import statistics

import torch

import nvfp4_jit

CALLS, ROUNDS, L2_BYTES = 8, 15, 50 << 20
SHAPES = [(4096, 8192, 8192), (8192, 8192, 8192), (4096, 28672, 4096), (4096, 4096, 14336), (2048, 8192, 8192),
          (512, 4096, 14336), (16, 8192, 8192)]


def copies(nbytes):
    """Weight copies to rotate through so the calls together touch twice the L2."""
    return max(2, min(CALLS, -(-2 * L2_BYTES // nbytes)))


def per_token_fp8(x):
    """x's rows as E4M3 and their fp32 scales (amax / 448), as _scaled_mm's scale_a takes them."""
    scale = x.float().abs().amax(1, keepdim=True).clamp_min(1e-12) / 448
    return (x.float() / scale).to(torch.float8_e4m3fn), scale


_per_token_fp8 = torch.compile(per_token_fp8, dynamic=False)


def graph_of(calls):
    """A CUDA graph replaying `calls` (a list of thunks) once each, captured after one warm-up."""
    for c in calls:
        c()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for c in calls:
            c()
    return g


def columns(m, n, k):
    dev = "cuda"
    x = torch.randn(m, k, device=dev).to(torch.bfloat16)
    w = torch.randn(n, k, device=dev) / k ** 0.5
    ckpt = nvfp4_jit.quantize_modelopt(w)
    q, s, g2 = ckpt["weight"], ckpt["weight_scale"], ckpt["weight_scale_2"].reshape(1)
    packed = nvfp4_jit.prepack(q, s)
    dense = nvfp4_jit.dequantize(q, s, g2, dtype=torch.bfloat16)
    w_scale = dense.float().abs().amax(1, keepdim=True).clamp_min(1e-12) / 448
    w8 = (dense.float() / w_scale).to(torch.float8_e4m3fn)
    x8, x_scale = per_token_fp8(x)
    del w, dense
    out = torch.empty(m, n, device=dev, dtype=torch.bfloat16)
    ws = torch.empty(m * k + 4 * m + 16, device=dev, dtype=torch.uint8)
    p_copies = [packed] + [packed.clone() for _ in range(copies(packed.numel()) - 1)]
    bf16_copies = [nvfp4_jit.dequantize(q, s, g2, dtype=torch.bfloat16) for _ in range(copies(n * k * 2))]
    f8_copies = [w8] + [w8.clone() for _ in range(copies(n * k) - 1)]
    sw = w_scale.reshape(1, n).contiguous()

    def scaled_mm(a8, a_scale, b):
        return torch._scaled_mm(a8, b.t(), scale_a=a_scale, scale_b=sw, out_dtype=torch.bfloat16, out=out)

    def ours(precision):
        return [lambda p=p: nvfp4_jit.gemm(x, p, None, g2, b_prepacked=True, n=n, out=out, weights_static=True,
                                           workspace=ws if precision == "w4a8" else None, precision=precision)
                for p in (p_copies * CALLS)[:CALLS]]

    cols = {
        "exact": ours("exact"),
        "w4a8": ours("w4a8"),
        "torch bf16": [lambda b=b: torch.matmul(x, b.t(), out=out) for b in (bf16_copies * CALLS)[:CALLS]],
        "_scaled_mm fp8": [lambda b=b: scaled_mm(x8, x_scale, b) for b in (f8_copies * CALLS)[:CALLS]],
        "_scaled_mm + quant": [lambda b=b: scaled_mm(*_per_token_fp8(x), b) for b in (f8_copies * CALLS)[:CALLS]],
    }
    return {name: graph_of(calls) for name, calls in cols.items()}


def time_in_turns(graphs):
    times = {name: [] for name in graphs}
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(ROUNDS):
        for name, g in graphs.items():
            start.record()
            g.replay()
            stop.record()
            stop.synchronize()
            times[name].append(start.elapsed_time(stop) * 1e3 / CALLS)
    return {name: statistics.median(t) for name, t in times.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", help="write the results here (JSON)")
    ap.add_argument("--shape", action="append", help="M,N,K to time instead of the default shapes (repeatable)")
    args = ap.parse_args()
    shapes = [tuple(int(v) for v in s.split(",")) for s in args.shape] if args.shape else SHAPES
    print(f"prefill on {torch.cuda.get_device_name()}: us per call (median of {ROUNDS} graph replays of {CALLS} calls, "
          "weights rotated past L2, columns in turns)")
    head = ["M x N x K", "exact", "w4a8", "torch bf16", "_scaled_mm fp8", "_scaled_mm + quant", "w4a8/exact", "w4a8/fp8",
            "w4a8/(fp8 + quant)", "w4a8 TFLOP/s"]
    print(" | ".join(head))
    rows = []
    for m, n, k in shapes:
        t = time_in_turns(columns(m, n, k))
        row = {"m": m, "n": n, "k": k, **t}
        rows.append(row)
        tflops = 2 * m * n * k / t["w4a8"] / 1e6
        fp8, fp8_quant = t["_scaled_mm fp8"], t["_scaled_mm + quant"]
        print(f"{m} x {n} x {k} | {t['exact']:.1f} | {t['w4a8']:.1f} | {t['torch bf16']:.1f} | {fp8:.1f} | {fp8_quant:.1f} | "
              f"{t['exact'] / t['w4a8']:.2f}x | {fp8 / t['w4a8']:.2f}x | {fp8_quant / t['w4a8']:.2f}x | {tflops:.0f}", flush=True)
        torch.cuda.empty_cache()
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
