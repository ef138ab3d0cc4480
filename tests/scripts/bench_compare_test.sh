#!/usr/bin/env bash
# scripts/bench_compare.py on dgps-bench table rows written here (the format of bench/Results.cpp): two passes per
# tree; the change is of the means of the passes; a WRONG or ERROR check and an untimed row are marked; a row of one
# tree only is named; a log without a table is refused.
#   bench_compare_test.sh PYTHON SCRIPT WORKDIR
set -uo pipefail
py=$1 script=$2 work=$3
mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }
row() { echo "| $1 | forward | B8_T4096_H16_K128_V128 | ${4:-default C32 BV128 W4 S2} | $2 | 1195 | 212.9 | 30.0 | 0.2317 mem | 51.2 | 8.9 | – | $3 |"; }
{ echo "noise before the table"; row gdn "0.450 [0.449, 0.451]" 3.6e-03; row kda "0.800 [0.799, 0.801]" 4.7e-03
  row pkda "1.000 [0.999, 1.001]" 5.0e-03; row osdn "–" ERROR; row kda "0.900 [0.899, 0.901]" 4.7e-03 "sweep C64 BV64 W4 S2"
  row atq "0.900 [0.899, 0.901]" 4.7e-03 "default C64 BV128 W8 S2"; } > "$work/b1.log"
{ row gdn "0.454 [0.453, 0.455]" 3.6e-03; row kda "0.800 [0.799, 0.801]" 4.7e-03; row pkda "1.002 [1.001, 1.003]" 5.0e-03
  row osdn "–" ERROR; } > "$work/b2.log"
{ row gdn "0.440 [0.439, 0.441]" 3.6e-03; row kda "0.820 [0.819, 0.821]" "WRONG 2.0e-01"; row pkda "0.980 [0.979, 0.981]" 5.0e-03
  row osdn "1.190 [1.189, 1.191]" 4.5e-03; row mamba2 "0.370 [0.369, 0.371]" 2.9e-03
  row atq "0.800 [0.799, 0.801]" 4.7e-03; row kda "0.950 [0.949, 0.951]" 4.7e-03 "sweep C32 BV64 W4 S2"; } > "$work/n1.log"
{ row gdn "0.442 [0.441, 0.443]" 3.6e-03; row kda "0.822 [0.821, 0.823]" "WRONG 2.0e-01"; row pkda "0.982 [0.981, 0.983]" 5.0e-03
  row osdn "1.192 [1.191, 1.193]" 4.5e-03; } > "$work/n2.log"
out=$("$py" "$script" --base "$work/b1.log" "$work/b2.log" --new "$work/n1.log" "$work/n2.log") || fail "exited non-zero"
echo "$out"
expect() { grep -qF -- "$1" <<<"$out" || fail "no line with: $1"; }
expect "| gdn | forward | B8_T4096_H16_K128_V128 | default C32 BV128 W4 S2 | 0.450, 0.454 | 0.440, 0.442 | -2.4% |"
expect "| kda | forward | B8_T4096_H16_K128_V128 | default C32 BV128 W4 S2 | 0.800, 0.800 | 0.820, 0.822 | +2.6% (check: WRONG) |"
expect "| pkda | forward | B8_T4096_H16_K128_V128 | default C32 BV128 W4 S2 | 1.000, 1.002 | 0.980, 0.982 | -2.0% |"
expect "| osdn | forward | B8_T4096_H16_K128_V128 | default C32 BV128 W4 S2 | –, – | 1.190, 1.192 | not timed (check: ERROR) |"
expect "| mamba2 | forward | B8_T4096_H16_K128_V128 | default C32 BV128 W4 S2 | – | 0.370 | only in new |"
# the default row across a change of the default configuration; two different sweep configurations stay apart
expect "| atq | forward | B8_T4096_H16_K128_V128 | default C64 BV128 W8 S2 → default C32 BV128 W4 S2 | 0.900 | 0.800 | -11.1% |"
expect "| kda | forward | B8_T4096_H16_K128_V128 | sweep C64 BV64 W4 S2 | 0.900 | – | only in base |"
expect "| kda | forward | B8_T4096_H16_K128_V128 | sweep C32 BV64 W4 S2 | – | 0.950 | only in new |"
echo "no table here" > "$work/empty.log"
if err=$("$py" "$script" --base "$work/empty.log" --new "$work/n1.log" 2>&1); then fail "a log without a table was accepted"; fi
grep -q "no dgps-bench table rows" <<<"$err" || fail "the refusal does not say what is missing: $err"
echo "bench_compare: means of passes, marked checks, untimed and one-tree rows, defaults across configs, a refused log: ok"
