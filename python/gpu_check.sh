#!/usr/bin/env bash
# The Python package's whole GPU check in one run (the GPU machine: Python 3.12 + torch, no
# internet): installs the stable-ABI wheel built on a development machine, then the C++
# baseline (nvfp4-jit bench core), the per-call overhead from Python, the GPU pytest suite
# (ops vs the CPU references, GEMMs vs float64, torch.compile, CUDA graphs, the shared-cache
# processes) and the two examples. Logs go to $OUT (at most 8 files come back).
# Layout of the folder it runs in: *.whl, bin/nvfp4-jit, lib/libnvfp4_jit.so.0, python/{tests,examples,bench}.
set -uo pipefail
cd "$(dirname "$0")"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64 NVFP4_JIT_CACHE_DIR=/tmp/nvfp4-cache PYTHONUNBUFFERED=1
py=${PYTHON:-python3}
{
  "$py" -m pip install -q --no-index --no-deps --no-compile --target /tmp/site ./*.whl
  nvidia-smi -L
  PYTHONPATH=/tmp/site "$py" -c "import sys, torch, nvfp4_jit; print(sys.version); print('torch', torch.__version__); print('nvfp4_jit', nvfp4_jit.version(), nvfp4_jit._C.__file__)"
} > "$OUT/setup.log" 2>&1
cat "$OUT/setup.log"
export PYTHONPATH=/tmp/site
timeout 90 ./bin/nvfp4-jit bench core --quick --out "$OUT/core.json" > "$OUT/core.log" 2>&1
timeout 90 "$py" python/bench/overhead.py --core "$OUT/core.json" --out "$OUT/overhead.json" 2>&1 | tee "$OUT/overhead.log"
(cd python/tests && timeout 240 "$py" -m pytest -q -rsP -p no:cacheprovider --timeout 150 --durations 8 2>&1) > "$OUT/pytest.log"
tail -30 "$OUT/pytest.log"
{ timeout 90 "$py" python/examples/modelopt_checkpoint.py; echo "exit $?"; timeout 60 "$py" python/examples/vllm_linear_method.py; echo "exit $?"; } 2>&1 | tee "$OUT/examples.log"
grep -E "passed|failed" "$OUT/pytest.log" | tail -1
