#!/usr/bin/env python3
"""Checks FLA's chunk_gated_delta_product against DGPS's float64 reference of specs/gated_deltaproduct.yaml
(n_h = 2 Householder steps per token, docs/math.md §3.7) on the GPU: an independent check that the spec's
conventions (k, v, beta with T*n_h token-major rows; g on each token's first step; the read after the last
step; in-kernel l2norm; scale K^-1/2) are FLA's. This compares FLA with the reference only; DGPS's own kernels
(generated/gated_deltaproduct, from the tile IR) are checked by the GPU suite (gpu.gated_deltaproduct).

    python3 scripts/fla_gdp_check.py FLA_PARENT_DIR BUILD_DIR [--shape B=2,T=300,H=4,K=128,V=128]
                                     [--cu-seqlens 0,100,101,300] [--work DIR]

FLA_PARENT_DIR holds FLA's `fla/` package; BUILD_DIR holds dsl/tools/dgps-spec. Steps: dgps-spec inputs
(bf16 q, k, v; f32 g, beta, initial_state), dgps-spec reference (float64), FLA on the same inputs (outputs
written as f32), dgps-spec compare (relative L2 error <= 1.5e-2, the tolerance of the GPU tests). Exit
status 0 when o and final_state agree.
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile

SPEC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'specs', 'gated_deltaproduct.yaml')
STEPS = 2  # solve.steps of specs/gated_deltaproduct.yaml

# safetensors dtype names <-> (numpy dtype used to carry the bytes, torch dtype name)
DTYPES = {'BF16': ('<u2', 'bfloat16'), 'F16': ('<f2', 'float16'), 'F32': ('<f4', 'float32'),
          'F64': ('<f8', 'float64'), 'I64': ('<i8', 'int64')}


def read_safetensors(path):
    """{name: (dtype, shape, raw bytes)} of a safetensors file (8-byte header length, JSON header, data)."""
    with open(path, 'rb') as f:
        blob = f.read()
    (n,) = struct.unpack('<Q', blob[:8])
    header = json.loads(blob[8:8 + n])
    base = 8 + n
    out = {}
    for name, meta in header.items():
        if name == '__metadata__':
            continue
        begin, end = meta['data_offsets']
        out[name] = (meta['dtype'], meta['shape'], blob[base + begin:base + end])
    return out


def write_safetensors(path, tensors):
    """tensors: {name: (dtype, shape, raw bytes)}; written in name order, 8-byte aligned header."""
    header, offset, chunks = {}, 0, []
    for name in sorted(tensors):
        dtype, shape, raw = tensors[name]
        header[name] = {'dtype': dtype, 'shape': list(shape), 'data_offsets': [offset, offset + len(raw)]}
        offset += len(raw)
        chunks.append(raw)
    text = json.dumps(header, separators=(',', ':')).encode()
    text += b' ' * ((8 - len(text) % 8) % 8)
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(text)))
        f.write(text)
        for c in chunks:
            f.write(c)


def to_torch(torch, np, entry, device):
    dtype, shape, raw = entry
    carrier, tname = DTYPES[dtype]
    arr = np.frombuffer(raw, dtype=carrier).copy().reshape(shape)
    if dtype == 'BF16':  # numpy has no bfloat16: carry the bits as int16 and reinterpret
        return torch.from_numpy(arr.view(np.int16)).view(torch.bfloat16).to(device)
    return torch.from_numpy(arr).to(device)


def from_torch(t):
    return ('F32', list(t.shape), t.detach().float().contiguous().cpu().numpy().tobytes())


def run(cmd):
    print('+', ' '.join(cmd), flush=True)
    return subprocess.run(cmd).returncode


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('fla_parent')
    ap.add_argument('build_dir')
    ap.add_argument('--shape', default='B=2,T=300,H=4,K=128,V=128')
    ap.add_argument('--cu-seqlens', default='', help='varlen boundaries in tokens (then B=1), e.g. 0,100,101,300')
    ap.add_argument('--work', default='', help='folder for the safetensors files (default: a temporary one)')
    args = ap.parse_args()
    tool = os.path.join(args.build_dir, 'dsl', 'tools', 'dgps-spec')
    if not os.access(tool, os.X_OK):
        raise SystemExit(f'fla_gdp_check: no dgps-spec at {tool}')
    if not os.path.isdir(os.path.join(args.fla_parent, 'fla')):
        raise SystemExit(f'fla_gdp_check: no fla/ package in {args.fla_parent}')
    work = args.work or tempfile.mkdtemp(prefix='fla_gdp_')
    inputs, ref, got = (os.path.join(work, n) for n in ('inputs.safetensors', 'ref.safetensors', 'fla.safetensors'))

    gen = [tool, 'inputs', SPEC, '--shape', args.shape, '--dtype', 'bf16', '--out', inputs]
    if args.cu_seqlens:
        gen += ['--cu-seqlens', args.cu_seqlens]
    if run(gen) or run([tool, 'reference', SPEC, '--inputs', inputs, '--out', ref]):
        raise SystemExit('fla_gdp_check: dgps-spec failed')

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from fla_bench import import_fla  # FLA's ops without its layers and models
    import_fla(args.fla_parent)
    import numpy as np
    import torch
    from fla.ops.gated_delta_product import chunk_gated_delta_product
    if not torch.cuda.is_available():
        raise SystemExit('fla_gdp_check: no CUDA device')
    x = {name: to_torch(torch, np, e, 'cuda') for name, e in read_safetensors(inputs).items()}
    cu = x.get('cu_seqlens')
    with torch.inference_mode():
        o, final = chunk_gated_delta_product(
            q=x['q'], k=x['k'], v=x['v'], g=x['g'], beta=x['beta'], num_householder=STEPS,
            initial_state=x.get('initial_state'), output_final_state=True, use_qk_l2norm_in_kernel=True,
            cu_seqlens=cu)
    write_safetensors(got, {'o': from_torch(o), 'final_state': from_torch(final)})
    rc = run([tool, 'compare', ref, got])
    print(f'fla_gdp_check: {"PASS" if rc == 0 else "FAIL"} (files in {work})')
    return rc


if __name__ == '__main__':
    sys.exit(main())
