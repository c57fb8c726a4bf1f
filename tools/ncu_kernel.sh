#!/usr/bin/env bash
# Profiles the first launch of one kernel with Nsight Compute and writes what limits it:
# $OUT/NAME.txt (speed of light, warp stall reasons, pipes, occupancy) and $OUT/NAME_sass.csv
# (every SASS instruction with its executions and stall samples).
# Usage (on the GPU machine, repository root, Release build in ./build):
#   tools/ncu_kernel.sh NAME KERNEL_REGEX COMMAND...
# e.g. tools/ncu_kernel.sh gemm_m1 'gemm.*prepacked.*bm8_' build/bin/nvfp4-jit bench gemm --quick --shape 8192,8192 --m 1
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export PATH=/usr/local/cuda/bin:$PATH LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
name=$1 regex=$2
shift 2
ncu -f -o "$OUT/$name" -k "regex:$regex" --launch-count 1 \
  --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section InstructionStats \
  --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats \
  --section SourceCounters \
  --metrics regex:'smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio',regex:'sm__inst_executed_pipe_.*\.avg\.pct_of_peak_sustained_active' \
  "$@" > "$OUT/$name.log" 2>&1
ncu -i "$OUT/$name.ncu-rep" --page details --print-details all > "$OUT/$name.txt" 2>&1
ncu -i "$OUT/$name.ncu-rep" --page raw --csv > "$OUT/${name}_raw.csv" 2>&1
ncu -i "$OUT/$name.ncu-rep" --page source --csv --print-source sass > "$OUT/${name}_sass.csv" 2>&1
rm -f "$OUT/$name.ncu-rep"
grep -E "Duration|Warp Cycles Per Issued|Issue Slots Busy|DRAM Throughput" "$OUT/$name.txt" | head -8
