#!/usr/bin/env bash
# Copies the header-only dependencies (nlohmann-json, CLI11) from this machine's /usr/include into
# .deps/include, so that a machine without those Debian packages (the GPU machine) can build DGPS:
# cmake/DgpsDependencies.cmake falls back to .deps/include. Run it here before shipping a checkout.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dest="$root/.deps/include"
mkdir -p "$dest"
for d in nlohmann CLI; do
  if [[ ! -d /usr/include/$d ]]; then
    echo "stage_device_deps: /usr/include/$d is missing; run scripts/install_deps.sh first" >&2
    exit 1
  fi
  rm -rf "${dest:?}/$d"
  cp -r "/usr/include/$d" "$dest/$d"
done
echo "stage_device_deps: staged nlohmann and CLI headers into $dest"
