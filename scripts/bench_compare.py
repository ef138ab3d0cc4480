#!/usr/bin/env python3
"""Old beside new: merges dgps-bench logs of two trees timed in one GPU call (passes alternating, as
scripts/gpu_compare.sh runs them) into one markdown table: per spec, kind, shape and configuration, each pass's
median of the base tree and of the new one, and the change of the means of the passes. A row whose check column is
not a float64 error (WRONG, ERROR, UNCHECKED) in either tree is marked so, and an untimed row changes nothing. The
default (and tuned) rows of a shape are compared whatever configuration each tree picked, since a change of the
default rule is what the comparison is for; the config column then shows both ("base → new").
Standard library only.

    python3 scripts/bench_compare.py --base BASE_PASS1.log [BASE_PASS2.log ...] --new NEW_PASS1.log [...]

The rows are the benchmark table lines of dgps-bench (`| spec | kind | shape | config | ms [p20, p80] | ... |
check |`); anything else in the logs is ignored."""
import argparse
import re
import sys

ROW = re.compile(r"^\| ([a-z0-9_]+) \| (forward|decode) \| (\S+) \| ([^|]+?) \| ([^|]*?) \|.*\| ([^|]*) \|\s*$")
MS = re.compile(r"^([0-9.]+)( \[[^]]*\])?$")


def row_key(spec, kind, shape, config):
    """The row's identity across trees: its default or tuned row whatever the configuration, else the configuration."""
    variant = config.split()[0] if config.split() and config.split()[0] in ("default", "tuned") else config
    return (spec, kind, shape, variant)


def read_log(path):
    """{row_key: (ms or None when untimed, check column, config)} of one dgps-bench log."""
    rows = {}
    try:
        with open(path, errors="replace") as f:
            for line in f:
                m = ROW.match(line.rstrip("\n"))
                if m:
                    spec, kind, shape, config, ms, check = m.groups()
                    t = MS.match(ms.strip())
                    config = config.strip()
                    rows[row_key(spec, kind, shape, config)] = (float(t.group(1)) if t else None, check.strip(), config)
    except OSError as e:
        sys.exit(f"bench_compare: cannot read {path}: {e.strerror}")
    if not rows:
        sys.exit(f"bench_compare: {path}: no dgps-bench table rows (is it a dgps-bench log?)")
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", nargs="+", required=True, help="the base tree's logs, one per pass")
    ap.add_argument("--new", nargs="+", required=True, help="the new tree's logs, one per pass")
    args = ap.parse_args()
    base = [read_log(p) for p in args.base]
    new = [read_log(p) for p in args.new]
    keys = sorted(set().union(*base, *new), key=lambda k: (k[1], k[2], k[0], k[3]))
    print("| spec | kind | shape | config | base (ms, per pass) | new (ms, per pass) | change |")
    print("|---|---|---|---|---|---|---|")
    for key in keys:
        b = [r[key] for r in base if key in r]
        n = [r[key] for r in new if key in r]
        cell = lambda rs: ", ".join("–" if ms is None else f"{ms:.3f}" for ms, _, _ in rs) or "–"
        bt = [ms for ms, _, _ in b if ms is not None]
        nt = [ms for ms, _, _ in n if ms is not None]
        if bt and nt:
            mb, mn = sum(bt) / len(bt), sum(nt) / len(nt)
            change = f"{100 * (mn - mb) / mb:+.1f}%"
        elif b and n:
            change = "not timed"
        else:
            change = "only in " + ("base" if b else "new")
        bad = sorted({ck.split()[0] for _, ck, _ in b + n if ck and not re.match(r"^[0-9.]+e[-+][0-9]+$", ck)})
        if bad:
            change += " (check: " + ", ".join(bad) + ")"
        configs = list(dict.fromkeys(c for _, _, c in b + n))  # in order of appearance: base's first
        config = configs[0] if len(configs) == 1 else " → ".join(configs)
        print(f"| {key[0]} | {key[1]} | {key[2]} | {config} | {cell(b)} | {cell(n)} | {change} |")


if __name__ == "__main__":
    main()
