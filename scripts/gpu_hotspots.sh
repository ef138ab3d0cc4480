#!/usr/bin/env bash
# Where one kernel's warps stall: Nsight Compute's warp-state statistics and scripts/ncu_source_summary.py's views
# of its SASS (the most stalled lines, the phases between barriers, the memory instructions' L1 work), for one
# forward launch at the anchor shape. Run on the GPU machine after
# scripts/gpu_suite.sh built build-gpu/; the report and a text summary go to $OUT.
#
#   bash scripts/gpu_hotspots.sh PACKAGE ROLE [top N lines, default 40]     e.g. pgdn state_output
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
logs=${OUT:-$root/gpu-logs}
build=${DGPS_BUILD_DIR:-$root/build-gpu}
pkg=${1:?package}
role=${2:?role}
top=${3:-40}
mkdir -p "$logs"
rep="$logs/hotspots_${pkg}_${role}"
DGPS_CACHE_DIR=${DGPS_CACHE_DIR:-$build/jit-cache} ncu --clock-control none --section WarpStateStats \
  --section SourceCounters --section SchedulerStats -k "regex:${pkg}_fwd_${role}" --launch-skip 2 --launch-count 1 \
  -f -o "$rep" "$build/bench/dgps-bench" --dgps_packages="$pkg" --dgps_no_check --dgps_reps=4 --dgps_warmup=1 \
  --benchmark_filter="BM_forward/.*/B8_T4096_H16_K128_V128/default" > "$rep.log" 2>&1
ncu --import "$rep.ncu-rep" --page details --section WarpStateStats --section SchedulerStats > "$rep.details.txt" 2>&1
ncu --import "$rep.ncu-rep" --page source --csv --print-source sass > "$rep.sass.csv" 2>&1
python3 "$root/scripts/ncu_source_summary.py" "$rep.sass.csv" --top "$top" > "$rep.summary.txt"
cat "$rep.summary.txt"
grep -E "Stall|Warp Cycles|Issued|Eligible|Active Warps" "$rep.details.txt" | head -30
