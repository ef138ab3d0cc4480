#!/usr/bin/env bash
# Compares the decode kernel of two package trees on the CPU (no GPU needed): ptxas resource use (registers,
# spill bytes), the static PTX instruction mix of the kernel (bar.sync, shared loads/stores, ex2, shuffles,
# global loads/stores and how many of them are 16-byte vector accesses) and the SASS counts that decide a
# memory-bound kernel (BAR.SYNC, LDG, LDG.E.128, STG, STG.E.128, total instructions; needs cuobjdump). Used to line the tile-IR
# decode (scripts/gen_tile_decode.sh) up against the device library's (generated/).
# Only the package's includes, Traits and decode kernel are compiled (the other roles are cut out), so a run
# over every package takes about a minute on two cores. Dynamic shared memory is the same for both
# (launch_rules.h decodeSmemBytes).
#
#   scripts/decode_resources.sh TILE_DIR [LIB_DIR] [SPEC...]
#     TILE_DIR, LIB_DIR: package trees <dir>/<name>/kernels.cu (LIB_DIR defaults to generated/)
#     SPEC: package names (default: every package in TILE_DIR)
#   Environment: NVCC (default nvcc), ARCH (default sm_90a), DK / DV (head dims, default 128), JOBS (parallel
#   compiles, default 2), KEEP=DIR (keep the cut sources, PTX, SASS and ptxas logs there).
set -euo pipefail

if [[ $# -lt 1 ]]; then
  echo "usage: decode_resources.sh TILE_DIR [LIB_DIR] [SPEC...]" >&2
  exit 2
fi
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tile="$1"
lib="${2:-$root/generated}"
shift $(($# >= 2 ? 2 : 1))
nvcc="${NVCC:-nvcc}"
arch="${ARCH:-sm_90a}"
jobs="${JOBS:-2}"
dk="${DK:-128}"
dv="${DV:-128}"
command -v "$nvcc" >/dev/null || { echo "decode_resources.sh: $nvcc not found (set NVCC)" >&2; exit 1; }
# SASS counts need cuobjdump (not every toolkit install has it); without it those columns read "-".
have_sass=0
command -v cuobjdump >/dev/null && have_sass=1
specs=("$@")
if [[ ${#specs[@]} -eq 0 ]]; then
  for d in "$tile"/*/; do [[ -f "$d/kernels.cu" ]] && specs+=("$(basename "$d")"); done
fi
if [[ -n "${KEEP:-}" ]]; then
  work="$KEEP"
  mkdir -p "$work"
else
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
fi

# The package's preamble (everything before its first kernel: includes, Traits) and its decode kernel: either
# the device library's one-line wrapper or the tile emitter's body, which ends at the first line "}".
cut_decode() {
  awk '
    !seen && /^extern "C"/ { seen = 1 }
    !seen { print; next }
    /^extern "C" __global__ void .*dgps_[A-Za-z0-9_]*_decode\(/ { on = 1 }
    on { print; if ($0 ~ /^}/ || $0 ~ /\) \{ .*\}$/) on = 0 }' "$1"
}

# compile one package's decode kernel to PTX and CUBIN (ptxas -v), then SASS; writes $work/<tag>.{cu,ptx,log,sass}
compile() {
  local dir="$1" tag="$2"
  cut_decode "$dir/kernels.cu" >"$work/$tag.cu"
  grep -q '_decode(' "$work/$tag.cu" || { echo "decode_resources.sh: no decode kernel in $dir/kernels.cu" >&2; return 1; }
  local flags=(-std=c++17 -arch="$arch" -I "$root/runtime/device" -DDGPS_K="$dk" -DDGPS_V="$dv")
  "$nvcc" "${flags[@]}" -ptx "$work/$tag.cu" -o "$work/$tag.ptx" 2>"$work/$tag.err" || { cat "$work/$tag.err" >&2; return 1; }
  "$nvcc" "${flags[@]}" -cubin -Xptxas -v "$work/$tag.cu" -o "$work/$tag.cubin" 2>"$work/$tag.log" ||
    { cat "$work/$tag.log" >&2; return 1; }
  if [[ $have_sass == 1 ]]; then cuobjdump -sass "$work/$tag.cubin" >"$work/$tag.sass"; fi
}

pids=()
for s in "${specs[@]}"; do
  compile "$lib/$s" "$s.lib" &
  pids+=($!)
  compile "$tile/$s" "$s.tile" &
  pids+=($!)
  if [[ ${#pids[@]} -ge $jobs ]]; then
    for p in "${pids[@]}"; do wait "$p"; done
    pids=()
  fi
done
for p in "${pids[@]}"; do wait "$p"; done

# ptxas -v: "Used N registers" and the spill line of the (only) entry function
resources() {
  awk '
    /bytes spill stores/ { match($0, /[0-9]+ bytes spill stores/); st = substr($0, RSTART, RLENGTH) + 0
                           match($0, /[0-9]+ bytes spill loads/); ld = substr($0, RSTART, RLENGTH) + 0 }
    /Used [0-9]+ registers/ { match($0, /Used [0-9]+/); r = substr($0, RSTART + 5, RLENGTH - 5) }
    END { printf "%s %d %d\n", r, st, ld }' "$1"
}

# static PTX instruction counts inside the decode entry
ptx_mix() {
  awk '
    /^\.(visible )?\.entry/ { on = index($0, "_decode(") > 0 }
    on {
      if ($0 ~ /bar\.sync|barrier\.sync/) b++
      if ($0 ~ /ld\.shared/) ls++
      if ($0 ~ /st\.shared/) ss++
      if ($0 ~ /ex2\.approx/) e++
      if ($0 ~ /shfl\.sync/) sh++
      if ($0 ~ /ld\.global/) { lg++; if ($0 ~ /\.v4\./) lg4++ }
      if ($0 ~ /st\.global/) { sg++; if ($0 ~ /\.v4\./) sg4++ }
    }
    END { printf "%d %d %d %d %d %d %d %d %d\n", b, ls, ss, e, sh, lg, lg4, sg, sg4 }' "$1"
}

# static SASS counts (the whole cubin holds only the decode kernel)
sass_mix() {
  awk '
    /^[ \t]+\/\*[0-9a-f]+\*\// {
      n++
      if ($0 ~ / BAR\.SYNC/) b++
      if ($0 ~ / LDG\./) { lg++; if ($0 ~ /\.128 /) lg4++ }
      if ($0 ~ / STG\./) { sg++; if ($0 ~ /\.128 /) sg4++ }
    }
    END { printf "%d %d %d %d %d %d\n", b, lg, lg4, sg, sg4, n }' "$1"
}

printf 'decode, K = %s, V = %s, %s (static counts; "v4" = 16-byte accesses)\n' "$dk" "$dv" "$arch"
printf '%-17s %-4s %4s %5s | %4s %5s %5s %4s %4s %5s %4s %5s %4s | %4s %4s %6s %4s %6s %5s\n' spec path regs spill \
  bar ld.sh st.sh ex2 shfl ld.gl v4 st.gl v4 BAR LDG LDG128 STG STG128 SASS
for s in "${specs[@]}"; do
  for p in lib tile; do
    read -r r st ld < <(resources "$work/$s.$p.log")
    read -r b ls ss e sh lg lg4 sg sg4 < <(ptx_mix "$work/$s.$p.ptx")
    sb=- slg=- slg4=- ssg=- ssg4=- sn=-
    if [[ $have_sass == 1 ]]; then read -r sb slg slg4 ssg ssg4 sn < <(sass_mix "$work/$s.$p.sass"); fi
    printf '%-17s %-4s %4s %5s | %4s %5s %5s %4s %4s %5s %4s %5s %4s | %4s %4s %6s %4s %6s %5s\n' "$s" "$p" "$r" \
      "$((st + ld))" "$b" "$ls" "$ss" "$e" "$sh" "$lg" "$lg4" "$sg" "$sg4" "$sb" "$slg" "$slg4" "$ssg" "$ssg4" "$sn"
  done
done
