#!/usr/bin/env bash
# The command-line crash and hang cases of the robustness work, run through the real binaries: each
# must exit with status 1 or 2 and a message on stderr, within a timeout, never by a signal (a crash
# reads as status 128 + signal, a hang as timeout's 124).
#   cli_crash_cases.sh SOURCE_DIR DGPS_SPEC [DGPSC DGPS_OPT]   (the compiler tools are optional)
set -u
src=$1 spec_tool=$2 dgpsc=${3:-} opt=${4:-}
work=$(mktemp -d /tmp/dgps_cli_XXXXXX)
trap 'rm -rf "$work"' EXIT
failures=0

# expect_error NAME MESSAGE_SUBSTRING COMMAND...
expect_error() {
  local name=$1 message=$2
  shift 2
  timeout 20 "$@" >"$work/out" 2>"$work/err" </dev/null
  local rc=$?
  if [[ $rc -ne 1 && $rc -ne 2 ]]; then
    echo "FAIL $name: exit status $rc (expected 1 or 2; 124 = hang, >128 = signal)"
    head -c 2000 "$work/err"
    failures=$((failures + 1))
  elif ! grep -aqF -- "$message" "$work/err"; then
    echo "FAIL $name: stderr lacks '$message':"
    head -c 2000 "$work/err"
    failures=$((failures + 1))
  else
    echo "ok   $name"
  fi
}

name=$(head -c 30000 /dev/zero | tr '\0' a)
sed "s/^name:.*/name: $name/" "$src/specs/gdn.yaml" >"$work/long_name.yaml"
mkfifo "$work/fifo"
truncate -s 2G "$work/huge.yaml"

expect_error spec-check-long-name "at most 64 characters" "$spec_tool" check "$work/long_name.yaml"
expect_error spec-check-dev-zero "character device" "$spec_tool" check /dev/zero
expect_error spec-check-fifo "FIFO" "$spec_tool" check "$work/fifo"
expect_error spec-check-huge "the limit for a spec file" "$spec_tool" check "$work/huge.yaml"
expect_error reference-inputs-dev-zero "character device" "$spec_tool" reference "$src/specs/gdn.yaml" \
  --inputs /dev/zero --out "$work/out.safetensors"
expect_error reference-inputs-fifo "FIFO" "$spec_tool" reference "$src/specs/gdn.yaml" \
  --inputs "$work/fifo" --out "$work/out.safetensors"

if [[ -n $dgpsc && -n $opt ]]; then
  expect_error dgpsc-check-long-name "at most 64 characters" "$dgpsc" check "$work/long_name.yaml"
  expect_error dgpsc-compile-fifo "FIFO" "$dgpsc" compile "$work/fifo" -o "$work/pkg"
  # the write-key forms a spec cannot take: one error naming the option, the value and why
  expect_error dgpsc-write-key-segments-query-side "write-key segments: the forward has a query-side preconditioner" \
    "$dgpsc" compile "$src/specs/atq.yaml" -o "$work/pkg_atq" --write-key=segments
  expect_error dgpsc-write-key-stored-no-precond "write-key stored: the forward has no preconditioner" \
    "$dgpsc" compile "$src/specs/gdn.yaml" -o "$work/pkg_gdn" --write-key=stored
  sed "s/@gdn/@$name/" "$src/tests/lit/Inputs/gdn.mlir" >"$work/long_symbol.mlir"
  expect_error opt-long-symbol "at most 64 characters" "$opt" "$work/long_symbol.mlir"
  expect_error opt-dev-zero "character device" "$opt" /dev/zero
  expect_error opt-fifo "FIFO" "$opt" "$work/fifo"
  sed 's|tuning = \(.*\)}$|tuning = \1} loc("/dev/zero":1:1)|; s/gva_ratio = 1,/gva_ratio = 0,/' \
    "$src/tests/lit/Inputs/gdn.mlir" >"$work/loc_dev_zero.mlir"
  expect_error opt-location-dev-zero "not a regular file" "$opt" "$work/loc_dev_zero.mlir"
  digits=$(head -c 20000 /dev/zero | tr '\0' 9)
  sed "s/gain = #dgps.gain<scalar>/gain = $digits/" "$src/tests/lit/Inputs/gdn.mlir" >"$work/long_number.mlir"
  expect_error opt-long-number "a number of 20000 digits" "$opt" "$work/long_number.mlir"
  "$opt" "$src/tests/lit/Inputs/gdn.mlir" --dgps-lower-to-chunk >"$work/lowered.mlir" 2>/dev/null
  for edit in 's/chunk.chunk_size = 64/chunk.chunk_size = 0/' 's/block_v = \[32, 64\]/block_v = [0]/' \
              's/chunk.value_dims = array<i64: 128>/chunk.value_dims = array<i64: 0>/' \
              's/chunk.chunk_size = 64/chunk.chunk_size = -1/' 's/chunk.gva_ratio = 1/chunk.gva_ratio = 0/'; do
    sed "$edit" "$work/lowered.mlir" >"$work/bad.mlir"
    if cmp -s "$work/bad.mlir" "$work/lowered.mlir"; then
      echo "FAIL partition '$edit': the edit matched nothing"
      failures=$((failures + 1))
      continue
    fi
    expect_error "partition $edit" "error: 'func.func' op attribute 'chunk." "$opt" "$work/bad.mlir" --chunk-partition-kernels
  done
fi

echo "$failures failure(s)"
[[ $failures -eq 0 ]]
