#!/usr/bin/env python3
"""Reads Nsight Compute's SASS source page (CSV: `ncu --import R --page source --csv --print-source sass`, with the
SourceCounters section collected) and prints three views of one kernel, standard library only:

  1. the SASS lines with the most warp-stall samples, each with its two leading stall reasons;
  2. the kernel cut at its barriers (every BAR.SYNC, CTA-wide or named): instructions executed and stall samples per
     region, so a phase of a role (loads, norms, products, inverse, stores) reads as one line;
  3. the global and shared memory instructions with the most L1 work: L1 tag requests per instruction and shared
     wavefronts against the ideal (a bank conflict, or a global access touching more lines than it needs, shows
     here).

    python3 scripts/ncu_source_summary.py REPORT.sass.csv [--top N]

Used by scripts/gpu_hotspots.sh; docs/performance.md (runs 17 and 18) shows what these views found."""
import argparse
import collections
import csv
import math
import sys

STALL = "Warp Stall Sampling (All Samples)"
EXECUTED = "Instructions Executed"


def number(text):
    """A cell as a finite float; empty, non-numeric, NaN and infinite cells count as 0."""
    try:
        x = float(text.replace(",", "") or 0)
    except ValueError:
        return 0.0
    return x if math.isfinite(x) else 0.0


def read_table(path):
    with open(path, errors="replace", newline="") as f:
        rows = list(csv.reader(f))
    head = next((i for i, r in enumerate(rows) if "Source" in r and STALL in r), None)
    if head is None:
        sys.exit(f"ncu_source_summary: {path}: no SASS source table with '{STALL}' (collect --section SourceCounters "
                 "and export with --page source --csv --print-source sass)")
    cols = rows[head]
    body = []
    for r in rows[head + 1:]:
        if r == cols:  # a second kernel's table: this script reads one kernel (profile with --launch-count 1)
            print(f"ncu_source_summary: {path}: more than one kernel; reading the first", file=sys.stderr)
            break
        if len(r) == len(cols):
            body.append(dict(zip(cols, r)))
    stalls = [c for c in cols if c.startswith("stall_") and "Not Issued" not in c]
    return body, stalls


def top_lines(body, stalls, n, total):
    print(f"== the {n} SASS lines with the most stall samples ({int(total)} samples)")
    ranked = sorted(enumerate(body), key=lambda e: -number(e[1][STALL]))[:n]
    for idx, r in ranked:
        samples = number(r[STALL])
        if samples == 0:
            break
        why = sorted(stalls, key=lambda c: -number(r[c]))[:2]
        reasons = ", ".join(f"{c[len('stall_'):]} {number(r[c]):.0f}" for c in why if number(r[c]) > 0)
        print(f"{100 * samples / total:5.1f}%  #{idx:5d}  {r['Source'][:72]:72s}  {reasons}")


def barrier_regions(body, stalls, total):
    print("\n== regions between barriers (BAR.SYNC): share of stall samples, instructions executed, leading reasons")
    start, executed, reasons = 0, 0.0, collections.Counter()
    for idx, r in enumerate(body):
        executed += number(r.get(EXECUTED, "0"))
        for c in stalls:
            reasons[c] += number(r[c])
        if "BAR.SYNC" in r["Source"] or idx == len(body) - 1:
            share = 100 * sum(reasons.values()) / total
            lead = ", ".join(f"{c[len('stall_'):]} {100 * v / total:.1f}" for c, v in reasons.most_common(3) if v > 0)
            print(f"#{start:5d}-{idx:5d}  {share:5.1f}%  {executed / 1e6:8.2f} M instructions  {lead}")
            start, executed, reasons = idx + 1, 0.0, collections.Counter()


def memory_table(body, n_lines):
    keys = ("L1 Tag Requests Global", "L1 Wavefronts Shared", "L1 Wavefronts Shared Ideal")
    if not all(k in body[0] for k in keys):
        print("\n(no memory columns: collect the SourceCounters section)")
        return
    ops = ("LDG", "STG", "LDS", "STS", "LDSM", "STSM")
    mem = []
    for idx, r in enumerate(body):
        n = number(r.get(EXECUTED, "0"))
        # "@!PT LDS RZ, [RZ]" never executes a lane: ptxas pads cp.async sequences with it
        if n > 0 and any(op in r["Source"] for op in ops) and "@!PT" not in r["Source"]:
            tags, wf, ideal = (number(r[k]) for k in keys)
            mem.append((tags + wf, idx, r["Source"], n, tags, wf, ideal))
    print(f"\n== the {n_lines} memory instructions with the most L1 work (tag requests + shared wavefronts), per "
          "warp instruction; '<-' marks shared wavefronts above 1.5x the ideal")
    for _, idx, text, n, tags, wf, ideal in sorted(mem, reverse=True)[:n_lines]:
        glob = f"tags {tags / n:4.1f}" if tags > 0 else ""
        shared = f"wavefronts {wf / n:5.1f} (ideal {ideal / n:4.1f})" if wf > 0 else ""
        flag = "  <-" if wf > 1.5 * ideal else ""
        print(f"#{idx:5d}  {n / 1e3:9.1f} k  {text[:58]:58s}  {glob:9s}  {shared}{flag}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv", help="ncu --page source --csv --print-source sass output")
    ap.add_argument("--top", type=int, default=40, help="how many of the most stalled lines to print")
    args = ap.parse_args()
    if args.top < 0:
        ap.error("--top must be 0 or more")
    body, stalls = read_table(args.csv)
    if not body:
        sys.exit(f"ncu_source_summary: {args.csv}: the source table has no rows")
    total = sum(number(r[STALL]) for r in body) or 1.0
    top_lines(body, stalls, args.top, total)
    barrier_regions(body, stalls, total)
    memory_table(body, args.top)


if __name__ == "__main__":
    main()
