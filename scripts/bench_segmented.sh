#!/usr/bin/env bash
# Times the forward of the shipped packages with the sequence-parallel state pass at several segment lengths
# (docs/architecture.md, "Long sequences: the segmented state pass"), after the GPU checks of the segmented
# path (test_segmented_gpu.cpp) for each package. One dgps-bench run per L, each with DGPS_SEGMENT_CHUNKS=L
# (0: the plain sequential state pass; "auto": the runtime's rule, variable unset):
#   scripts/bench_segmented.sh [BUILD_DIR] [OUT_DIR]
#   SEGMENTS="0 auto 4 8 16 32" PACKAGES=gdn,kda SHAPES="forward:B=1,T=32768,H=16,K=128,V=128" scripts/bench_segmented.sh
# Tables: OUT_DIR/L<L>.md. Runs on the GPU machine.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$root/build}"
out="${2:-/tmp/dgps_segmented}"
pk="${PACKAGES:-gdn,deltanet,kda,mamba2,linear_attention}"
shapes="${SHAPES:-forward:B=1,T=32768,H=16,K=128,V=128;forward:B=1,T=32768,H=2,HV=8,K=128,V=128;forward:B=8,T=4096,H=16,K=128,V=128}"
segments="${SEGMENTS:-0 auto 4 8 16 32 64}"
bench="$build/bench/dgps-bench"
tests="$build/tests/gpu/dgps_gpu_tests"
mkdir -p "$out"

echo "=== GPU checks of the segmented state pass ==="
status=0
IFS=',' read -r -a names <<<"$pk"
for name in "${names[@]}"; do
  echo "--- $name"
  DGPS_GPU_PACKAGE="$root/generated/$name" "$tests" --gtest_filter='SegmentedTest.*' || status=1
done

for L in $segments; do
  echo "=== forward with DGPS_SEGMENT_CHUNKS=$L ==="
  if [[ "$L" == auto ]]; then
    env -u DGPS_SEGMENT_CHUNKS "$bench" --dgps_packages="$pk" --dgps_shapes="$shapes" --dgps_table="$out/Lauto.md" ||
      status=1
  else
    DGPS_SEGMENT_CHUNKS="$L" "$bench" --dgps_packages="$pk" --dgps_shapes="$shapes" --dgps_table="$out/L$L.md" ||
      status=1
  fi
done
echo "tables: $out/L*.md"
exit "$status"
