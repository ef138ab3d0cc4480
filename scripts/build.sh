#!/usr/bin/env bash
# Configures and builds DGPS into build/ (or $DGPS_BUILD_DIR). Extra arguments go to cmake.
# Use --no-compiler on machines without MLIR (the GPU machine): runtime, tests and benchmarks only.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${DGPS_BUILD_DIR:-$root/build}
args=()
for a in "$@"; do
  case "$a" in
    --no-compiler) args+=(-DDGPS_ENABLE_COMPILER=OFF) ;;
    *) args+=("$a") ;;
  esac
done
jobs=${DGPS_JOBS:-$(nproc)}
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
cmake -S "$root" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release "${args[@]}" >/dev/null
targets=()
# DGPS_BUILD_TARGETS="a b": build only these targets (the GPU suite builds just what it runs).
for t in ${DGPS_BUILD_TARGETS:-}; do targets+=(--target "$t"); done
cmake --build "$build" -j "$jobs" "${targets[@]}"
