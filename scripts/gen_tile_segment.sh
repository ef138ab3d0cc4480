#!/usr/bin/env bash
# Writes, into OUTDIR/<name>/, the package of every shipped spec whose state pass has a tile lowering, with both
# chunk roles on tiles and the sequence-parallel state pass's kernels (dgpsc compile
# --codegen=tile-chunk-local,tile-state-output,tile-segment; docs/architecture.md "Long sequences: the segmented
# state pass"). A spec without that lowering (several Householder steps per token) is listed as skipped and gets
# no directory.
#   scripts/gen_tile_segment.sh OUTDIR [BUILD_DIR]      (DGPSC overrides the compiler's path)
#   WRITE_KEY=stored|segments|rebuilt|auto (default auto): dgpsc --write-key, where a key-side preconditioner's
#   walks take P⊙k from (docs/architecture.md "The write key: stored or rebuilt")
set -euo pipefail

if [[ $# -lt 1 ]]; then
  echo "usage: gen_tile_segment.sh OUTDIR [BUILD_DIR]" >&2
  exit 2
fi
out="$1"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${2:-$root/build}"
dgpsc="${DGPSC:-$build/compiler/tools/dgpsc/dgpsc}"
if [[ ! -x "$dgpsc" ]]; then
  echo "gen_tile_segment.sh: dgpsc not found at $dgpsc (build the compiler, or set DGPSC)" >&2
  exit 1
fi

mkdir -p "$out"
made=()
skipped=()
for spec in "$root"/specs/*.yaml; do
  name="$(basename "$spec" .yaml)"
  grep -Eq '^kernels:.*\bchunk_forward\b' "$spec" || continue
  [[ -f "$root/generated/$name/manifest.yaml" ]] || continue  # the compiler refuses it (no package at all)
  log="$(mktemp)"
  if "$dgpsc" compile "$spec" -o "$out/$name" --codegen=tile-chunk-local,tile-state-output,tile-segment --write-key="${WRITE_KEY:-auto}" 2>"$log"; then
    made+=("$name")
  elif grep -q "has no tile lowering in \|does not print yet" "$log"; then
    rm -rf "${out:?}/$name"
    skipped+=("$name")
  else
    cat "$log" >&2
    rm -f "$log"
    echo "gen_tile_segment.sh: dgpsc failed on $spec" >&2
    exit 1
  fi
  rm -f "$log"
done
echo "gen_tile_segment.sh: in $out: with segment kernels: ${made[*]:-none}; skipped (no tile lowering of the" \
  "state pass): ${skipped[*]:-none}"
