#!/usr/bin/env bash
# Writes the tile-precond packages (dgpsc compile --codegen=tile-precond: the preconditioner roles
# precond_summary and precond_scan printed from tile IR against runtime/device/dgps/tile, every other kernel
# unchanged) of every shipped spec with those roles (a generated/ package whose manifest lists them) into
# OUTDIR/<name>/. A spec whose preconditioner roles hold an op without a tile lowering (none of the shipped
# specs today) is skipped and listed. generated/ is not touched (it holds every role from tile IR, dgpsc's
# default).
#
#   scripts/gen_tile_precond.sh OUTDIR [BUILD_DIR]   (dgpsc at BUILD_DIR/compiler/tools/dgpsc/dgpsc)
#   DGPSC=/path/to/dgpsc scripts/gen_tile_precond.sh OUTDIR
#   EXTRA_CODEGEN=tile-chunk-local scripts/gen_tile_precond.sh OUTDIR   (other roles on tiles too)
#   CODEGEN=device-library scripts/gen_tile_precond.sh OUTDIR   (the same specs through the device library: the
#     reference packages of tile.precond_emu.*, independent of dgpsc's --codegen default)
set -euo pipefail

if [[ $# -lt 1 ]]; then
  echo "usage: gen_tile_precond.sh OUTDIR [BUILD_DIR]" >&2
  exit 2
fi
out="$1"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${2:-$root/build}"
dgpsc="${DGPSC:-$build/compiler/tools/dgpsc/dgpsc}"
codegen="${CODEGEN:-tile-precond}${EXTRA_CODEGEN:+,$EXTRA_CODEGEN}"
if [[ ! -x "$dgpsc" ]]; then
  echo "gen_tile_precond.sh: dgpsc not found at $dgpsc (build the compiler, or set DGPSC)" >&2
  exit 1
fi

mkdir -p "$out"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
covered=()
skipped=()
for spec in "$root"/specs/*.yaml; do
  name="$(basename "$spec" .yaml)"
  manifest="$root/generated/$name/manifest.yaml"
  [[ -f "$manifest" ]] && grep -q "role: precond_scan" "$manifest" || continue
  if "$dgpsc" compile "$spec" -o "$out/$name" --codegen="$codegen" 2>"$log"; then
    covered+=("$name")
  elif grep -q "has no tile lowering in precond_" "$log"; then
    rm -rf "${out:?}/$name"
    skipped+=("$name ($(grep -o "'chunk\.[a-z_]*'" "$log" | head -1))")
  else
    cat "$log" >&2
    echo "gen_tile_precond.sh: dgpsc failed on $spec" >&2
    exit 1
  fi
done
echo "gen_tile_precond.sh: in $out ($codegen): ${covered[*]:-none}; skipped (no tile lowering): ${skipped[*]:-none}"
