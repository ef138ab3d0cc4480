#!/usr/bin/env bash
# Compares the preconditioner roles (precond_summary, precond_scan) of two package trees on the CPU (no GPU
# needed): ptxas registers and barriers for the target, and the static PTX mix of each kernel (instructions,
# bar.sync, ld/st shared and global, cp.async, ex2, shfl). Used to line the tile-IR roles
# (scripts/gen_tile_precond.sh) up against the device library's (generated/).
#
#   scripts/precond_resources.sh TILE_DIR [LIB_DIR] [SPEC...]
#     TILE_DIR, LIB_DIR: package trees <dir>/<name>/kernels.cu (LIB_DIR defaults to generated/)
#     SPEC: package names (default: every package in TILE_DIR)
#   Environment: NVCC (default nvcc), ARCH (default sm_90a); the packages' compile-time defaults (K = V = 128,
#   C = 64, 4 warps) unless DGPS_FLAGS adds -DDGPS_K=... etc.
set -euo pipefail

if [[ $# -lt 1 ]]; then
  echo "usage: precond_resources.sh TILE_DIR [LIB_DIR] [SPEC...]" >&2
  exit 2
fi
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tile="$1"
lib="${2:-$root/generated}"
shift $(($# >= 2 ? 2 : 1))
nvcc="${NVCC:-nvcc}"
arch="${ARCH:-sm_90a}"
if ! command -v "$nvcc" >/dev/null; then
  echo "precond_resources.sh: $nvcc not found (set NVCC)" >&2
  exit 1
fi
specs=("$@")
if [[ ${#specs[@]} -eq 0 ]]; then
  for d in "$tile"/*/; do specs+=("$(basename "$d")"); done
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# one line per precond kernel of one kernels.cu: name, registers, barriers, then the PTX counts
report() {
  local cu="$1" tag="$2"
  # shellcheck disable=SC2086
  "$nvcc" -std=c++17 -arch="$arch" -cubin -Xptxas -v -I"$root/runtime/device" ${DGPS_FLAGS:-} "$cu" -o "$work/k.cubin" 2>&1 |
    awk '/Compiling entry function/ {fn = $7; gsub(/\047/, "", fn)}
         /Used [0-9]+ registers/ && fn ~ /precond_s/ {print fn, "registers", $5, "barriers", $8}' >"$work/regs"
  # shellcheck disable=SC2086
  "$nvcc" -std=c++17 -arch="$arch" -ptx -I"$root/runtime/device" ${DGPS_FLAGS:-} "$cu" -o "$work/k.ptx"
  awk '/^\.visible \.entry/ {fn = $3; sub(/\(.*/, "", fn); on = fn ~ /precond_s/}
       on && /^\t[a-z]/ {print fn, "ptx"; split($1, o, ".");
         if (o[1] == "ld" || o[1] == "st" || o[1] == "bar" || o[1] == "ex2" || o[1] == "shfl" || o[1] == "cp")
           print fn, o[1] "." o[2]}' "$work/k.ptx" | sort | uniq -c | awk '{print $2, $3 "=" $1}' >"$work/ptx"
  while read -r fn rest; do
    echo "  $tag $fn $rest $(grep "^$fn " "$work/ptx" | cut -d' ' -f2 | tr '\n' ' ')"
  done <"$work/regs"
}
for s in "${specs[@]}"; do
  echo "$s:"
  report "$lib/$s/kernels.cu" "library"
  report "$tile/$s/kernels.cu" "tile   "
done
