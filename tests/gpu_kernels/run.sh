#!/usr/bin/env bash
# Builds and runs the DGPS device-kernel harness.
#   run.sh build   compile here (no GPU needed): harness, NVRTC CUBINs (sm_90a) of every variant in variants.txt,
#                  an nvcc -cubin build of each config (nvcc compatibility; ptxas register/spill report)
#   run.sh test    run the prebuilt harness on the GPU (logs under $OUT when set)
#   run.sh emu     build the variants for the CPU emulator and run the checks there
#   run.sh         build + test
# Output folder: build-gk/ at the repository root (git-ignored). Extra args after the mode go to the harness.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
HERE="$ROOT/tests/gpu_kernels"
B="$ROOT/build-gk"
CUDA="${CUDA_HOME:-/usr/local/cuda}"
ARCH="${DGPS_ARCH:-sm_90a}"
JOBS="${JOBS:-2}"
mode="${1:-all}"
shift || true

variant_lines() { grep -v '^\s*#' "$HERE/variants.txt" | grep -v '^\s*$'; }
key_of() { if [ -n "${9:-}" ]; then echo "${1}_k${2}_v${3}_${4}_c${5}_bv${6}_w${7}_s${8}_${9}"; else echo "${1}_k${2}_v${3}_${4}_c${5}_bv${6}_w${7}_s${8}"; fi; }
defs_of() {
  local dt=BF16; [ "$4" = f16 ] && dt=F16
  local extra=""; [ "${9:-}" = nowg ] && extra="-DDGPS_NO_WGMMA=1"
  echo "-DDGPS_K=$2 -DDGPS_V=$3 -DDGPS_INPUT_${dt}=1 -DDGPS_CHUNK=$5 -DDGPS_BLOCK_V=$6 -DDGPS_WARPS=$7 -DDGPS_STAGES=$8 $extra"
}

build_host() {
  mkdir -p "$B"
  g++ -O2 -std=c++17 "$HERE/nvrtc_compile.cpp" -I"$CUDA/include" -L"$CUDA/lib64" -lnvrtc -Wl,-rpath,"$CUDA/lib64" \
    -o "$B/nvrtc_compile"
  g++ -O2 -std=c++17 -rdynamic -I"$ROOT/runtime/device" -I"$HERE" -I"$HERE/emu" \
    "$HERE/harness.cpp" "$HERE/backend.cpp" "$HERE/emu/emu.cpp" -ldl -pthread -o "$B/harness"
}

build_cubins() {
  mkdir -p "$B/cubin" "$B/log"
  local pids=() n=0
  while read -r cfg K V dt C BV W S X; do
    local key; key=$(key_of "$cfg" "$K" "$V" "$dt" "$C" "$BV" "$W" "$S" "${X:-}")
    if [ ! -f "$B/cubin/$key.cubin" ] || [ "$HERE/configs/$cfg.cu" -nt "$B/cubin/$key.cubin" ] || \
       [ -n "$(find "$ROOT/runtime/device/dgps/device" -newer "$B/cubin/$key.cubin" -print -quit)" ]; then
      # shellcheck disable=SC2046
      "$B/nvrtc_compile" "$HERE/configs/$cfg.cu" "$B/cubin/$key.cubin" "$ROOT/runtime/device" $(defs_of "$cfg" "$K" "$V" "$dt" "$C" "$BV" "$W" "$S" "${X:-}") \
        --arch="$ARCH" --ptxas-v >"$B/log/$key.nvrtc.log" 2>&1 || { echo "NVRTC FAILED: $key"; cat "$B/log/$key.nvrtc.log"; exit 1; } &
      pids+=($!); n=$((n+1))
      if [ "${#pids[@]}" -ge "$JOBS" ]; then wait "${pids[0]}"; pids=("${pids[@]:1}"); fi
    fi
  done < <(variant_lines)
  for p in "${pids[@]}"; do wait "$p"; done
  echo "NVRTC: $n variant(s) compiled for $ARCH"
  # spills / local memory are not acceptable (docs/math.md §7.5)
  if grep -l -E "[1-9][0-9]* bytes (stack frame|spill)" "$B"/log/*.nvrtc.log; then echo "SPILLS found (see above)"; exit 1; fi
}

build_nvcc_check() {
  mkdir -p "$B/nvcc"
  for cfg in $(variant_lines | awk '{print $1}' | sort -u); do
    "$CUDA/bin/nvcc" -std=c++17 -cubin -gencode=arch=compute_90a,code=sm_90a -I"$ROOT/runtime/device" \
      -Xptxas -v "$HERE/configs/$cfg.cu" -o "$B/nvcc/$cfg.cubin" >"$B/log/$cfg.nvcc.log" 2>&1 || { cat "$B/log/$cfg.nvcc.log"; exit 1; }
  done
  echo "nvcc: every config compiles (sm_90a)"
}

build_emu() {
  mkdir -p "$B/emu"
  local pids=()
  while read -r cfg K V dt C BV W S X; do
    local key; key=$(key_of "$cfg" "$K" "$V" "$dt" "$C" "$BV" "$W" "$S" "${X:-}")
    if [ ! -f "$B/emu/$key.so" ] || [ "$HERE/configs/$cfg.cu" -nt "$B/emu/$key.so" ] || \
       [ -n "$(find "$ROOT/runtime/device/dgps/device" "$HERE/emu" -newer "$B/emu/$key.so" -print -quit)" ]; then
      # shellcheck disable=SC2046
      g++ -O1 -g -std=c++17 -fPIC -shared -Wno-unknown-pragmas -include "$HERE/emu/emu_prelude.h" -I"$ROOT/runtime/device" \
        -DDGPS_EMU_WGMMA=1 -I"$HERE/emu" $(defs_of "$cfg" "$K" "$V" "$dt" "$C" "$BV" "$W" "$S" "${X:-}") -x c++ "$HERE/configs/$cfg.cu" -o "$B/emu/$key.so" &
      pids+=($!)
      if [ "${#pids[@]}" -ge "$JOBS" ]; then wait "${pids[0]}"; pids=("${pids[@]:1}"); fi
    fi
  done < <(variant_lines)
  for p in "${pids[@]}"; do wait "$p"; done
}

run_test() {
  local log="${OUT:-$B}/harness.log"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv 2>/dev/null | tee "${OUT:-$B}/gpu.txt" || true
  set -o pipefail
  "$B/harness" --backend gpu --dir "$B/cubin" "$@" 2>&1 | tee "$log"
}

case "$mode" in
  build) build_host; build_cubins; build_nvcc_check ;;
  test) run_test "$@" ;;
  emu) build_host; build_emu; "$B/harness" --backend emu --dir "$B/emu" "$@" ;;
  emu-run) "$B/harness" --backend emu --dir "$B/emu" "$@" ;;
  all) build_host; build_cubins; build_nvcc_check; run_test "$@" ;;
  *) echo "usage: $0 [build|test|emu|emu-run|all] [harness args]"; exit 2 ;;
esac
