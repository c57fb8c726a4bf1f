#!/usr/bin/env bash
# The Python package's whole GPU check in one run (the GPU machine: Python 3.12 + torch, no
# internet): installs the stable-ABI wheel built on a development machine, then the C++
# baseline (nvfp4-jit bench core), the per-call overhead from Python (before / after the
# binding's checked fast path), the tensor-parallel MLP example with two ranks sharing one
# cache root and its compiles counted (on one GPU: gloo test mode), the GPU pytest suite (ops
# vs the CPU references, GEMMs vs float64, the fast path vs the Python path, torch.compile,
# CUDA graphs, the shared-cache processes) and the two examples, these last while the run's
# time budget (GPU_CHECK_BUDGET_S, default 230 s) lasts. Logs go to $OUT (at most 8 files come back).
# Layout of the folder it runs in: *.whl, bin/nvfp4-jit, lib/libnvfp4_jit.so.0, python/{tests,examples,bench}.
set -uo pipefail
cd "$(dirname "$0")"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64 NVFP4_JIT_CACHE_DIR=/tmp/nvfp4-cache PYTHONUNBUFFERED=1
py=${PYTHON:-python3}
budget=${GPU_CHECK_BUDGET_S:-230}
left() { echo $((budget - SECONDS)); }
{
  rm -rf /tmp/site  # a warm machine keeps the last run's install, which pip --target would not replace
  "$py" -m pip install -q --no-index --no-deps --no-compile --target /tmp/site ./*.whl
  nvidia-smi -L
  PYTHONPATH=/tmp/site "$py" -c "import sys, torch, nvfp4_jit; print(sys.version); print('torch', torch.__version__); print('nvfp4_jit', nvfp4_jit.version(), nvfp4_jit._C.__file__)"
} > "$OUT/setup.log" 2>&1
cat "$OUT/setup.log"
export PYTHONPATH=/tmp/site
timeout 60 ./bin/nvfp4-jit bench core --quick --out "$OUT/core.json" > "$OUT/core.log" 2>&1
timeout 90 "$py" python/bench/overhead.py --core "$OUT/core.json" --out "$OUT/overhead.json" 2>&1 | tee "$OUT/overhead.log"
{
  cc -shared -fPIC -O2 -o /tmp/nvrtc_count.so python/tests/nvrtc_count.c -ldl -Wl,--no-as-needed /usr/local/cuda/lib64/libnvrtc.so.13 -Wl,-rpath,/usr/local/cuda/lib64
  rm -rf /tmp/tp-cache /tmp/tp-compiles
  NVFP4_JIT_NVRTC=/tmp/nvrtc_count.so NVRTC_COUNT_FILE=/tmp/tp-compiles NVFP4_JIT_CACHE_DIR=/tmp/tp-cache \
    timeout 90 "$py" python/examples/tp_mlp.py --world 2
  echo "exit $?"
} > "$OUT/tp_mlp.log" 2>&1
cat "$OUT/tp_mlp.log"
(cd python/tests && timeout $(( $(left) > 30 ? $(left) - 25 : 5 )) "$py" -m pytest -q -rfEs -p no:cacheprovider --durations 8 2>&1) > "$OUT/pytest.log"
tail -40 "$OUT/pytest.log"
{
  if [ "$(left)" -gt 15 ]; then timeout $(( $(left) - 5 )) "$py" python/examples/modelopt_checkpoint.py; echo "exit $?"; fi
  if [ "$(left)" -gt 10 ]; then timeout $(( $(left) - 3 )) "$py" python/examples/vllm_linear_method.py; echo "exit $?"; fi
} 2>&1 | tee "$OUT/examples.log"
grep -E "passed|failed" "$OUT/pytest.log" | tail -1
