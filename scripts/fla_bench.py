#!/usr/bin/env python3
"""Times flash-linear-attention (FLA) on the GPU beside dgps-bench, in the same run, and writes the JSON that
`dgps-bench --dgps_fla=FILE` reads (format: bench/Anchors.h).

    python3 scripts/fla_bench.py FLA_PARENT_DIR OUT.json [--shapes LIST] [--ops gdn,deltanet,kda,...]

Gated DeltaProduct (n_h = 2, FLA's chunk_gated_delta_product; dgps-bench times generated/gated_deltaproduct,
whose forward comes from the tile IR, beside it), alone:
    python3 scripts/fla_bench.py FLA_PARENT_DIR gdp.json --ops gated_deltaproduct \
        --shapes "forward:B=8,T=4096,H=16,K=128,V=128"

FLA_PARENT_DIR holds FLA's `fla/` package (a git-ignored copy; never committed). LIST uses dgps-bench's
--dgps_shapes syntax: "forward:B=8,T=4096,H=16,K=128,V=128;decode:B=256,H=16,K=128,V=128" (HV=n for GVA: at
such a shape only FLA's GDN op runs, recorded as gdn_gva).

Method (the same as dgps-bench's): bf16 inputs, fp32 gates, forward only under inference_mode, no initial or
final state for forward shapes; decode is one token from a given fp32 state with the final state written.
Each op is warmed up (Triton autotunes on its first call), then timed with CUDA events one call at a time,
with the L2 cache flushed (a 256 MiB write) before every call; the median is reported. Keys are l2-normalised
before the call (FLA's kernels then skip that work; ours do it in the kernel), so FLA is not charged for it.
"""
import argparse
import json
import os
import statistics
import sys
import time
import types


def parse_shapes(text):
    shapes = []
    for item in filter(None, text.split(';')):
        kind, _, fields = item.partition(':')
        if kind not in ('forward', 'decode'):
            raise SystemExit(f"fla_bench: shape '{item}': expected forward:... or decode:...")
        s = {'kind': kind, 'T': 1}
        for f in filter(None, fields.split(',')):
            key, _, val = f.partition('=')
            if key not in ('B', 'T', 'H', 'HV', 'K', 'V') or not val.isdigit() or int(val) < 1:
                raise SystemExit(f"fla_bench: shape '{item}': bad field '{f}'")
            s[key] = int(val)
        s.setdefault('HV', s.get('H', 0))
        if not all(k in s for k in ('B', 'H', 'K', 'V')):
            raise SystemExit(f"fla_bench: shape '{item}': needs B, H, K, V")
        shapes.append(s)
    return shapes


def spec_at(spec, s):
    """The spec name a row of FLA op `spec` is recorded under at shape `s`, or None to skip it. At a GVA shape
    (HV > H) FLA's GDN op runs grouped value heads, which is our gdn_gva spec (dgps-bench matches FLA rows by spec
    name and shape); the other ops are not timed there: no spec of ours runs them with grouped values."""
    if s['HV'] == s['H']:
        return spec
    return 'gdn_gva' if spec == 'gdn' and s['kind'] == 'forward' else None


def import_fla(parent):
    # FLA's top-level __init__ imports its layers and models (and transformers); the ops need none of it.
    pkg = types.ModuleType('fla')
    pkg.__path__ = [os.path.join(parent, 'fla')]
    # Some ops read fla.__version__: take it from the package's __init__ without running it.
    pkg.__version__ = 'unknown'
    with open(os.path.join(parent, 'fla', '__init__.py')) as f:
        for line in f:
            if line.startswith('__version__'):
                pkg.__version__ = line.split('=', 1)[1].strip().strip('"\'')
    sys.modules['fla'] = pkg


# Householder steps per token of specs/gated_deltaproduct.yaml (solve.steps).
GDP_STEPS = 2


def make_inputs(torch, s, seed=0, with_steps=False):
    F = torch.nn.functional
    g = torch.Generator(device='cuda').manual_seed(seed)
    B, T, H, HV, K, V = s['B'], s['T'], s['H'], s['HV'], s['K'], s['V']
    bf = torch.bfloat16

    def randn(*shape):
        return torch.randn(*shape, device='cuda', generator=g)

    x = {
        'q': randn(B, T, H, K).to(bf),
        'k': F.normalize(randn(B, T, H, K), dim=-1).to(bf),
        'v': randn(B, T, HV, V).to(bf),
        'beta': torch.sigmoid(randn(B, T, HV)),
        'g': F.logsigmoid(randn(B, T, HV)),
        'gk': F.logsigmoid(randn(B, T, HV, K)),
        # the ATK preconditioner's own gain and log-decay (pgdn, pkda), per key head
        'g_atk': F.logsigmoid(randn(B, T, H)),
        'beta_atk': torch.sigmoid(randn(B, T, H)),
    }
    if s['kind'] == 'decode':
        x['h0'] = randn(B, HV, K, V) * 0.1
    elif with_steps:
        # Gated DeltaProduct: k, v and beta carry T * n_h rows (row t*n_h + j is Householder step j of token t).
        n = GDP_STEPS
        x['k_steps'] = F.normalize(randn(B, T * n, H, K), dim=-1).to(bf)
        x['v_steps'] = randn(B, T * n, HV, V).to(bf)
        x['beta_steps'] = torch.sigmoid(randn(B, T * n, HV))
    return x


def fla_ops(torch):
    """Our spec name -> (FLA op name, callable(x) for forward, callable(x) for decode or None)."""
    ops = {}
    try:
        from fla.ops.gated_delta_rule import chunk_gated_delta_rule, fused_recurrent_gated_delta_rule
        ops['gdn'] = ('chunk_gated_delta_rule',
                      lambda x: chunk_gated_delta_rule(x['q'], x['k'], x['v'], x['g'], x['beta'])[0],
                      ('fused_recurrent_gated_delta_rule',
                       lambda x: fused_recurrent_gated_delta_rule(x['q'], x['k'], x['v'], x['g'], x['beta'],
                                                                  initial_state=x['h0'],
                                                                  output_final_state=True)))
    except Exception as e:  # an FLA without this op: say so, time the rest
        print(f"fla_bench: gdn unavailable: {e!r}", file=sys.stderr)
    try:
        from fla.ops.delta_rule import chunk_delta_rule
        ops['deltanet'] = ('chunk_delta_rule',
                           lambda x: chunk_delta_rule(x['q'], x['k'], x['v'], x['beta'])[0], None)
    except Exception as e:
        print(f"fla_bench: deltanet unavailable: {e!r}", file=sys.stderr)
    try:
        from fla.ops.kda import chunk_kda
        ops['kda'] = ('chunk_kda', lambda x: chunk_kda(x['q'], x['k'], x['v'], x['gk'], x['beta'])[0], None)
    except Exception as e:
        print(f"fla_bench: kda unavailable: {e!r}", file=sys.stderr)
    try:
        from fla.ops.precond_gated_delta_rule import chunk_precond_gated_delta_rule
        ops['pgdn'] = ('chunk_precond_gated_delta_rule',
                       lambda x: chunk_precond_gated_delta_rule(x['q'], x['k'], x['v'], x['g_atk'], x['g'],
                                                                x['beta_atk'], x['beta'])[0], None)
    except Exception as e:  # an FLA older than the preconditioned ops
        print(f"fla_bench: pgdn unavailable: {e!r}", file=sys.stderr)
    try:
        from fla.ops.precond_kda import chunk_precond_kda
        ops['pkda'] = ('chunk_precond_kda',
                       lambda x: chunk_precond_kda(x['q'], x['k'], x['v'], x['gk'], x['g_atk'], x['beta_atk'],
                                                   x['beta'])[0], None)
    except Exception as e:
        print(f"fla_bench: pkda unavailable: {e!r}", file=sys.stderr)
    try:
        from fla.ops.gated_delta_product import chunk_gated_delta_product
        ops['gated_deltaproduct'] = (
            'chunk_gated_delta_product',
            lambda x: chunk_gated_delta_product(q=x['q'], k=x['k_steps'], v=x['v_steps'], g=x['g'],
                                                beta=x['beta_steps'], num_householder=GDP_STEPS)[0],
            None)
    except Exception as e:  # an FLA older than gated_delta_product
        print(f"fla_bench: gated_deltaproduct unavailable: {e!r}", file=sys.stderr)
    return ops


def time_call(torch, fn, warmup, reps, flush):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        flush.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('fla_parent')
    ap.add_argument('out')
    ap.add_argument('--shapes', default='forward:B=8,T=4096,H=16,K=128,V=128;'
                                        'forward:B=1,T=32768,H=16,K=128,V=128;decode:B=256,H=16,K=128,V=128')
    ap.add_argument('--ops', default='', help='comma-separated spec names (default: every FLA op found)')
    ap.add_argument('--warmup', type=int, default=20)
    ap.add_argument('--reps', type=int, default=100)
    args = ap.parse_args()
    if not os.path.isdir(os.path.join(args.fla_parent, 'fla')):
        raise SystemExit(f"fla_bench: no fla/ package in {args.fla_parent}")
    import_fla(args.fla_parent)
    import torch
    import triton
    if not torch.cuda.is_available():
        raise SystemExit("fla_bench: no CUDA device")
    wanted = set(filter(None, args.ops.split(',')))
    ops = {k: v for k, v in fla_ops(torch).items() if not wanted or k in wanted}
    flush = torch.empty(256 << 20, dtype=torch.uint8, device='cuda')
    out = {'gpu': torch.cuda.get_device_name(), 'torch': torch.__version__, 'triton': triton.__version__,
           'date': time.strftime('%Y-%m-%d'), 'rows': []}
    for s in parse_shapes(args.shapes):
        x = make_inputs(torch, s, with_steps='gated_deltaproduct' in ops)
        for name, (op, fwd, dec) in ops.items():
            spec = spec_at(name, s)
            if spec is None:
                continue
            if s['kind'] == 'decode':
                if dec is None:
                    continue
                op, fn = dec
            else:
                fn = fwd
            row = {'spec': spec, 'op': op, 'kind': s['kind'], 'B': s['B'], 'T': s['T'], 'H': s['H'],
                   'HV': s['HV'], 'K': s['K'], 'V': s['V']}
            t0 = time.time()
            try:
                with torch.inference_mode():
                    row['ms'] = time_call(torch, lambda: fn(x), args.warmup, args.reps, flush)
            except Exception as e:
                row['error'] = repr(e)[:300]
            print(json.dumps(row), f"({time.time() - t0:.0f} s)", flush=True)
            out['rows'].append(row)
            write(args.out, out)  # after every row: a run cut short by a time limit keeps what it timed
        del x
        torch.cuda.empty_cache()
    write(args.out, out)


def write(path, out):
    tmp = path + '.tmp'
    with open(tmp, 'w') as f:
        json.dump(out, f, indent=1)
    os.replace(tmp, path)


if __name__ == '__main__':
    main()
