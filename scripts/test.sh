#!/usr/bin/env bash
# README command 2: install dependencies, build everything, run every test suite.
# GPU tests (ctest label `gpu`) skip and say so on machines without a GPU.
# The last line printed is ctest's summary ("N% tests passed, M tests failed out of K").
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/install_deps.sh"
bash "$root/scripts/build.sh"
build=${DGPS_BUILD_DIR:-$root/build}
cd "$build"
# ctest lists the skipped (GPU) tests after its summary; repeat the summary line so it is the last line.
set +e
ctest --output-on-failure -j "${DGPS_JOBS:-$(nproc)}" 2>&1 | tee ctest.log
rc=${PIPESTATUS[0]}
grep -E "tests passed|tests failed|No tests were found" ctest.log | tail -1
exit "$rc"
