"""The state-pool semantics of Op.decode (gather, decode, scatter; padding entries skipped), checked on
the CPU by standing in the float64 reference for the decode kernel: decode over T tokens from state S is
the reference forward from initial_state S. The GPU version of this test runs the real kernel
(test_gpu_torch.py::test_decode_pool_equals_forward)."""
import pytest
import torch

import dgps
from dgps import _ops
from dgps.reference import generate_inputs

H, K, V, P = 2, 64, 64, 5


def reference_decode(key, q, k, v, g, beta, precond_g, precond_beta, precond_center, state, precond_state):
    op = _ops._OPS[key]
    out = dgps.reference(op, q=q, k=k, v=v, g=g, beta=beta, precond_g=precond_g, precond_beta=precond_beta,
                         precond_center=precond_center, initial_state=state,
                         initial_precond_state=precond_state if precond_state.numel() else None)
    state.copy_(out["final_state"])
    if precond_state.numel():
        precond_state.copy_(out["final_precond_state"])
    return out["o"].to(q.dtype)


@pytest.fixture
def cpu_decode(monkeypatch):
    monkeypatch.setattr(_ops, "decode_op", reference_decode)
    monkeypatch.setattr(dgps.Op, "_check_device", lambda *a, **kw: None)


def step_inputs(op, B, T, seed):
    x = generate_inputs(op, B, T, H, K, V, seed=seed, initial_state=False)
    return x.pop("q"), x.pop("k"), x.pop("v"), x


@pytest.mark.parametrize("indices", [[3, -1, 0], [0, 3, -1]])
def test_pool_rows_updated_padding_skipped(cpu_decode, indices):
    op = dgps.load("pgdn")
    torch.manual_seed(1)
    pool, ppool = torch.randn(P, H, K, V) * 0.1, torch.rand(P, H, K)
    pool0, ppool0 = pool.clone(), ppool.clone()
    q, k, v, kw = step_inputs(op, 3, 2, seed=2)
    pad = indices.index(-1)
    for t in (q, k, v, kw["g"], kw["beta"]):
        t[pad] = float("nan")  # the padding entry's inputs must never reach any row
    idx = torch.tensor(indices)
    o = op.decode(q, k, v, **kw, state_pool=pool, precond_state_pool=ppool, state_indices=idx)
    assert (o[pad] == 0).all() and torch.isfinite(o).all()
    for b, row in ((b, r) for b, r in enumerate(indices) if r >= 0):
        want = dgps.reference(op, q=q[b:b + 1], k=k[b:b + 1], v=v[b:b + 1],
                              **{n: (t[b:b + 1] if t.dim() > 1 else t) for n, t in kw.items()},
                              initial_state=pool0[row:row + 1], initial_precond_state=ppool0[row:row + 1])
        torch.testing.assert_close(pool[row], want["final_state"][0].float())
        torch.testing.assert_close(ppool[row], want["final_precond_state"][0].float())
        torch.testing.assert_close(o[b].double(), want["o"][0].to(o.dtype).double())
    for row in (1, 2, 4):
        assert torch.equal(pool[row], pool0[row]) and torch.equal(ppool[row], ppool0[row])


def test_all_padding_changes_nothing(cpu_decode):
    op = dgps.load("pgdn")
    pool, ppool = torch.randn(P, H, K, V), torch.rand(P, H, K)
    pool0, ppool0 = pool.clone(), ppool.clone()
    q, k, v, kw = step_inputs(op, 2, 1, seed=3)
    o = op.decode(q, k, v, **kw, state_pool=pool, precond_state_pool=ppool, state_indices=torch.tensor([-1, -1]))
    assert (o == 0).all()
    assert torch.equal(pool, pool0) and torch.equal(ppool, ppool0)


def test_without_indices_rows_are_the_batch(cpu_decode):
    op = dgps.load("gdn")
    pool = torch.randn(2, H, K, V) * 0.1
    pool0 = pool.clone()
    q, k, v, kw = step_inputs(op, 2, 3, seed=4)
    op.decode(q, k, v, **kw, state_pool=pool)
    want = dgps.reference(op, q=q, k=k, v=v, **kw, initial_state=pool0)
    torch.testing.assert_close(pool, want["final_state"].float())


@pytest.mark.parametrize("indices, what", [([0, 5, -1], "out of range"), ([2, -2, 0], "out of range"),
                                           ([1, 1, -1], "name a row twice")])
def test_bad_indices_rejected(cpu_decode, indices, what):
    op = dgps.load("pgdn")
    q, k, v, kw = step_inputs(op, 3, 1, seed=5)
    with pytest.raises(dgps.InvalidArgument, match=what):
        op.decode(q, k, v, **kw, state_pool=torch.zeros(P, H, K, V), precond_state_pool=torch.zeros(P, H, K),
                  state_indices=torch.tensor(indices))


def test_pool_row_counts_must_agree(cpu_decode):
    op = dgps.load("pgdn")
    q, k, v, kw = step_inputs(op, 2, 1, seed=6)
    with pytest.raises(dgps.InvalidArgument, match="one row per slot in both"):
        op.decode(q, k, v, **kw, state_pool=torch.zeros(P, H, K, V), precond_state_pool=torch.zeros(P + 1, H, K),
                  state_indices=torch.tensor([0, 1]))
