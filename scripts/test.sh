#!/usr/bin/env bash
# README command 2: install dependencies, build everything, run every test suite.
# GPU tests (ctest label `gpu`) skip and say so on machines without a GPU.
# The last line printed is ctest's summary.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/install_deps.sh"
bash "$root/scripts/build.sh"
build=${DGPS_BUILD_DIR:-$root/build}
cd "$build"
exec ctest --output-on-failure -j "${DGPS_JOBS:-$(nproc)}"
