#!/usr/bin/env bash
# On the GPU machine: the tile-chunk-local packages (dgpsc --codegen=tile-chunk-local) against the float64
# reference, then the forward with the device library's chunk_local (old) and the tile IR's (new) timed in
# one run at B=8 T=4096 H=16 K=V=128 (and any FORWARD_SHAPES). Both package sets are written here with an
# explicit --codegen, so the comparison holds whatever dgpsc's default (kDefaultCodegen) is.
#
#   scripts/bench_tile_chunk_local.sh [BUILD_DIR] [OUTDIR]     (default: build, /tmp/dgps_tile_chunk_local)
#   PACKAGES=gdn,kda scripts/bench_tile_chunk_local.sh         (default: gdn,pgdn,atq,kda,pkda,linear_attention,deltanet)
#   NO_TESTS=1 ...: timing only
# Needs BUILD_DIR with dgpsc, dgps-bench and dgps_gpu_tests. Tables: OUTDIR/{old,new,old2}.md (old timed
# twice, before and after new, to expose order effects). The default may switch to the tile chunk_local
# only if new.md is at least as fast as both old tables for every package.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$root/build}"
out="${2:-/tmp/dgps_tile_chunk_local}"
pk="${PACKAGES:-gdn,pgdn,atq,kda,pkda,linear_attention,deltanet}"
shapes="${FORWARD_SHAPES:-forward:B=8,T=4096,H=16,K=128,V=128}"
bench="$build/bench/dgps-bench"
tests="$build/tests/gpu/dgps_gpu_tests"
dgpsc="$build/compiler/tools/dgpsc/dgpsc"

rm -rf "$out/tile" "$out/library"
DGPSC="$dgpsc" "$root/scripts/gen_tile_chunk_local.sh" "$out/tile"
CODEGEN=device-library DGPSC="$dgpsc" "$root/scripts/gen_tile_chunk_local.sh" "$out/library"

status=0
if [[ -z "${NO_TESTS:-}" ]]; then
  echo "=== GPU forward tests of the tile-chunk-local packages ==="
  for name in ${pk//,/ }; do
    echo "--- $name"
    DGPS_GPU_PACKAGE="$out/tile/$name" "$tests" \
      --gtest_filter='*Forward*:*GroupedValueHeads*:*Varlen*:*EveryTunableConfig*' || status=1
  done
fi

echo "=== forward: device-library chunk_local (old) ==="
"$bench" --dgps_generated_dir="$out/library" --dgps_packages="$pk" --dgps_shapes="$shapes" --dgps_table="$out/old.md"
echo "=== forward: tile-IR chunk_local (new) ==="
"$bench" --dgps_generated_dir="$out/tile" --dgps_packages="$pk" --dgps_shapes="$shapes" --dgps_table="$out/new.md"
echo "=== forward: device-library chunk_local again (old) ==="
"$bench" --dgps_generated_dir="$out/library" --dgps_packages="$pk" --dgps_shapes="$shapes" --dgps_table="$out/old2.md"
echo "tables: $out/old.md $out/new.md $out/old2.md"
exit "$status"
