#!/usr/bin/env bash
# Installs DGPS's build dependencies from Debian packages. Idempotent: packages already present are skipped.
# The CUDA 13 toolkit (nvcc, NVRTC) is expected at /usr/local/cuda and is not installed here.
set -euo pipefail

# --no-mlir: only what the runtime, tests and benchmarks need (the GPU machine's configuration).
want_mlir=1
[[ "${1:-}" == "--no-mlir" ]] && want_mlir=0

pkgs=(cmake ninja-build g++ libyaml-cpp-dev libgtest-dev googletest libbenchmark-dev
      nlohmann-json3-dev libcli11-dev python3)
# The Python package (python/): pybind11 and headers to build the extension, pytest and torch (CPU) to test it.
pkgs+=(python3-dev pybind11-dev python3-pytest python3-torch python3-setuptools python3-pip)
if (( want_mlir )); then
  pkgs+=(llvm-19-dev llvm-19-tools libmlir-19-dev mlir-19-tools)
fi

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if (( ${#missing[@]} == 0 )); then
  echo "install_deps: all ${#pkgs[@]} packages present"
else
  echo "install_deps: installing ${missing[*]}"
  sudo_cmd=""
  [[ $(id -u) -ne 0 ]] && sudo_cmd="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo_cmd apt-get update -qq
  $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [[ ! -x /usr/local/cuda/bin/nvcc ]]; then
  echo "install_deps: warning: no CUDA toolkit at /usr/local/cuda; NVRTC-dependent targets will be skipped" >&2
fi
