#!/usr/bin/env bash
# Writes the tile-chunk-local packages (dgpsc compile --codegen=tile-chunk-local: the forward chunk_local
# kernel printed from tile IR against runtime/device/dgps/tile, every other kernel unchanged) of every
# shipped spec with a chunk forward and a generated/ package into OUTDIR/<name>/. A spec whose chunk_local has
# an op without a tile lowering is skipped and listed (dgpsc says which op); today every packaged spec is
# covered. generated/ is not touched (it holds every role from tile IR, dgpsc's default).
#
#   scripts/gen_tile_chunk_local.sh OUTDIR [BUILD_DIR]   (dgpsc at BUILD_DIR/compiler/tools/dgpsc/dgpsc)
#   DGPSC=/path/to/dgpsc scripts/gen_tile_chunk_local.sh OUTDIR
#   CODEGEN=tile-decode,tile-chunk-local scripts/gen_tile_chunk_local.sh OUTDIR   (both tile kernels)
#   CODEGEN=device-library scripts/gen_tile_chunk_local.sh OUTDIR   (the same specs through the device library:
#     the reference packages of tile.chunk_local_emu.*, independent of dgpsc's --codegen default)
#   JOBS=N: dgpsc runs in parallel (default: every core)
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
jobs="${JOBS:-$(nproc 2>/dev/null || echo 2)}"
logs="$(mktemp -d)"
trap 'rm -rf "$logs"' EXIT

# one dgpsc per spec, JOBS at a time (each is short and mostly start-up: the GPU machine's 16 cores write all
# packages in about the time of one)
one() {
  local spec="$1" name
  name="$(basename "$spec" .yaml)"
  if "$dgpsc" compile "$spec" -o "$out/$name" --codegen="$codegen" 2>"$logs/$name.log"; then
    echo ok >"$logs/$name.status"
  elif grep -q "has no tile lowering in chunk_local" "$logs/$name.log"; then
    rm -rf "${out:?}/$name"
    echo skipped >"$logs/$name.status"
  else
    echo failed >"$logs/$name.status"
  fi
}
running=0
unpackaged=()
for spec in "$root"/specs/*.yaml; do
  grep -Eq '^kernels:.*\bchunk_forward\b' "$spec" || continue
  # a spec the compiler refuses (no generated/ package, e.g. solve.steps > 1) has no chunk_local to print
  if [[ ! -f "$root/generated/$(basename "$spec" .yaml)/manifest.yaml" ]]; then
    unpackaged+=("$(basename "$spec" .yaml)")
    continue
  fi
  one "$spec" &
  running=$((running + 1))
  if [[ $running -ge $jobs ]]; then
    wait -n || true
    running=$((running - 1))
  fi
done
wait

n=0
skipped=()
failed=0
for st in "$logs"/*.status; do
  [[ -e "$st" ]] || continue
  name="$(basename "$st" .status)"
  case "$(cat "$st")" in
    ok) n=$((n + 1)) ;;
    skipped) skipped+=("$name") ;;
    *)
      cat "$logs/$name.log" >&2
      echo "gen_tile_chunk_local.sh: dgpsc failed on $root/specs/$name.yaml" >&2
      failed=1
      ;;
  esac
done
[[ $failed -eq 0 ]] || exit 1
echo "gen_tile_chunk_local.sh: $n $codegen package(s) in $out; skipped (no tile lowering): ${skipped[*]:-none};" \
  "not packaged (no generated/ package): ${unpackaged[*]:-none}"
