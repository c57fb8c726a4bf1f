#!/usr/bin/env bash
# The main job: build, then prewarm the kernel cache for a built-in model manifest on every
# arch (works without a GPU); on a machine with a GPU also run the self-checking examples.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
manifest=${1:-llama-3.1-8b}
./build/bin/nvfp4-jit prewarm --manifest "$manifest" --arch sm_90a,sm_100a,sm_120a
./build/bin/nvfp4-jit cache stats
if ./build/bin/nvfp4-jit info | grep -q "kernels for sm_"; then
  export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
  ./build/bin/gemm_example 16 4096 4096
  ./build/bin/dequantize_example 4096 4096
  ./build/bin/w4a4_example 16 4096 4096
  ./build/bin/moe_layer_example
else
  echo "run-main: no supported GPU here; the GPU example was skipped"
fi
