#!/usr/bin/env bash
# Host time per Runtime::forward / decode call, before and after a change, on the GPU machine: builds
# dgps-bench-host (bench/HostOverhead.cpp, from this checkout) against this checkout's runtime and against
# BEFORE's, runs both, and prints their gpu/ rows (CPU column = µs per call) one after the other.
#
#   bash scripts/host_overhead_compare.sh BEFORE [dgps-bench-host flags]
#     BEFORE  a commit of this repository (extracted with git archive) or a folder holding that tree
#
# Builds with the compiler off (scripts/build.sh --no-compiler) into $root/build-host-{before,after};
# logs and JSON in $OUT (or ./gpu-logs).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
(($# >= 1)) || { echo "usage: $0 BEFORE [dgps-bench-host flags]" >&2; exit 2; }
before=$1; shift
logs=${OUT:-$root/gpu-logs}
mkdir -p "$logs"
src_before=$root/build-host-before/src
if [[ -d "$before" ]]; then
  src_before=$(cd "$before" && pwd)
else
  rm -rf "$src_before" && mkdir -p "$src_before"
  git -C "$root" archive "$before" | tar -x -C "$src_before"
fi
# The benchmark itself is this checkout's; an older tree gets the file and its target.
if ! grep -q "dgps-bench-host" "$src_before/bench/CMakeLists.txt"; then
  cp "$root/bench/HostOverhead.cpp" "$src_before/bench/"
  cat >> "$src_before/bench/CMakeLists.txt" <<'CMAKE'
add_executable(dgps-bench-host HostOverhead.cpp)
target_link_libraries(dgps-bench-host PRIVATE dgps_bench_lib)
target_include_directories(dgps-bench-host PRIVATE ${PROJECT_SOURCE_DIR}/runtime/lib ${PROJECT_SOURCE_DIR}/runtime/device)
CMAKE
fi
for side in before after; do
  tree=$root
  [[ $side == before ]] && tree=$src_before
  DGPS_BUILD_DIR=$root/build-host-$side DGPS_BUILD_TARGETS=dgps-bench-host \
    bash "$tree/scripts/build.sh" --no-compiler > "$logs/host-build-$side.log" 2>&1 \
    || { tail -30 "$logs/host-build-$side.log"; echo "host_overhead_compare: $side build failed"; exit 1; }
done
for side in before after; do
  DGPS_CACHE_DIR=${DGPS_CACHE_DIR:-$root/build-host-after/jit-cache} "$root/build-host-$side/bench/dgps-bench-host" \
    --dgps_generated="$root/generated" --benchmark_out="$logs/host-$side.json" --benchmark_out_format=json "$@" \
    > "$logs/host-$side.log" 2>&1 || { tail -30 "$logs/host-$side.log"; echo "host_overhead_compare: $side run failed"; exit 1; }
  echo "== $side ($( [[ $side == before ]] && echo "$before" || git -C "$root" rev-parse --short HEAD 2>/dev/null || echo this tree )): CPU column = host µs per call"
  grep -E "^(Benchmark|gpu/|cpu/request|cpu/variant|cpu/validate|cpu/warm)" "$logs/host-$side.log"
done
