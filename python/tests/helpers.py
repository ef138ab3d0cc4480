"""Shared pieces of the Python tests: spec inputs on the GPU, poisoned outputs, error measures."""
import os

import pytest
import torch

import dgps
from dgps.reference import generate_inputs

requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device (torch sees none)")

# Relative Frobenius error tolerances, as the C++ package tests (tests/gpu/test_packages.cpp) use.
TOL_OUT = 1.5e-2
TOL_STATE = 1.5e-2
TOL_PRECOND = 1e-3


def rel_err(got, want):
    got, want = got.double().cpu(), want.double().cpu()
    assert torch.isfinite(got).all(), "non-finite values in the result"
    return ((got - want).norm() / want.norm().clamp_min(1e-30)).item()


def square_dims(op):
    """K = V values the spec supports (64 first: fastest)."""
    return [d for d in (64, 128, 120) if d in op.info["key_dims"] and d in op.info["value_dims"]]


def heads(op, H=2):
    return (op.info["heads_qk"] or H), (op.info["heads_qk"] or H) * op.info["gva_ratio"]


def spec_inputs(op, B, T, KV=None, seed=1, dtype=torch.bfloat16, cu_seqlens=None, initial_state=True):
    """Inputs on the GPU for op's spec (dsl/InputGen.h distributions)."""
    KV = KV or square_dims(op)[0]
    H, HV = heads(op)
    return generate_inputs(op, B, T, H, KV, KV, HV=HV, seed=seed, dtype=dtype, cu_seqlens=cu_seqlens,
                           initial_state=initial_state, device="cuda")


def forward_args(x):
    """Split generated inputs into op(q, k, v, **kwargs) arguments."""
    kw = {n: t for n, t in x.items() if n not in ("q", "k", "v")}
    return x["q"], x["k"], x["v"], kw


def shipped_ops(kind="has_forward"):
    return [n for n in dgps.shipped_names() if dgps.load(n).info[kind]]


def fla_available():
    try:
        import fla  # noqa: F401  (importable at all?)
        return True
    except Exception:
        return False


def cache_dir(tmp_root):
    return os.environ.get("DGPS_CACHE_DIR") or str(tmp_root)
