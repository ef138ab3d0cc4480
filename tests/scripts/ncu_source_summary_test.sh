#!/usr/bin/env bash
# scripts/ncu_source_summary.py on an excerpt of a real Nsight Compute source page (GDN's state walk on the H200,
# docs/performance.md run 18): each view must name what the excerpt holds; a cell of NaN must not stop it; a file
# without a source table must be refused with a message and a non-zero exit.
#   ncu_source_summary_test.sh PYTHON SCRIPT EXCERPT WORKDIR
set -uo pipefail
py=$1 script=$2 excerpt=$3 work=$4
mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }
expect() { grep -qE "$1" <<<"$out" || fail "the summary has no line matching: $1"; }

out=$("$py" "$script" "$excerpt" --top 3) || fail "the summary of the excerpt exited non-zero"
echo "$out"
expect '^ *44\.6%  # +36 +VIADD R93, R93, 0x100 .*long_sb 3117'                # the most stalled line, its reason
expect '^# +0- +47 +81\.2% +9\.89 M instructions +long_sb 52\.7'               # the phase before the barrier
expect '^# +48- +53 +18\.8% .*barrier 17\.5'                                   # and after it
expect '^# +32 .*LDGSTS.*tags +4\.0 +wavefronts +32\.0 \(ideal +4\.0\) +<-'    # the 8x shared wavefronts
if grep -q 'LDS RZ' <<<"$out"; then fail "the never-executed '@!PT LDS RZ' padding is listed"; fi

# a NaN cell (what a partial report may hold) counts as 0
awk -F'","' 'NR == 2 { $3 = "nan" } { print }' OFS='","' "$excerpt" > "$work/nan.csv"
out=$("$py" "$script" "$work/nan.csv" --top 3) || fail "a NaN cell stopped the summary"
expect '^== the 3 SASS lines'

echo 'a,b' > "$work/not_a_report.csv"
if err=$("$py" "$script" "$work/not_a_report.csv" 2>&1); then fail "a file without a source table was accepted"; fi
grep -q 'no SASS source table' <<<"$err" || fail "the refusal does not say what is missing: $err"
echo "ncu_source_summary: the three views of the excerpt, a NaN cell, and a refused non-report: ok"
