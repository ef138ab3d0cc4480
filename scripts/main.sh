#!/usr/bin/env bash
# README command 1: install dependencies, build, and run the main job on a spec (default specs/pgdn.yaml):
#   1. check the spec and print its canonical form and DGPS classification;
#   2. compile it with the MLIR pipeline into a generated package (build/main-job/<name>);
#   3. run the float64 reference on generated inputs and print a summary;
#   4. on a machine with a GPU: JIT-load the package, run it, and compare with the reference.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
spec=${1:-$root/specs/pgdn.yaml}
bash "$root/scripts/install_deps.sh"
bash "$root/scripts/build.sh"
build=${DGPS_BUILD_DIR:-$root/build}
name=$(basename "$spec" .yaml)
out="$build/main-job/$name"

echo "== dgpsc check $spec"
"$build/compiler/tools/dgpsc/dgpsc" check "$spec"
echo "== dgpsc compile $spec -o $out"
"$build/compiler/tools/dgpsc/dgpsc" compile "$spec" -o "$out"
echo "== float64 reference on generated inputs"
"$build/dsl/tools/dgps-spec" demo "$spec"
if [[ -x "$build/examples/host_app/dgps-host-app" ]]; then
  echo "== JIT-load and run on the GPU (skipped without one)"
  # Exit 77: no usable GPU here (no driver or device, or not compute capability 9.0); the app said why.
  rc=0
  "$build/examples/host_app/dgps-host-app" "$out" || rc=$?
  if [[ $rc -eq 77 ]]; then
    echo "== GPU step skipped: no usable GPU on this machine"
  elif [[ $rc -ne 0 ]]; then
    exit "$rc"
  fi
fi
