#!/usr/bin/env bash
# Fails when generated/ is not exactly what dgpsc produces from specs/ today (issue: CI proves the
# committed packages are fresh). Compiles every spec into a temporary folder and diffs byte for byte.
#
#   scripts/check_generated_fresh.sh DGPSC
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dgpsc="${1:?usage: check_generated_fresh.sh PATH/TO/dgpsc}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
status=0
packages=0
for spec in "$root"/specs/*.yaml; do
  name="$(basename "$spec" .yaml)"
  packages=$((packages + 1))
  "$dgpsc" compile "$spec" -o "$tmp/$name" 2>/dev/null
  if ! diff -r "$tmp/$name" "$root/generated/$name" >"$tmp/$name.diff" 2>&1; then
    echo "generated/$name is stale: regenerate with scripts/regen_generated.sh and commit"
    head -20 "$tmp/$name.diff"
    status=1
  fi
done
for dir in "$root"/generated/*/; do
  name="$(basename "$dir")"
  [[ -f "$root/specs/$name.yaml" ]] || { echo "generated/$name has no spec in specs/"; status=1; }
done
[[ $status == 0 ]] && echo "generated/ is fresh ($packages packages)"
exit $status
