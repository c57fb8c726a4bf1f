#!/usr/bin/env bash
# Everything the GPU machine checks, in one run: GPU tests, compute-sanitizer, the example,
# the benchmarks and the SASS of the cached kernels. Results go to $OUT (default ./gpu-out).
# Usage (from the repository root, with a Release build in ./build):
#   tools/gpu_check.sh [--quick] [tests|bench]
# tests: only the tests, sanitizers and examples; bench: only the benchmarks and the SASS
# (each half fits a 10-minute command); neither: both.
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export PATH=/usr/local/cuda/bin:$PATH
export NVFP4_JIT_CACHE_DIR=$(mktemp -d)
B=build/bin
QUICK= PART=all
for arg in "$@"; do
  case $arg in --quick) QUICK=--quick ;; tests|bench) PART=$arg ;; *) echo "unknown argument $arg" >&2; exit 2 ;; esac
done
status=0
step() { echo; echo "=== $*"; }

step device; nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv | tee "$OUT/device.txt"
step info; $B/nvfp4-jit info
if [ "$PART" != bench ]; then
step gpu tests
$B/nvfp4_jit_gpu_tests --no-intro 2>&1 | tee "$OUT/gpu_tests.txt" || status=1
step compute-sanitizer memcheck
compute-sanitizer --tool memcheck --error-exitcode 9 $B/nvfp4_jit_gpu_tests --no-intro -tc="*padded*,*captured*,*sanitizers*,*for memcheck*" \
  > "$OUT/memcheck.txt" 2>&1 || status=1
tail -3 "$OUT/memcheck.txt"
step compute-sanitizer racecheck
compute-sanitizer --tool racecheck --error-exitcode 9 $B/nvfp4_jit_gpu_tests --no-intro -tc="*padded*,*sanitizers*" \
  > "$OUT/racecheck.txt" 2>&1 || status=1
tail -3 "$OUT/racecheck.txt"
step examples; $B/gemm_example 16 4096 4096 || status=1; $B/dequantize_example 4096 4096 || status=1
$B/w4a4_example 16 4096 4096 || status=1; $B/w4a4_example 300 2880 2880 || status=1
$B/moe_layer_example || status=1
fi
[ "$PART" = tests ] && { echo; echo "gpu_check status: $status"; exit $status; }
step prewarm for this GPU; $B/nvfp4-jit prewarm --manifest llama-3.1-8b --arch sm_90a --quiet
step bench core; $B/nvfp4-jit bench core $QUICK --out "$OUT/bench_core.json" || status=1
step bench dequantize; $B/nvfp4-jit bench dequantize $QUICK --out "$OUT/bench_dequantize.json" || status=1
step bench quantize; $B/nvfp4-jit bench quantize $QUICK --out "$OUT/bench_quantize.json" || status=1
step bench rmsnorm-quantize; $B/nvfp4-jit bench rmsnorm-quantize $QUICK --out "$OUT/bench_rmsnorm_quantize.json" || status=1
step bench gemm; $B/nvfp4-jit bench gemm $QUICK --out "$OUT/bench_gemm.json" || status=1
step bench grouped; $B/nvfp4-jit bench grouped --quick --out "$OUT/bench_grouped.json" || status=1
step SASS
for f in $(find "$NVFP4_JIT_CACHE_DIR/v1/sm_90a" -name '*.cubin'); do
  name=$(cuobjdump -elf "$f" | grep -o 'nvfp4_[a-z0-9_]*' | head -1)
  sass=$(mktemp)
  cuobjdump -sass "$f" > "$sass"
  case $name in *gemm*bm256*|*gemm*bm16_*) cp "$sass" "$OUT/sass_$name.txt" ;; esac
  echo "$name: $(cuobjdump -res-usage "$f" 2>&1 | grep -o 'REG:[0-9]*') HGMMA=$(grep -c HGMMA "$sass")" \
       "local-memory instructions=$(grep -cE 'LDL|STL' "$sass")"
done | sort -u
echo; echo "gpu_check status: $status"
exit $status
