#!/usr/bin/env bash
# Writes the tile-chunk-local packages (dgpsc compile --codegen=tile-chunk-local: the forward chunk_local
# kernel printed from tile IR against runtime/device/dgps/tile, every other kernel unchanged) of every
# shipped spec with a chunk forward into OUTDIR/<name>/. A spec whose chunk_local has an op without a tile
# lowering is skipped and listed (dgpsc says which op); today every shipped spec is covered. generated/ is not
# touched: the device-library chunk_local stays the default until the tile path is measured on the GPU
# (docs/architecture.md, "Tile IR").
#
#   scripts/gen_tile_chunk_local.sh OUTDIR [BUILD_DIR]   (dgpsc at BUILD_DIR/compiler/tools/dgpsc/dgpsc)
#   DGPSC=/path/to/dgpsc scripts/gen_tile_chunk_local.sh OUTDIR
#   CODEGEN=tile-decode,tile-chunk-local scripts/gen_tile_chunk_local.sh OUTDIR   (both tile kernels)
set -euo pipefail

if [[ $# -lt 1 ]]; then
  echo "usage: gen_tile_chunk_local.sh OUTDIR [BUILD_DIR]" >&2
  exit 2
fi
out="$1"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${2:-$root/build}"
dgpsc="${DGPSC:-$build/compiler/tools/dgpsc/dgpsc}"
codegen="${CODEGEN:-tile-chunk-local}"
if [[ ! -x "$dgpsc" ]]; then
  echo "gen_tile_chunk_local.sh: dgpsc not found at $dgpsc (build the compiler, or set DGPSC)" >&2
  exit 1
fi

mkdir -p "$out"
n=0
skipped=()
for spec in "$root"/specs/*.yaml; do
  name="$(basename "$spec" .yaml)"
  grep -Eq '^kernels:.*\bchunk_forward\b' "$spec" || continue
  log="$(mktemp)"
  if ! "$dgpsc" compile "$spec" -o "$out/$name" --codegen="$codegen" 2>"$log"; then
    if grep -q "has no tile lowering in chunk_local" "$log"; then
      skipped+=("$name")
      rm -rf "${out:?}/$name" "$log"
      continue
    fi
    cat "$log" >&2
    rm -f "$log"
    echo "gen_tile_chunk_local.sh: dgpsc failed on $spec" >&2
    exit 1
  fi
  rm -f "$log"
  n=$((n + 1))
done
echo "gen_tile_chunk_local.sh: $n tile-chunk-local package(s) in $out; skipped (no tile lowering): ${skipped[*]:-none}"
