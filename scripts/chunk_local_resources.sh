#!/usr/bin/env bash
# Compares the forward chunk_local kernel (or another forward role: ROLE=state_output) of two package trees
# on the CPU (no GPU needed): ptxas resource use
# for sm_90 (registers, spill bytes, static shared memory) and the static PTX instruction mix of the kernel
# (bar.sync, ld.shared, st.shared, mma, ex2, cp.async, ld.global, st.global). Used to line the tile-IR
# chunk_local (scripts/gen_tile_chunk_local.sh) up against the device library's (generated/).
# Dynamic shared memory is the same for both: launch_rules.h chunkLocalSmem fixes it.
#
#   scripts/chunk_local_resources.sh TILE_DIR [LIB_DIR] [SPEC...]
#     TILE_DIR, LIB_DIR: package trees <dir>/<name>/kernels.cu (LIB_DIR defaults to generated/)
#     SPEC: package names (default: every package in TILE_DIR)
#   Environment: NVCC (default nvcc), CHUNK (default: the package's default_config chunk), WARPS (likewise),
#   ARCH (default sm_90; sm_90a for state_output's warpgroup MMA), JOBS (parallel compiles, default 2),
#   ROLE (default chunk_local: the kernel dgps_<name>_fwd_<ROLE> is compared).
set -euo pipefail

if [[ $# -lt 1 ]]; then
  echo "usage: chunk_local_resources.sh TILE_DIR [LIB_DIR] [SPEC...]" >&2
  exit 2
fi
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tile="$1"
lib="${2:-$root/generated}"
shift $(($# >= 2 ? 2 : 1))
nvcc="${NVCC:-nvcc}"
arch="${ARCH:-sm_90}"
jobs="${JOBS:-2}"
role="${ROLE:-chunk_local}"
command -v "$nvcc" >/dev/null || { echo "chunk_local_resources.sh: $nvcc not found (set NVCC)" >&2; exit 1; }
specs=("$@")
if [[ ${#specs[@]} -eq 0 ]]; then
  for d in "$tile"/*/; do [[ -f "$d/kernels.cu" ]] && specs+=("$(basename "$d")"); done
fi
# KEEP=DIR keeps the PTX and ptxas logs there
if [[ -n "${KEEP:-}" ]]; then
  work="$KEEP"
  mkdir -p "$work"
else
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
fi

# default_config: {chunk: 64, block_v: 128, warps: 4, stages: 2}
config_of() {
  sed -n 's/^default_config: {chunk: \([0-9]*\), block_v: [0-9]*, warps: \([0-9]*\).*/\1 \2/p' "$1/manifest.yaml"
}

# compile one package's kernels.cu to PTX and run ptxas on it; writes $work/<tag>.{ptx,log}
compile() {
  local dir="$1" tag="$2" chunk="$3" warps="$4"
  "$nvcc" -arch="$arch" -std=c++17 -ptx -I "$root/runtime/device" -DDGPS_CHUNK="$chunk" -DDGPS_WARPS="$warps" \
    "$dir/kernels.cu" -o "$work/$tag.ptx" 2>"$work/$tag.err" || { cat "$work/$tag.err" >&2; return 1; }
  ptxas -arch="$arch" -v "$work/$tag.ptx" -o /dev/null 2>"$work/$tag.log"
}

pids=()
for s in "${specs[@]}"; do
  read -r chunk warps < <(config_of "$lib/$s")
  chunk="${CHUNK:-$chunk}"
  warps="${WARPS:-$warps}"
  echo "$chunk $warps" >"$work/$s.cfg"
  compile "$lib/$s" "$s.lib" "$chunk" "$warps" &
  pids+=($!)
  compile "$tile/$s" "$s.tile" "$chunk" "$warps" &
  pids+=($!)
  if [[ ${#pids[@]} -ge $jobs ]]; then
    for p in "${pids[@]}"; do wait "$p"; done
    pids=()
  fi
done
for p in "${pids[@]}"; do wait "$p"; done

# ptxas -v: "Compiling entry function 'X'" ... "Used N registers, ... M bytes smem" and spill lines
resources() {
  awk -v fn="$2" '
    /Compiling entry function/ { on = index($0, "'\''" fn "'\''") > 0 }
    on && /bytes spill stores/ { match($0, /[0-9]+ bytes spill stores/); st = substr($0, RSTART, RLENGTH) + 0
                                 match($0, /[0-9]+ bytes spill loads/); ld = substr($0, RSTART, RLENGTH) + 0 }
    on && /Used [0-9]+ registers/ { match($0, /Used [0-9]+/); r = substr($0, RSTART + 5, RLENGTH - 5)
                                    sm = 0; if (match($0, /[0-9]+ bytes smem/)) sm = substr($0, RSTART, RLENGTH) + 0
                                    printf "%s %d %d %d\n", r, st, ld, sm; exit }' "$1"
}

# static instruction counts inside the kernel's .entry body
mix() {
  awk -v fn="$2" '
    /^\.(visible )?\.entry/ { on = index($0, fn "(") > 0 }
    /^\.(visible )?\.func/ { on = 0 }
    on {
      if ($0 ~ /bar\.sync|barrier\.sync/) b++
      if ($0 ~ /ld\.shared/) ls++
      if ($0 ~ /st\.shared/) ss++
      if ($0 ~ /mma\.sync/) m++
      if ($0 ~ /ex2\.approx/) e++
      if ($0 ~ /cp\.async\.(ca|cg)/) ca++
      if ($0 ~ /ld\.global/) lg++
      if ($0 ~ /st\.global/) sg++
      if ($0 ~ /^[ \t]+[a-z]/ && $0 !~ /^[ \t]+\.(reg|local|shared)/) n++
    }
    END { printf "%d %d %d %d %d %d %d %d %d\n", b, ls, ss, m, e, ca, lg, sg, n }' "$1"
}

printf '%-18s %-5s %-6s %5s %6s %6s %6s | %5s %6s %6s %5s %5s %6s %6s %6s %6s\n' spec path C/W regs spillS spillL \
  smemS bar ld.sh st.sh mma ex2 cp.asy ld.gl st.gl instr
for s in "${specs[@]}"; do
  read -r chunk warps <"$work/$s.cfg"
  for p in lib tile; do
    fn="$(grep -o "dgps_[A-Za-z0-9_]*_fwd_${role}\\b" "$work/$s.$p.ptx" | head -1)"
    read -r r st ld sm < <(resources "$work/$s.$p.log" "$fn")
    read -r b ls ss m e ca lg sg n < <(mix "$work/$s.$p.ptx" "$fn")
    printf '%-18s %-5s %-6s %5s %6s %6s %6s | %5s %6s %6s %5s %5s %6s %6s %6s %6s\n' "$s" "$p" "$chunk/$warps" \
      "$r" "$st" "$ld" "$sm" "$b" "$ls" "$ss" "$m" "$e" "$ca" "$lg" "$sg" "$n"
  done
done
