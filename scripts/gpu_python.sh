#!/usr/bin/env bash
# The Python package on the GPU machine: builds and installs it from this checkout with pip (offline:
# --no-build-isolation --no-index, with the machine's own setuptools, pybind11 and CUDA toolkit; the
# extension is built with the MLIR compiler off, like scripts/build.sh --no-compiler), then runs the GPU
# Python tests (python/tests, marker `gpu`): every shipped spec against float64 and FLA, torch.compile,
# CUDA graphs, decode state pools, layers vs FLA layers, host overhead. Logs go to $OUT (or ./gpu-logs).
#
#   bash scripts/gpu_python.sh [--skip-install] [--fla DIR] [--tune] [-- extra pytest args]
#     --fla DIR   put a flash-linear-attention checkout (DIR/fla) on PYTHONPATH for the FLA comparisons
#     --tune      also run the (slow) dgps.tune test
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
logs=${OUT:-$root/gpu-logs}
mkdir -p "$logs"
py=${PYTHON:-python3}
install=1 extra=()
while (($#)); do
  case "$1" in
    --skip-install) install=0 ;;
    --fla) export PYTHONPATH="$2${PYTHONPATH:+:$PYTHONPATH}"; shift ;;
    --tune) export DGPS_PYTHON_TUNE_TEST=1 ;;
    --) shift; extra=("$@"); break ;;
    *) echo "gpu_python: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done

# A target folder, not site-packages: the machine's Python stays untouched (and PEP 668 does not apply).
site=${DGPS_PYTHON_SITE:-$root/build-python/site}
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
if ((install)); then
  [[ -d "$root/.deps/include" ]] || echo "gpu_python: no .deps/include (run scripts/stage_device_deps.sh here first) — needed where nlohmann-json/CLI11 are not installed"
  export DGPS_PYTHON_BUILD_DIR=${DGPS_PYTHON_BUILD_DIR:-$root/build-python}
  echo "gpu_python: pip install ./python into $site ($("$py" --version 2>&1)); log in $logs/python-install.log"
  if ! "$py" -m pip install --no-build-isolation --no-index --no-deps --upgrade --target "$site" -v "$root/python" \
       > "$logs/python-install.log" 2>&1; then
    tail -40 "$logs/python-install.log"
    echo "gpu_python: pip install failed"
    exit 1
  fi
fi

# Run from outside the checkout so `import dgps` is the installed package, not python/dgps.
cd "${TMPDIR:-/tmp}"
export DGPS_CACHE_DIR=${DGPS_CACHE_DIR:-$root/build-python/jit-cache}
"$py" -c "import dgps, torch; print('gpu_python: dgps from', dgps.__file__, '| torch', torch.__version__, \
'| fla', end=' '); import importlib.util as u; print('yes' if u.find_spec('fla') else 'not importable')"
PYTHONUNBUFFERED=1 "$py" "$root/python/tests/run_pytest.py" --gpu "$root/python/tests" "${extra[@]}" 2>&1 \
  | tee "$logs/python-gpu-tests.log"
exit "${PIPESTATUS[0]}"
