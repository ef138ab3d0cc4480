#!/usr/bin/env bash
# On the GPU machine: the packages with both forward chunk roles printed from tile IR (dgpsc
# --codegen=tile-chunk-local,tile-state-output) against the float64 reference, then old (device library) vs
# new (tile IR) forwards timed in one run at the benchmark shapes.
#
#   scripts/bench_tile_state_output.sh [BUILD_DIR] [OUTDIR]   (default: build, /tmp/dgps_tile_state_output)
#   PACKAGES=gdn,kda scripts/bench_tile_state_output.sh      (default: gdn,deltanet,kda,mamba2,linear_attention)
#   PACKAGES=pgdn,pkda,atq,pdn,osdn,osdn_apf scripts/bench_tile_state_output.sh   (the preconditioned forwards,
#   whose state_output has a producer warpgroup; the GPU tests always cover every package with a tile state_output)
# Needs BUILD_DIR with dgpsc, dgps-bench and dgps_gpu_tests. Tables: OUTDIR/{old,new,old2}.md (old timed twice,
# before and after new, to expose order effects). The tile roles may replace the device library's only if
# new.md is at least as fast as both old tables for every package and shape.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$root/build}"
out="${2:-/tmp/dgps_tile_state_output}"
pk="${PACKAGES:-gdn,deltanet,kda,mamba2,linear_attention}"
shapes="forward:B=8,T=4096,H=16,K=128,V=128;forward:B=1,T=32768,H=16,K=128,V=128"
bench="$build/bench/dgps-bench"
tests="$build/tests/gpu/dgps_gpu_tests"

# The device library's roles are no longer dgpsc's default (generated/): write them here explicitly.
rm -rf "$out/packages" "$out/library"
DGPSC="$build/compiler/tools/dgpsc/dgpsc" "$root/scripts/gen_tile_state_output.sh" "$out/packages"
CODEGEN=device-library DGPSC="$build/compiler/tools/dgpsc/dgpsc" "$root/scripts/gen_tile_chunk_local.sh" "$out/library"

echo "=== GPU forward tests of the packages with a tile state_output ==="
status=0
for dir in "$out"/packages/*/; do
  name="$(basename "$dir")"
  grep -q "Generated from tile IR (${name}_state_output" "$dir/kernels.cu" || continue
  echo "--- $name"
  DGPS_GPU_PACKAGE="$dir" "$tests" --gtest_filter='*Forward*:*GroupedValueHeads*:*Varlen*:*EveryTunableConfig*' || status=1
done

echo "=== forward: device library (old) ==="
"$bench" --dgps_generated_dir="$out/library" --dgps_packages="$pk" --dgps_shapes="$shapes" --dgps_table="$out/old.md"
echo "=== forward: tile IR chunk_local + state_output (new) ==="
"$bench" --dgps_generated_dir="$out/packages" --dgps_packages="$pk" --dgps_shapes="$shapes" --dgps_table="$out/new.md"
echo "=== forward: device library again (old) ==="
"$bench" --dgps_generated_dir="$out/library" --dgps_packages="$pk" --dgps_shapes="$shapes" --dgps_table="$out/old2.md"
echo "tables: $out/old.md $out/new.md $out/old2.md"
exit "$status"
