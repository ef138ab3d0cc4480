#!/usr/bin/env bash
# The one script for the GPU machine (see docs/performance.md): builds the runtime, tests and benchmarks
# from this checkout with the compiler switched off (the GPU machine has no MLIR), runs the GPU test suite
# and the benchmarks, optionally times flash-linear-attention beside us, and prints a short table last.
# Full logs go to $OUT (or ./gpu-logs).
#
#   bash scripts/gpu_suite.sh [--skip-build] [--no-tests] [--no-bench] [--fla DIR] [--shapes LIST] [--packages LIST]
#
# --fla DIR: DIR holds a git-ignored copy of flash-linear-attention's fla/ package; scripts/fla_bench.py times
#   FLA at the same shapes first and dgps-bench prints FLA's same-run times beside ours (--dgps_fla).
# --shapes LIST: dgps-bench's --dgps_shapes syntax (default: dgps-bench's standard shapes, bench/Shapes.h).
# --packages LIST: only these packages (dgps-bench --dgps_packages; FLA times only the same-named ops), e.g. the
#   long-sequence scaling table of docs/performance.md, whose T = 1M rows take long for every package.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
logs=${OUT:-$root/gpu-logs}
mkdir -p "$logs"
build=${DGPS_BUILD_DIR:-$root/build-gpu}
skip_build=0 run_tests=1 run_bench=1 fla="" shapes="" packages=""
while (($#)); do
  case "$1" in
    --skip-build) skip_build=1 ;;
    --no-tests) run_tests=0 ;;
    --no-bench) run_bench=0 ;;
    --fla) fla=$2; shift ;;
    --shapes) shapes=$2; shift ;;
    --packages) packages=$2; shift ;;
    *) echo "gpu_suite: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv > "$logs/gpu.txt" 2>&1
# The GPU machine's copy of the tree may carry stale git metadata: pass DGPS_COMMIT from the machine that sent it.
export DGPS_COMMIT=${DGPS_COMMIT:-$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)}
echo "commit $DGPS_COMMIT" >> "$logs/gpu.txt"

if ((!skip_build)); then
  [[ -d "$root/.deps/include" ]] || echo "gpu_suite: no .deps/include (run scripts/stage_device_deps.sh here first) — needed where nlohmann-json/CLI11 are not installed"
  DGPS_BUILD_DIR=$build DGPS_BUILD_TARGETS="${DGPS_BUILD_TARGETS:-dgps_gpu_tests dgps_tune_gpu_tests dgps_collective_gpu_tests dgps-tune-trial dgps-tune dgps-bench dgps-bench-host dgps-host-app dgps-run}" \
    bash "$root/scripts/build.sh" --no-compiler > "$logs/build.log" 2>&1 \
    || { tail -40 "$logs/build.log"; echo "gpu_suite: build failed"; exit 1; }
fi

status=0
if ((run_tests)); then
  (cd "$build" && DGPS_CACHE_DIR=${DGPS_CACHE_DIR:-$build/jit-cache} ctest -L gpu --output-on-failure -j${DGPS_GPU_TEST_JOBS:-6} --timeout 900) > "$logs/gpu-tests.log" 2>&1 || status=1
  grep -E "tests passed|Failed|\*\*\*" "$logs/gpu-tests.log" | tail -20
fi
bench_args=()
[[ -n "$shapes" ]] && bench_args+=("--dgps_shapes=$shapes")
[[ -n "$packages" ]] && bench_args+=("--dgps_packages=$packages")
if ((run_bench)) && [[ -n "$fla" && -d "$fla/fla" ]]; then
  # FLA first, at the same shapes: its Triton autotuning must not overlap our timings.
  fla_shapes=${shapes:-"forward:B=8,T=4096,H=16,K=128,V=128;forward:B=1,T=32768,H=16,K=128,V=128;decode:B=256,H=16,K=128,V=128;decode:B=1,H=16,K=128,V=128;decode:B=8,H=16,K=128,V=128;decode:B=32,H=16,K=128,V=128;forward:B=1,T=32768,H=2,HV=8,K=128,V=128;forward:B=1,T=32768,H=16,HV=64,K=128,V=128"}
  PYTHONUNBUFFERED=1 timeout "${DGPS_FLA_TIMEOUT:-300}" python3 "$root/scripts/fla_bench.py" "$fla" "$logs/fla.json" \
    --shapes "$fla_shapes" ${packages:+--ops "$packages"} > "$logs/fla.log" 2>&1 || echo "gpu_suite: fla_bench failed (see fla.log); FLA columns stay empty"
  [[ -s "$logs/fla.json" ]] && bench_args+=("--dgps_fla=$logs/fla.json")
fi
if ((run_bench)) && [[ -x "$build/bench/dgps-bench" ]]; then
  DGPS_CACHE_DIR=${DGPS_CACHE_DIR:-$build/jit-cache} "$build/bench/dgps-bench" "${bench_args[@]}" \
    --benchmark_out="$logs/bench.json" --benchmark_out_format=json > "$logs/bench.log" 2>&1 || status=1
fi
if ((run_bench)) && [[ -x "$build/bench/dgps-bench-host" ]]; then
  # Host time per forward/decode call (docs/performance.md, "Host time per call"); read the CPU column.
  DGPS_CACHE_DIR=${DGPS_CACHE_DIR:-$build/jit-cache} "$build/bench/dgps-bench-host" \
    --benchmark_out="$logs/host.json" --benchmark_out_format=json > "$logs/host.log" 2>&1 || status=1
  echo "== host time per call (CPU column, µs; full log in host.log)"
  grep -E "^gpu/" "$logs/host.log"
fi
if [[ -f "$logs/bench.log" ]]; then
  echo "== benchmarks (median; full JSON in bench.json, full log in bench.log)"
  sed -n '/^## dgps-bench summary/,$p' "$logs/bench.log"
fi
exit $status
