#!/usr/bin/env bash
# Compares one kernel role of two package trees on the CPU (no GPU needed): ptxas resource use (registers,
# barriers, spill bytes, static shared memory), the static PTX instruction mix of the kernel (bar.sync, shared
# loads/stores, mma, ex2, shuffles, cp.async, global loads/stores and how many of them are 16-byte vector
# accesses, all instructions) and the SASS counts that decide a memory-bound kernel (BAR.SYNC, LDG, LDG.E.128,
# STG, STG.E.128, all instructions; needs cuobjdump, else those columns read "-"). Used to line a role printed
# by one compiler up against another's (e.g. generated/ against packages written by dgpsc before an emitter
# change). Dynamic shared memory is the same for both (the launch contract fixes it per role).
# Only the package's preamble (its includes) and the role's kernel are compiled (the other roles are cut
# out), so a run over every package takes about a minute on two cores.
#
#   scripts/role_resources.sh ROLE TILE_DIR LIB_DIR [SPEC...]
#     ROLE: decode (kernel dgps_<name>_decode) or a forward role: chunk_local, state_output, precond_summary,
#           precond_scan, ... (kernel dgps_<name>_fwd_<ROLE>)
#     TILE_DIR, LIB_DIR: the two package trees <dir>/<name>/kernels.cu (new, old)
#     SPEC: package names (default: every package in TILE_DIR)
#   Environment: NVCC (default nvcc), ARCH (default sm_90a; sm_90 for chunk_local), DK / DV (head dims,
#   default 128), CHUNK / WARPS (forward roles; default: the package's default_config), JOBS (parallel
#   compiles, default 2), KEEP=DIR (keep the cut sources, PTX, SASS and ptxas logs there).
set -euo pipefail

usage="usage: role_resources.sh ROLE TILE_DIR LIB_DIR [SPEC...]   (ROLE: decode, chunk_local, state_output, ...)"
if [[ $# -lt 3 ]]; then
  echo "$usage" >&2
  exit 2
fi
role="$1"
if [[ ! "$role" =~ ^[a-z][a-z0-9_]*$ ]]; then
  echo "role_resources.sh: ROLE '$role' is not a role name (expected decode, chunk_local, state_output, ...)" >&2
  exit 2
fi
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tile="$2"
lib="$3"
shift 3
nvcc="${NVCC:-nvcc}"
default_arch=sm_90a
[[ "$role" == chunk_local ]] && default_arch=sm_90
arch="${ARCH:-$default_arch}"
jobs="${JOBS:-2}"
dk="${DK:-128}"
dv="${DV:-128}"
# the role's kernel name, after the package name
if [[ "$role" == decode ]]; then suffix=decode; else suffix="fwd_$role"; fi
command -v "$nvcc" >/dev/null || { echo "role_resources.sh: $nvcc not found (set NVCC)" >&2; exit 1; }
# SASS counts need cuobjdump (not every toolkit install has it)
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

# default_config: {chunk: 64, block_v: 128, warps: 4, stages: 2} -> "64 4"
config_of() {
  sed -n 's/^default_config: {chunk: \([0-9]*\), block_v: [0-9]*, warps: \([0-9]*\).*/\1 \2/p' "$1/manifest.yaml"
}

# The package's preamble (everything before its first kernel: its includes) and the role's kernel: a one-line
# kernel or the tile emitter's body, which ends at the first line "}".
cut_role() {
  awk -v suffix="$suffix" '
    !seen && /^extern "C"/ { seen = 1 }
    !seen { print; next }
    /^extern "C" __global__ void / && index($0, "_" suffix "(") > 0 && /dgps_[A-Za-z0-9_]*\(/ { on = 1 }
    on { print; if ($0 ~ /^}/ || $0 ~ /\) \{ .*\}$/) on = 0 }' "$1"
}

# compile one package's role kernel to PTX and CUBIN (ptxas -v), then SASS; writes $work/<tag>.{cu,ptx,log,sass}
compile() {
  local dir="$1" tag="$2"
  cut_role "$dir/kernels.cu" >"$work/$tag.cu"
  grep -q "_${suffix}(" "$work/$tag.cu" || { echo "role_resources.sh: no $suffix kernel in $dir/kernels.cu" >&2; return 1; }
  local flags=(-std=c++17 -arch="$arch" -I "$root/runtime/device" -DDGPS_K="$dk" -DDGPS_V="$dv")
  if [[ "$role" != decode ]]; then
    local chunk warps
    read -r chunk warps < <(config_of "$dir")
    flags+=(-DDGPS_CHUNK="${CHUNK:-$chunk}" -DDGPS_WARPS="${WARPS:-$warps}")
    echo "${CHUNK:-$chunk}/${WARPS:-$warps}" >"$work/$tag.cfg"
  else
    echo "-" >"$work/$tag.cfg"
  fi
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
failed=0
for p in "${pids[@]}"; do wait "$p" || failed=1; done
[[ $failed == 0 ]] || exit 1

# ptxas -v of the (only) entry function: registers, barriers, spill store + load bytes, static shared memory
resources() {
  awk '
    /bytes spill stores/ { match($0, /[0-9]+ bytes spill stores/); st = substr($0, RSTART, RLENGTH) + 0
                           match($0, /[0-9]+ bytes spill loads/); ld = substr($0, RSTART, RLENGTH) + 0 }
    /Used [0-9]+ registers/ { match($0, /Used [0-9]+/); r = substr($0, RSTART + 5, RLENGTH - 5)
                              if (match($0, /used [0-9]+ barriers/)) b = substr($0, RSTART + 5, RLENGTH - 14) + 0
                              if (match($0, /[0-9]+ bytes smem/)) sm = substr($0, RSTART, RLENGTH) + 0 }
    END { printf "%s %d %d %d\n", r, b, st + ld, sm }' "$1"
}

# static PTX instruction counts inside the role's entry
ptx_mix() {
  awk -v suffix="$suffix" '
    /^\.(visible )?\.entry/ { on = index($0, "_" suffix "(") > 0 }
    /^\.(visible )?\.func/ { on = 0 }
    on {
      if ($0 ~ /bar\.sync|barrier\.sync/) b++
      if ($0 ~ /ld\.shared/) ls++
      if ($0 ~ /st\.shared/) ss++
      if ($0 ~ /mma\.sync/) m++
      if ($0 ~ /ex2\.approx/) e++
      if ($0 ~ /shfl\.sync/) sh++
      if ($0 ~ /cp\.async\.(ca|cg)/) ca++
      if ($0 ~ /ld\.global/) { lg++; if ($0 ~ /\.v4\./) lg4++ }
      if ($0 ~ /st\.global/) { sg++; if ($0 ~ /\.v4\./) sg4++ }
      if ($0 ~ /^[ \t]+[a-z]/ && $0 !~ /^[ \t]+\.(reg|local|shared)/) n++
    }
    END { printf "%d %d %d %d %d %d %d %d %d %d %d %d\n", b, ls, ss, m, e, sh, ca, lg, lg4, sg, sg4, n }' "$1"
}

# static SASS counts (the cubin holds only the role's kernel)
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

fmt='%-18s %-4s %-5s %4s %4s %5s %6s | %4s %5s %5s %4s %4s %4s %4s %5s %4s %5s %4s %6s | %4s %4s %6s %4s %6s %5s\n'
printf '%s, K = %s, V = %s, %s (static counts; "v4" = 16-byte accesses; C/W = chunk/warps)\n' "$role" "$dk" "$dv" "$arch"
# shellcheck disable=SC2059
printf "$fmt" spec path C/W regs bars spill smem bar ld.sh st.sh mma ex2 shfl cp.a ld.gl v4 st.gl v4 instr \
  BAR LDG LDG128 STG STG128 SASS
for s in "${specs[@]}"; do
  for p in lib tile; do
    read -r r nb spill sm < <(resources "$work/$s.$p.log")
    read -r b ls ss m e sh ca lg lg4 sg sg4 n < <(ptx_mix "$work/$s.$p.ptx")
    sb=- slg=- slg4=- ssg=- ssg4=- sn=-
    if [[ $have_sass == 1 ]]; then read -r sb slg slg4 ssg ssg4 sn < <(sass_mix "$work/$s.$p.sass"); fi
    # shellcheck disable=SC2059
    printf "$fmt" "$s" "$p" "$(cat "$work/$s.$p.cfg")" "$r" "$nb" "$spill" "$sm" "$b" "$ls" "$ss" "$m" "$e" "$sh" \
      "$ca" "$lg" "$lg4" "$sg" "$sg4" "$n" "$sb" "$slg" "$slg4" "$ssg" "$ssg4" "$sn"
  done
done
