#!/usr/bin/env bash
# Per-kernel GPU times of the forward roles (precond_summary, precond_scan, chunk_local, state_output) at the
# anchor shape, from Nsight Compute's gpu__time_duration (clocks left alone, as METHOD.md asks). Run on the GPU
# machine after scripts/gpu_suite.sh built build-gpu/; writes profile.csv and a median table to $OUT.
#
#   bash scripts/gpu_profile.sh [packages, default gdn,pgdn,kda,pkda] [benchmark filter]
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
logs=${OUT:-$root/gpu-logs}
build=${DGPS_BUILD_DIR:-$root/build-gpu}
packages=${1:-gdn,pgdn,kda,pkda}
filter=${2:-BM_forward/.*/B8_T4096_H16_K128_V128/default}
mkdir -p "$logs"
command -v ncu >/dev/null || { echo "gpu_profile: ncu not found"; exit 1; }
out="$logs/profile.csv"
: > "$out"
for p in ${packages//,/ }; do
  DGPS_CACHE_DIR=${DGPS_CACHE_DIR:-$build/jit-cache} ncu --clock-control none --metrics gpu__time_duration.sum \
    -k regex:_fwd_ --launch-skip 8 --launch-count 24 --csv \
    "$build/bench/dgps-bench" --dgps_packages="$p" --dgps_no_check --dgps_reps=10 --dgps_warmup=2 \
    --benchmark_filter="$filter" 2>/dev/null | grep '^"' >> "$out"
done
python3 - "$out" <<'EOF'
import csv, statistics, sys, collections
times = collections.defaultdict(list)
col = None
for row in csv.reader(open(sys.argv[1])):
    if row and row[0] == "ID":
        col = {name: i for i, name in enumerate(row)}
        continue
    if col is None or len(row) < len(col) or row[col["Metric Name"]] != "gpu__time_duration.sum":
        continue
    unit, value = row[col["Metric Unit"]], row[col["Metric Value"]]
    scale = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}.get(unit, float("nan"))
    times[row[col["Kernel Name"]].split("(")[0]].append(float(value.replace(",", "")) * scale)
print("== per-kernel GPU time (median us, ncu gpu__time_duration, anchor shape)")
for name, v in sorted(times.items()):
    print(f"{name:48s} {statistics.median(v):9.1f} us  (n={len(v)})")
EOF
