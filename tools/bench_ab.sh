#!/usr/bin/env bash
# One benchmark, two builds, in turns on the same GPU: the before/after table of a change.
# Usage (on the GPU machine): tools/bench_ab.sh BEFORE_BIN AFTER_BIN ROUNDS bench ARGS...
#   e.g. tools/bench_ab.sh old/nvfp4-jit build/bin/nvfp4-jit 2 bench grouped --quick --tokens 512,4096
# Each build keeps its own kernel cache (so neither reads the other's kernels), and each round
# runs both, so clock and thermal drift fall on both alike. Prints each run's table rows.
set -uo pipefail
[ $# -ge 4 ] || { sed -n 2,7p "$0"; exit 2; }
before=$1 after=$2 rounds=$3
shift 3
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
caches=$(mktemp -d)
status=0
for r in $(seq "$rounds"); do
  for bin in "$before" "$after"; do
    echo "## round $r: $bin"
    NVFP4_JIT_CACHE_DIR="$caches/$(echo "$bin" | tr '/' '_')" "$bin" "$@" | grep -E '^ +[a-z0-9]' || status=1
  done
done
exit $status
