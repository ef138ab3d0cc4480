#!/usr/bin/env bash
# Regenerates generated/<name>/ from specs/<name>.yaml with dgpsc (one package per shipped spec) and
# removes packages whose spec is gone. CI runs it and fails if `git diff --exit-code generated/` does.
#
#   scripts/regen_generated.sh [BUILD_DIR]     (default: build; dgpsc at BUILD_DIR/compiler/tools/dgpsc/dgpsc)
#   DGPSC=/path/to/dgpsc scripts/regen_generated.sh
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$root/build}"
dgpsc="${DGPSC:-$build/compiler/tools/dgpsc/dgpsc}"
if [[ ! -x "$dgpsc" ]]; then
  echo "regen_generated.sh: dgpsc not found at $dgpsc (build the compiler, or set DGPSC)" >&2
  exit 1
fi

cd "$root"
mkdir -p generated
status=0
for spec in specs/*.yaml; do
  name="$(basename "$spec" .yaml)"
  tmp="$(mktemp -d)"
  # Remarks (the plan's cost estimate) go to the log; errors make the script fail.
  if "$dgpsc" compile "$spec" -o "$tmp/$name" 2>"$tmp/log"; then
    rm -rf "generated/$name"
    mv "$tmp/$name" "generated/$name"
    echo "generated/$name  ($(grep -o 'plan: .*' "generated/$name/manifest.yaml"))"
  else
    cat "$tmp/log" >&2
    echo "regen_generated.sh: dgpsc failed on $spec" >&2
    status=1
  fi
  rm -rf "$tmp"
done

# Packages without a spec are stale.
for dir in generated/*/; do
  name="$(basename "$dir")"
  [[ -f "specs/$name.yaml" ]] || { echo "removing stale generated/$name"; rm -rf "generated/$name"; }
done
exit $status
