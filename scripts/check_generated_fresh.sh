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
  # solve.steps > 1 (Gated DeltaProduct): no kernels yet, so no package; dgpsc compile must refuse it
  # with its one message rather than write a package that would run the wrong recurrence.
  if "$dgpsc" check "$spec" 2>/dev/null | grep -Eq '^  steps: '; then
    if "$dgpsc" compile "$spec" -o "$tmp/$name" 2>"$tmp/$name.log"; then
      echo "dgpsc compiled $spec (solve.steps > 1), which has no kernels: it must refuse it"
      status=1
    elif ! grep -q 'solve.steps' "$tmp/$name.log"; then
      echo "dgpsc refused $spec without naming solve.steps:"
      cat "$tmp/$name.log"
      status=1
    fi
    [[ ! -e "$root/generated/$name" ]] || { echo "generated/$name exists, but solve.steps > 1 has no kernels"; status=1; }
    continue
  fi
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
