#!/usr/bin/env bash
# Old beside new on the GPU machine, in one call: a base revision and this checkout are built side by side and timed
# by their own dgps-bench in alternating passes, then scripts/bench_compare.py prints one table (per row: each pass's
# median of both trees and the change). This is the comparison docs/performance.md asks for before a device change
# lands ("old beside new"), and what runs 15-18 did by hand.
#
#   here:        bash scripts/gpu_compare.sh prepare BASE_REV
#                  writes .base/ (git archive of BASE_REV, plus .deps/ when present; .base/ is git-ignored)
#   GPU machine: bash scripts/gpu_compare.sh run [--packages LIST] [--shapes LIST] [--passes N] [--skip-build]
#                  (the device tool's carry: .base and .deps); defaults: gdn,deltanet,kda,pgdn,pkda, the B8 T4096
#                  and B1 T32768 forward shapes (dgps-bench's --dgps_shapes syntax), 2 passes; --skip-build reuses
#                  both trees' dgps-bench from an earlier call on the same (warm) machine; --new-env NAME=VALUE
#                  (repeatable) sets an environment variable for the new tree's passes only: a switch
#                  timed beside its default with BASE_REV = HEAD, e.g. --new-env DGPS_SUMMARY_PAIRS=0;
#                  --env-only: no .base, this tree timed with and without the --new-env switches from one build
#                  ($DGPS_BUILD_DIR when set, e.g. the GPU suite's, else $DGPS_COMPARE_ROOT/build-new)
#
# Logs, the merged table (compare.md) and the build logs go to $OUT (or ./gpu-logs). Build folders: $DGPS_COMPARE_ROOT
# (default /tmp/dgps-compare), one per tree, kept for a second call on a warm machine.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mode=${1:-}
shift || true

case "$mode" in
  prepare)
    rev=${1:?"usage: gpu_compare.sh prepare BASE_REV"}
    git -C "$root" rev-parse --verify --quiet "$rev^{commit}" > /dev/null || { echo "gpu_compare: '$rev' is not a commit here" >&2; exit 2; }
    rm -rf "$root/.base" && mkdir "$root/.base"
    git -C "$root" archive "$rev" | tar -x -C "$root/.base" || { echo "gpu_compare: git archive of $rev failed" >&2; exit 1; }
    [[ -d "$root/.deps" ]] && cp -r "$root/.deps" "$root/.base/"
    echo "$(git -C "$root" rev-parse --short "$rev")" > "$root/.base/.compare-rev"
    echo "gpu_compare: .base/ holds $(cat "$root/.base/.compare-rev"); on the GPU machine run"
    echo "  bash scripts/gpu_compare.sh run    (carry .base and .deps)"
    ;;
  run)
    packages=gdn,deltanet,kda,pgdn,pkda
    shapes="forward:B=8,T=4096,H=16,K=128,V=128;forward:B=1,T=32768,H=16,K=128,V=128"
    passes=2 skip_build=0 env_only=0
    new_env=()
    while (($#)); do
      case "$1" in
        --packages) packages=${2:?}; shift ;;
        --shapes) shapes=${2:?}; shift ;;
        --passes) passes=${2:?}; shift ;;
        --skip-build) skip_build=1 ;;
        --env-only) env_only=1 ;;
        --new-env)
          [[ "${2:-}" =~ ^[A-Z_][A-Z0-9_]*=.*$ ]] || { echo "gpu_compare: --new-env takes NAME=VALUE, not '${2:-}'" >&2; exit 2; }
          new_env+=("$2"); shift ;;
        *) echo "gpu_compare: unknown option $1" >&2; exit 2 ;;
      esac
      shift
    done
    [[ "$passes" =~ ^[1-9][0-9]?$ ]] || { echo "gpu_compare: --passes takes 1 to 99, not '$passes'" >&2; exit 2; }
    logs=${OUT:-$root/gpu-logs}
    work=${DGPS_COMPARE_ROOT:-/tmp/dgps-compare}
    mkdir -p "$logs" "$work"
    trees=("$root/.base" "$root")
    names=(base new)
    builds=("$work/build-base" "$work/build-new")
    if ((env_only)); then
      ((${#new_env[@]})) || { echo "gpu_compare: --env-only times --new-env switches; none given" >&2; exit 2; }
      trees=("$root" "$root")
      builds=("${DGPS_BUILD_DIR:-$work/build-new}" "${DGPS_BUILD_DIR:-$work/build-new}")
    else
      [[ -f "$root/.base/scripts/build.sh" ]] || { echo "gpu_compare: no .base/ (run 'gpu_compare.sh prepare REV' here first and carry .base)" >&2; exit 2; }
    fi
    for i in 0 1; do
      ((skip_build)) && continue
      ((env_only && i == 0)) && continue  # one tree, one build
      ( DGPS_BUILD_DIR="${builds[$i]}" DGPS_BUILD_TARGETS=dgps-bench \
          bash "${trees[$i]}/scripts/build.sh" --no-compiler > "$logs/build-${names[$i]}.log" 2>&1 \
          || { tail -30 "$logs/build-${names[$i]}.log"; echo "gpu_compare: the ${names[$i]} tree did not build"; exit 1; } ) &
    done
    wait || true
    for i in 0 1; do
      [[ -x "${builds[$i]}/bench/dgps-bench" ]] || { echo "gpu_compare: no dgps-bench for the ${names[$i]} tree" >&2; exit 1; }
    done
    for ((p = 1; p <= passes; ++p)); do
      for i in 0 1; do  # alternating, so a drift of the machine falls on both trees
        extra=()
        ((i == 1)) && extra=("${new_env[@]}")
        env "${extra[@]}" DGPS_CACHE_DIR="$work/cache-${names[$i]}" "${builds[$i]}/bench/dgps-bench" --dgps_packages="$packages" \
          --dgps_shapes="$shapes" --dgps_generated_dir="${trees[$i]}/generated" \
          > "$logs/pass${p}-${names[$i]}.log" 2>&1 || echo "gpu_compare: pass $p of the ${names[$i]} tree exited non-zero (see its log)"
      done
    done
    base_logs=() new_logs=()
    for ((p = 1; p <= passes; ++p)); do base_logs+=("$logs/pass$p-base.log"); new_logs+=("$logs/pass$p-new.log"); done
    base_rev=$(cat "$root/.base/.compare-rev" 2>/dev/null || echo '?')
    ((env_only)) && base_rev="${DGPS_COMMIT:-this checkout} without the switches"
    echo "base $base_rev beside new ${DGPS_COMMIT:-this checkout}${new_env[*]:+ with ${new_env[*]}}; $passes passes" \
      | tee "$logs/compare.md"
    python3 "$root/scripts/bench_compare.py" --base "${base_logs[@]}" --new "${new_logs[@]}" | tee -a "$logs/compare.md"
    ;;
  *)
    echo "usage: gpu_compare.sh prepare BASE_REV | run [--packages LIST] [--shapes LIST] [--passes N] [--skip-build] [--new-env NAME=VALUE] [--env-only]" >&2
    exit 2
    ;;
esac
