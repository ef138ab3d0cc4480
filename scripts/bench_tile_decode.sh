#!/usr/bin/env bash
# On the GPU machine: the tile-decode packages (dgpsc --codegen=tile-decode) against the float64 reference,
# then old (device-library) vs new (tile IR) decode timed in one run at the standard decode shape.
#
#   scripts/bench_tile_decode.sh [BUILD_DIR] [OUTDIR]     (default: build, /tmp/dgps_tile_decode)
#   PACKAGES=gdn,kda,pgdn scripts/bench_tile_decode.sh    (default: gdn,kda,pgdn,deltanet,osdn,atq)
# Needs BUILD_DIR with dgpsc, dgps-bench and dgps_gpu_tests. Tables: OUTDIR/{old,new,old2}.md (old timed
# twice, before and after new, to expose order effects). The tile decode may replace the device library's
# only if new.md is at least as fast as both old tables for every package.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$root/build}"
out="${2:-/tmp/dgps_tile_decode}"
pk="${PACKAGES:-gdn,kda,pgdn,deltanet,osdn,atq}"
shape="decode:B=256,H=16,K=128,V=128"
bench="$build/bench/dgps-bench"
tests="$build/tests/gpu/dgps_gpu_tests"

# The device library's decode is no longer dgpsc's default (generated/): write it here explicitly.
rm -rf "$out/packages" "$out/library"
DGPSC="$build/compiler/tools/dgpsc/dgpsc" "$root/scripts/gen_tile_decode.sh" "$out/packages"
CODEGEN=device-library DGPSC="$build/compiler/tools/dgpsc/dgpsc" "$root/scripts/gen_tile_decode.sh" "$out/library"

echo "=== GPU decode tests of the tile-decode packages ==="
status=0
for dir in "$out"/packages/*/; do
  name="$(basename "$dir")"
  echo "--- $name"
  DGPS_GPU_PACKAGE="$dir" "$tests" --gtest_filter='*Decode*' || status=1
done

echo "=== decode: device library (old) ==="
"$bench" --dgps_generated_dir="$out/library" --dgps_packages="$pk" --dgps_shapes="$shape" --dgps_table="$out/old.md"
echo "=== decode: tile IR (new) ==="
"$bench" --dgps_generated_dir="$out/packages" --dgps_packages="$pk" --dgps_shapes="$shape" --dgps_table="$out/new.md"
echo "=== decode: device library again (old) ==="
"$bench" --dgps_generated_dir="$out/library" --dgps_packages="$pk" --dgps_shapes="$shape" --dgps_table="$out/old2.md"
echo "tables: $out/old.md $out/new.md $out/old2.md"
exit "$status"
