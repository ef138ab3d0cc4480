#!/usr/bin/env bash
# Writes the tile-decode packages (dgpsc compile --codegen=tile-decode: the decode kernel printed from tile
# IR against runtime/device/dgps/tile, every other kernel from the device library) of every shipped spec with a
# decode kernel into OUTDIR/<name>/. generated/ is not touched.
#
#   scripts/gen_tile_decode.sh OUTDIR [BUILD_DIR]   (dgpsc at BUILD_DIR/compiler/tools/dgpsc/dgpsc; default build)
#   DGPSC=/path/to/dgpsc scripts/gen_tile_decode.sh OUTDIR
#   CODEGEN=device-library scripts/gen_tile_decode.sh OUTDIR   (the same specs through the device library: the
#     reference packages of tile.decode_emu.*, independent of dgpsc's --codegen default)
set -euo pipefail

if [[ $# -lt 1 ]]; then
  echo "usage: gen_tile_decode.sh OUTDIR [BUILD_DIR]" >&2
  exit 2
fi
out="$1"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${2:-$root/build}"
dgpsc="${DGPSC:-$build/compiler/tools/dgpsc/dgpsc}"
codegen="${CODEGEN:-tile-decode}"
if [[ ! -x "$dgpsc" ]]; then
  echo "gen_tile_decode.sh: dgpsc not found at $dgpsc (build the compiler, or set DGPSC)" >&2
  exit 1
fi

mkdir -p "$out"
n=0
for spec in "$root"/specs/*.yaml; do
  name="$(basename "$spec" .yaml)"
  # Only specs whose kernels list decode (the same rule as the manifest's decode entry).
  grep -Eq '^kernels:.*\bdecode\b' "$spec" || continue
  log="$(mktemp)"
  if ! "$dgpsc" compile "$spec" -o "$out/$name" --codegen="$codegen" 2>"$log"; then
    cat "$log" >&2
    rm -f "$log"
    echo "gen_tile_decode.sh: dgpsc failed on $spec" >&2
    exit 1
  fi
  rm -f "$log"
  n=$((n + 1))
done
echo "gen_tile_decode.sh: $n package(s) (--codegen=$codegen) in $out"
