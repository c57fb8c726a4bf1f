"""One process of the shared-cache test: runs a fixed set of ops (several GEMM M buckets, the
quantizers) on data seeded by argv[1], and prints a checksum of every output."""
import hashlib
import sys

import torch

import nvfp4_jit

torch.manual_seed(int(sys.argv[1]))
dev = "cuda"
n, k = 384, 1024
w = torch.randint(0, 256, (n, k // 2), dtype=torch.uint8, device=dev)
s = torch.randint(0x20, 0x48, (n, k // 16), dtype=torch.uint8, device=dev).view(torch.float8_e4m3fn)
outs = []
for m in (1, 16, 100, 300):
    x = torch.randn(m, k, device=dev).to(torch.bfloat16)
    outs.append(nvfp4_jit.gemm(x, w, s, 0.01))
    q, sc, g = nvfp4_jit.quantize(x)
    outs += [q, sc, g, nvfp4_jit.gemm(q, w, s, 0.01, a_scales=sc, a_global_scale=g)]
outs.append(nvfp4_jit.rmsnorm_quantize(x, torch.ones(k, dtype=torch.bfloat16, device=dev))[0])
outs.append(nvfp4_jit.swiglu_quantize(x)[0])
torch.cuda.synchronize()
h = hashlib.sha256()
for t in outs:
    h.update(t.contiguous().view(torch.uint8).cpu().numpy().tobytes())
print(h.hexdigest())
