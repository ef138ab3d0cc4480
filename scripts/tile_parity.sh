#!/usr/bin/env bash
# Library vs tile IR, per forward role: kernel durations (Nsight Compute medians) of the device library's
# packages (generated/) and of the all-tile packages of the same specs. The tile kernels may replace the library
# only when every role is at least as fast. Two steps, because the GPU machine builds no compiler:
#
#   scripts/tile_parity.sh gen DIR [DGPSC]     (CPU, with dgpsc: writes DIR/<spec>/ for every spec in specs/
#                                               with --codegen=tile-chunk-local,tile-state-output,tile-decode,
#                                               tile-precond[,tile-segment when the spec has one])
#   scripts/tile_parity.sh time DIR [BUILD_DIR] (GPU, with ncu and BUILD_DIR/bench/dgps-bench: one line per
#                                               package and side, "<role> <median µs>" for every _fwd_ kernel)
#   Environment: PACKAGES (default kda,pgdn,pkda), SHAPE (default forward:B=8,T=4096,H=16,K=128,V=128).
# The CPU-side evidence (registers, spills, PTX instruction mix per role) is scripts/role_resources.sh ROLE DIR.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
usage="usage: tile_parity.sh gen DIR [DGPSC] | tile_parity.sh time DIR [BUILD_DIR]"
[[ $# -ge 2 ]] || { echo "$usage" >&2; exit 2; }
mode="$1"
dir="$2"

if [[ "$mode" == gen ]]; then
  dgpsc="${3:-$root/build/compiler/tools/dgpsc/dgpsc}"
  [[ -x "$dgpsc" ]] || { echo "tile_parity.sh: dgpsc not found at $dgpsc" >&2; exit 1; }
  mkdir -p "$dir"
  for spec in "$root"/specs/*.yaml; do
    name="$(basename "$spec" .yaml)"
    rm -rf "${dir:?}/$name"
    # the sequence-parallel pass has no tile lowering for every spec: without it that role stays the library's
    if ! "$dgpsc" compile "$spec" -o "$dir/$name" \
        --codegen=tile-chunk-local,tile-state-output,tile-decode,tile-precond,tile-segment 2>/dev/null; then
      "$dgpsc" compile "$spec" -o "$dir/$name" --codegen=tile-chunk-local,tile-state-output,tile-decode,tile-precond \
        2>"$dir/$name.log" || { echo "tile_parity.sh: $name: see $dir/$name.log" >&2; exit 1; }
      echo "$name: without tile-segment"
    fi
  done
  echo "tile packages in $dir"
  exit 0
fi
[[ "$mode" == time ]] || { echo "$usage" >&2; exit 2; }

build="${3:-$root/build}"
bench="$build/bench/dgps-bench"
command -v ncu >/dev/null || { echo "tile_parity.sh: ncu not found" >&2; exit 1; }
[[ -x "$bench" ]] || { echo "tile_parity.sh: $bench not found (DGPS_BUILD_TARGETS=dgps-bench scripts/build.sh --no-compiler)" >&2; exit 1; }
shape="${SHAPE:-forward:B=8,T=4096,H=16,K=128,V=128}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
IFS=, read -r -a packages <<<"${PACKAGES:-kda,pgdn,pkda}"
for p in "${packages[@]}"; do
  for side in lib tile; do
    g="$root/generated"
    [[ $side == tile ]] && g="$dir"
    # skip the first reps (JIT, warm-up), then 24 launches of the forward's kernels
    timeout 300 ncu --clock-control none --metrics gpu__time_duration.sum -k regex:_fwd_ --launch-skip 8 \
      --launch-count 24 --csv "$bench" --dgps_generated_dir="$g" --dgps_packages="$p" --dgps_no_check \
      --dgps_reps=8 --dgps_warmup=2 --dgps_shapes="$shape" 2>/dev/null | grep '^"' >"$work/$p.$side.csv" || true
    python3 - "$work/$p.$side.csv" "$p $side" <<'PY'
import collections, csv, statistics, sys
times, col = collections.defaultdict(list), None
for row in csv.reader(open(sys.argv[1])):
    if row and row[0] == "ID":
        col = {n: i for i, n in enumerate(row)}
        continue
    if col is None or len(row) < len(col) or row[col["Metric Name"]] != "gpu__time_duration.sum":
        continue
    scale = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}[row[col["Metric Unit"]]]
    times[row[col["Kernel Name"]].split("(")[0]].append(float(row[col["Metric Value"]].replace(",", "")) * scale)
if not times:
    sys.exit(f"{sys.argv[2]}: no kernel durations (ncu failed?)")
print(sys.argv[2] + ": " + "; ".join(f"{k.split('_fwd_')[-1]} {statistics.median(v):.1f} us (n={len(v)})"
                                      for k, v in sorted(times.items())))
PY
  done
done
