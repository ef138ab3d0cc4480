#!/usr/bin/env bash
# Writes packages with both forward chunk roles printed from tile IR (dgpsc compile
# --codegen=tile-chunk-local,tile-state-output: chunk_local and state_output against runtime/device/dgps/tile,
# every other kernel unchanged) of every shipped spec with a chunk forward into OUTDIR/<name>/, the
# preconditioned ones included (their state_output's producer warpgroup rebuilds P⊙k or P⊙q). A spec whose
# state_output has an op without a tile lowering gets its chunk_local on tiles only and is listed; one whose
# chunk_local has none is skipped and listed. generated/ is not touched (it holds every role from tile IR,
# dgpsc's default).
#
#   scripts/gen_tile_state_output.sh OUTDIR [BUILD_DIR]   (dgpsc at BUILD_DIR/compiler/tools/dgpsc/dgpsc)
#   DGPSC=/path/to/dgpsc scripts/gen_tile_state_output.sh OUTDIR
#   EXTRA_CODEGEN=tile-decode scripts/gen_tile_state_output.sh OUTDIR   (also the decode kernel on tiles)
set -euo pipefail

if [[ $# -lt 1 ]]; then
  echo "usage: gen_tile_state_output.sh OUTDIR [BUILD_DIR]" >&2
  exit 2
fi
out="$1"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${2:-$root/build}"
dgpsc="${DGPSC:-$build/compiler/tools/dgpsc/dgpsc}"
extra="${EXTRA_CODEGEN:+,$EXTRA_CODEGEN}"
if [[ ! -x "$dgpsc" ]]; then
  echo "gen_tile_state_output.sh: dgpsc not found at $dgpsc (build the compiler, or set DGPSC)" >&2
  exit 1
fi

mkdir -p "$out"
both=()
localOnly=()
skipped=()
unpackaged=()
# compile SPEC CODEGEN: 0 on success, 3 when a role has no tile lowering (log kept in $log), else exits
compile() {
  if "$dgpsc" compile "$1" -o "$out/$name" --codegen="$2" 2>"$log"; then return 0; fi
  rm -rf "${out:?}/$name"
  if grep -q "has no tile lowering in \|has no state_output tile emitter\|does not print yet" "$log"; then return 3; fi
  cat "$log" >&2
  echo "gen_tile_state_output.sh: dgpsc failed on $1" >&2
  exit 1
}
for spec in "$root"/specs/*.yaml; do
  name="$(basename "$spec" .yaml)"
  grep -Eq '^kernels:.*\bchunk_forward\b' "$spec" || continue
  # a spec the compiler refuses (no generated/ package, e.g. solve.steps > 1) has no chunk roles to print
  if [[ ! -f "$root/generated/$name/manifest.yaml" ]]; then unpackaged+=("$name"); continue; fi
  log="$(mktemp)"
  rc=0
  compile "$spec" "tile-chunk-local,tile-state-output$extra" || rc=$?
  if [[ $rc -eq 0 ]]; then
    both+=("$name")
  else
    rc=0
    compile "$spec" "tile-chunk-local$extra" || rc=$?
    if [[ $rc -eq 0 ]]; then localOnly+=("$name"); else skipped+=("$name"); fi
  fi
  rm -f "$log"
done
echo "gen_tile_state_output.sh: in $out: both chunk roles on tiles: ${both[*]:-none}; chunk_local only (state_output" \
  "has no tile lowering): ${localOnly[*]:-none}; skipped: ${skipped[*]:-none}; not packaged (no generated/" \
  "package): ${unpackaged[*]:-none}"
