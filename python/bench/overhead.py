"""Host time per warm call from Python, measured as `nvfp4-jit bench core` measures the bare C++
call: median of per-call host times, in batches of 250 calls with a synchronize between batches
(so the launch queue never fills), on the legacy default stream, after a warm-up call.

Shapes as bench core's: gemm M=16, N=K=4096 (BF16, linear scales; W4A4 with a given
workspace); dequantize 64 x 4096; quantize 16 x 4096 (no C++ baseline: its binding-only call
is the reference). Each checked function is also timed on its Python checks alone ("before":
the binding's checked fast path declined, as it was before the checks moved into the binding;
that adds one declined call, about 0.1 us). Prints one line per path and, given bench core's
JSON (--core results.json), the difference to the C++ call. Writes --out JSON.
"""
import argparse
import json
import statistics
import time

import contextlib

import torch

import nvfp4_jit
from nvfp4_jit import _C
from nvfp4_jit.ops import dequant, matmul, quant

BATCHES, PER_BATCH = 200, 250


def host_us(call):
    call()
    torch.cuda.synchronize()
    times = []
    clock = time.perf_counter_ns
    for _ in range(BATCHES):
        for _ in range(PER_BATCH):
            t0 = clock()
            call()
            times.append((clock() - t0) / 1e3)
        torch.cuda.synchronize()
    return statistics.median(times)


@contextlib.contextmanager
def python_checks_only():
    """The checked functions without the binding's fast path (the path before it existed)."""
    saved = _C.gemm_checked, _C.quantize_checked
    _C.gemm_checked = _C.quantize_checked = lambda *args: NotImplemented
    try:
        yield
    finally:
        _C.gemm_checked, _C.quantize_checked = saved


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--core", help="bench core's JSON (nvfp4-jit bench core --out ...)")
    ap.add_argument("--out", help="write the results here (JSON)")
    args = ap.parse_args()
    dev = "cuda"
    m, n, k = 16, 4096, 4096
    a = torch.randn(m, k, device=dev).to(torch.bfloat16)
    w = torch.randint(0, 256, (n, k // 2), dtype=torch.uint8, device=dev)
    s = torch.randint(0x20, 0x48, (n, k // 16), dtype=torch.uint8, device=dev).view(torch.float8_e4m3fn)
    y = torch.empty(m, n, dtype=torch.bfloat16, device=dev)
    gemm_fields = (m, n, k, a, None, None, 1.0, 0, w, s, None, 1.0, 0, False, None, 1.0, y, False, None)
    fields = matmul._GEMM(matmul._gemm_fields(*gemm_fields))
    stream = torch._C._cuda_getCurrentRawStream(0)
    lin = nvfp4_jit.Nvfp4Linear(nvfp4_jit.prepack(w, s), n, k, torch.ones((), device=dev), weights_static=False)
    torch.cuda.synchronize()
    dq = torch.randint(0, 256, (64, k // 2), dtype=torch.uint8, device=dev)
    ds = torch.randint(0x20, 0x48, (64, k // 16), dtype=torch.uint8, device=dev).view(torch.float8_e4m3fn)
    dy = torch.empty(64, k, dtype=torch.bfloat16, device=dev)
    dfields = dequant._DEQUANTIZE({
        "src.data": dq.data_ptr(), "src.row_stride_bytes": 0, "src.scales": ds.data_ptr(), "src.scale_layout": 0,
        "src.global_scale.value": 1.0, "src.global_scale.device_ptr": 0, "src.global_scale.per_row": False,
        "src_rows": 64, "k": k, "out": dy.data_ptr(), "out_dtype": 0, "out_row_stride": 0, "row_indices": 0, "rows": 0})
    qa, qs, qg = nvfp4_jit.quantize(a)
    ws = torch.empty(m * k * 2, dtype=torch.uint8, device=dev)
    w4a4 = matmul._GEMM(matmul._gemm_fields(m, n, k, qa, qs, qg, 1.0, 0, w, s, None, 1.0, 0, False, None, 1.0, y, False,
                                            ws))
    qq, qsc, qgo = torch.empty_like(qa), torch.empty_like(qs), torch.empty_like(qg)
    qfields = quant._QUANTIZE({
        "in": a.data_ptr(), "in_dtype": 0, "in_row_stride": k, "rows": m, "k": k, "out": qq.data_ptr(),
        "out_row_stride_bytes": k // 2, "scales": qsc.data_ptr(), "scale_layout": 0, "scale_mode": 0,
        "global_scale.value": 0.5, "global_scale.device_ptr": 0, "global_scale.per_row": False, "global_scale_out": 0})
    checked = {
        "gemm: nvfp4_jit.gemm(..., out=y) (checked, static out)": lambda: nvfp4_jit.gemm(a, w, s, 1.0, out=y),
        "gemm: nvfp4_jit.gemm(...) (checked, allocates)": lambda: nvfp4_jit.gemm(a, w, s, 1.0),
        "gemm w4a4: nvfp4_jit.gemm(q, ..., out=y, workspace=ws) (checked)": lambda: nvfp4_jit.gemm(
            qa, w, s, 1.0, a_scales=qs, a_global_scale=qg, out=y, workspace=ws),
        "quantize: nvfp4_jit.quantize(x, 0.5, out=...) (checked, static out)": lambda: nvfp4_jit.quantize(
            a, 0.5, out=qq, out_scales=qsc),
        "quantize: nvfp4_jit.quantize(x) (checked, per-tensor scale computed, allocates)": lambda: nvfp4_jit.quantize(a),
    }
    results = {
        "gemm w4a4: binding only, _C.gemm(*ints)": host_us(lambda: _C.gemm(*w4a4, stream)),
        "quantize: binding only, _C.quantize(*ints)": host_us(lambda: _C.quantize(*qfields, stream)),
        **{name: host_us(call) for name, call in checked.items()},
        "gemm: binding only, _C.gemm(*ints)": host_us(lambda: _C.gemm(*fields, stream)),
        "gemm: its fields by name alone, no call (_GEMM(_gemm_fields(...)))": host_us(
            lambda: matmul._GEMM(matmul._gemm_fields(*gemm_fields))),
        "gemm: torch.ops.nvfp4_jit.gemm (dispatcher)": host_us(
            lambda: torch.ops.nvfp4_jit.gemm(a, None, None, 1.0, 0, w, s, None, 1.0, 0, False, n, k, None, 1.0,
                                             torch.bfloat16, False)),
        "quantize: torch.ops.nvfp4_jit.quantize (dispatcher, per-row scale computed)": host_us(
            lambda: torch.ops.nvfp4_jit.quantize(a, None, 1.0, 0, 2)),
        "dequantize: torch.ops.nvfp4_jit.dequantize (dispatcher)": host_us(
            lambda: torch.ops.nvfp4_jit.dequantize(dq, ds, None, 1.0, k, 0, torch.bfloat16, None)),
        "gemm: Nvfp4Linear forward, prepacked (raw path, allocates)": host_us(lambda: lin(a)),
        "dequantize: binding only, _C.dequantize(*ints)": host_us(lambda: _C.dequantize(*dfields, stream)),
        "dequantize: nvfp4_jit.dequantize(..., out=y)": host_us(lambda: nvfp4_jit.dequantize(dq, ds, 1.0, out=dy)),
        "torch.empty(16, 4096) alone (for scale)": host_us(lambda: torch.empty(m, n, dtype=torch.bfloat16, device=dev)),
    }
    with python_checks_only():
        results.update({f"{name} [before: Python checks]": host_us(call) for name, call in checked.items()})
    core = None
    if args.core:
        with open(args.core) as f:
            core = json.load(f)
        core = core.get("core", core)
    print(f"per-call host time, median of {BATCHES * PER_BATCH} calls (us)")
    for name, us in results.items():
        base = None
        if core and name.startswith("gemm w4a4"):
            base = core.get("w4a4_gemm_dispatch_us_median")
        elif core and name.startswith("gemm"):
            base = core.get("gemm_dispatch_us_median")
        elif core and name.startswith("dequantize"):
            base = core.get("dispatch_us_median")
        extra = f"   C++ {base:6.2f}, Python adds {us - base:+6.2f}" if base is not None else ""
        print(f"  {name:96s} {us:7.2f}{extra}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"python_us": results, "cpp_core": core}, f, indent=1)


if __name__ == "__main__":
    main()
