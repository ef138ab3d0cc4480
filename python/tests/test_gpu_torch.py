"""torch integration on the GPU: torch.compile(fullgraph=True), CUDA graph capture and replay, the
autograd error, decode against a state pool (== forward), and the per-call host overhead."""
import time

import pytest
import torch

import dgps
from dgps import _ops
from helpers import TOL_OUT, TOL_STATE, forward_args, rel_err, requires_cuda, shipped_ops, spec_inputs

pytestmark = [pytest.mark.gpu, requires_cuda]
needs_custom_op = pytest.mark.skipif(not hasattr(torch.library, "custom_op"),
                                     reason=f"torch {torch.__version__} has no torch.library.custom_op (>= 2.4)")


def test_custom_ops_registered():
    if not hasattr(torch.library, "custom_op"):
        pytest.skip(f"torch {torch.__version__} has no torch.library.custom_op (>= 2.4)")
    assert _ops.HAS_CUSTOM_OP, f"registering dgps::forward / dgps::decode_step failed: {_ops.CUSTOM_OP_ERROR}"
    assert hasattr(torch.ops.dgps, "forward") and hasattr(torch.ops.dgps, "decode_step")


def pgdn_inputs(B=2, T=96, seed=21):
    op = dgps.load("pgdn")
    return op, spec_inputs(op, B=B, T=T, seed=seed)


@needs_custom_op
def test_compile_fullgraph_matches_eager():
    op, x = pgdn_inputs()
    q, k, v, kw = forward_args(x)

    def f(q, k, v, kw):
        o, fs, fps = op(q, k, v, output_final_state=True, **kw)
        return o.float() * 2 + 1, fs, fps

    torch._dynamo.reset()
    compiled = torch.compile(f, fullgraph=True)
    got = compiled(q, k, v, kw)
    want = f(q, k, v, kw)
    for a, b in zip(got, want):
        assert torch.equal(a, b)


@needs_custom_op
def test_compile_fullgraph_layer():
    from dgps.layers import PreconditionedGatedDeltaNet
    torch.manual_seed(0)
    layer = PreconditionedGatedDeltaNet(hidden_size=256, head_dim=64, num_heads=4).cuda().bfloat16().eval()
    h = torch.randn(2, 80, 256, device="cuda", dtype=torch.bfloat16)
    torch._dynamo.reset()
    with torch.no_grad():
        want = layer(h)[0]
        got = torch.compile(layer, fullgraph=True)(h)[0]
    assert rel_err(got, want) < 1e-2


def test_cuda_graph_replay():
    op, x = pgdn_inputs(seed=22)
    q, k, v, kw = forward_args(x)
    static = {n: t.clone() for n, t in x.items()}
    sq, sk, sv, skw = forward_args(static)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # warm-up: JIT-load and size the workspace outside capture
        op(sq, sk, sv, output_final_state=True, **skw)
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = op(sq, sk, sv, output_final_state=True, **skw)
    fresh = spec_inputs(op, B=2, T=96, seed=23)
    for n, t in fresh.items():
        static[n].copy_(t)
    graph.replay()
    torch.cuda.synchronize()
    fq, fk, fv, fkw = forward_args(fresh)
    want = op(fq, fk, fv, output_final_state=True, **fkw)
    for a, b in zip(out, want):
        assert torch.equal(a, b), "replayed graph must equal an eager call on the same inputs"
    assert not torch.equal(out[0], op(q, k, v, **kw)[0])  # it really ran on the new inputs


def test_backward_names_the_spec():
    op, x = pgdn_inputs(seed=24)
    q, k, v, kw = forward_args(x)
    q.requires_grad_(True)
    o = op(q, k, v, **kw)[0]
    assert o.requires_grad
    with pytest.raises(RuntimeError, match="dgps: no backward pass for spec 'pgdn' yet"):
        o.float().sum().backward()


# ----------------------------------------------------------------------------- decode with a state pool
def _decode_specs():
    out = []
    for n in shipped_ops("has_decode"):
        info = dgps.load(n).info
        if info["has_forward"] and info["final_state"] and (info["precond"] == "none" or info["final_precond_state"]):
            out.append(n)
    return out


def _steps(x, start, stop, rows=1):
    """Tokens [start, stop) of the per-token inputs; k, v and beta carry `rows` rows per token (info["steps"])."""
    return {n: t[:, start * rows:stop * rows] if n in ("k", "v", "beta") else t[:, start:stop]
            for n, t in x.items() if n in ("q", "k", "v", "g", "beta", "precond_g", "precond_beta")}


@pytest.mark.parametrize("name", _decode_specs())
def test_decode_pool_equals_forward(name):
    op = dgps.load(name)
    B, T0, steps = 3, 20, (1, 3, 8)
    T = T0 + sum(steps)
    x = spec_inputs(op, B=B, T=T, seed=31)
    q, k, v, kw = forward_args(x)
    full_o, full_s, full_p = op(q, k, v, output_final_state=True, **kw)
    nh = op.info["steps"]
    pre = {**x, **_steps(x, 0, T0, nh)}
    pq, pk, pv, pkw = forward_args(pre)
    _, s0, p0 = op(pq, pk, pv, output_final_state=True, **pkw)

    P, rows = 6, torch.tensor([4, 0, 2], device="cuda")
    pool = torch.randn(P, *s0.shape[1:], device="cuda")
    ppool = torch.rand(P, *p0.shape[1:], device="cuda") if p0 is not None else None
    pool[rows] = s0
    if ppool is not None:
        ppool[rows] = p0
    untouched = [r for r in range(P) if r not in rows.tolist()]
    before = pool[untouched].clone(), (ppool[untouched].clone() if ppool is not None else None)
    # batch of 4 entries: entry 1 is padding (index -1) with garbage inputs
    idx = torch.tensor([4, -1, 0, 2], device="cuda")
    order = torch.tensor([0, 0, 1, 2], device="cuda")  # entry -> sequence (padding borrows sequence 0's)
    t, outs = T0, []
    for n_tok in steps:
        step = {n: tt.index_select(0, order).clone() for n, tt in _steps(x, t, t + n_tok, nh).items()}
        for tt in step.values():
            tt[1].normal_()  # the padding entry's inputs are garbage
        if "g" in step:
            step["g"][1] = -step["g"][1].abs()
        sq, sk, sv = step.pop("q"), step.pop("k"), step.pop("v")
        center = {"precond_center": kw["precond_center"]} if "precond_center" in kw else {}
        o = op.decode(sq, sk, sv, **step, **center, state_pool=pool, state_indices=idx, precond_state_pool=ppool)
        assert o.shape == (4, n_tok) + tuple(v.shape[2:])
        assert (o[1] == 0).all(), "padding entries produce zeros"
        outs.append(o[[0, 2, 3]])
        t += n_tok
    dec_o = torch.cat(outs, dim=1)
    e = rel_err(dec_o, full_o[:, T0:])
    assert e <= TOL_OUT, f"{name}: decode o vs forward rel err {e:.3g}"
    e = rel_err(pool[rows], full_s)
    assert e <= TOL_STATE, f"{name}: pool state vs forward final_state rel err {e:.3g}"
    if ppool is not None:
        e = rel_err(ppool[rows], full_p)
        assert e <= TOL_STATE, f"{name}: precond pool vs forward rel err {e:.3g}"
    assert torch.equal(pool[untouched], before[0]), "rows no entry points at must not change"
    if ppool is not None:
        assert torch.equal(ppool[untouched], before[1])


def test_decode_all_padding_leaves_pool_unchanged():
    op = dgps.load("pgdn")
    x = spec_inputs(op, B=2, T=1, seed=32)
    pool, ppool = torch.randn(3, 2, 64, 64, device="cuda"), torch.rand(3, 2, 64, device="cuda")
    p0, pp0 = pool.clone(), ppool.clone()
    q, k, v, kw = forward_args(x)
    kw = {n: t for n, t in kw.items() if not n.startswith("initial")}
    o = op.decode(q, k, v, **kw, state_pool=pool, precond_state_pool=ppool,
                  state_indices=torch.tensor([-1, -1], device="cuda"))
    assert (o == 0).all()
    assert torch.equal(pool, p0) and torch.equal(ppool, pp0)


def test_decode_under_cuda_graph():
    op = dgps.load("pgdn")
    x = spec_inputs(op, B=2, T=2, seed=33)
    q, k, v, kw = forward_args(x)
    kw = {n: t for n, t in kw.items() if not n.startswith("initial")}
    idx = torch.tensor([1, -1], device="cuda")
    pool, ppool = torch.randn(3, 2, 64, 64, device="cuda"), torch.rand(3, 2, 64, device="cuda")
    eager_pool, eager_ppool = pool.clone(), ppool.clone()
    want = op.decode(q, k, v, **kw, state_pool=eager_pool, precond_state_pool=eager_ppool, state_indices=idx)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        op.decode(q, k, v, **kw, state_pool=pool.clone(), precond_state_pool=ppool.clone(), state_indices=idx)
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        got = op.decode(q, k, v, **kw, state_pool=pool, precond_state_pool=ppool, state_indices=idx)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(got, want) and torch.equal(pool, eager_pool) and torch.equal(ppool, eager_ppool)


# ----------------------------------------------------------------------------- host overhead
def _host_us_per_call(fn, n=200):
    fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    host = (time.perf_counter() - t0) / n * 1e6
    torch.cuda.synchronize()
    return host


def test_host_overhead_per_call():
    op, x = pgdn_inputs(B=1, T=64, seed=41)
    q, k, v, kw = forward_args(x)
    fwd = _host_us_per_call(lambda: op(q, k, v, **kw))
    fwd_fs = _host_us_per_call(lambda: op(q, k, v, output_final_state=True, **kw))
    d = spec_inputs(op, B=8, T=1, seed=42)
    dq, dk, dv, dkw = forward_args(d)
    dkw = {n: t for n, t in dkw.items() if not n.startswith("initial")}
    pool, ppool = torch.zeros(16, 2, 64, 64, device="cuda"), torch.zeros(16, 2, 64, device="cuda")
    idx = torch.arange(8, device="cuda")
    dec_direct = _host_us_per_call(lambda: op.decode(dq, dk, dv, **dkw, state_pool=pool[:8],
                                                     precond_state_pool=ppool[:8]))
    dec_pool = _host_us_per_call(lambda: op.decode(dq, dk, dv, **dkw, state_pool=pool, precond_state_pool=ppool,
                                                   state_indices=idx, check_indices=False))
    print(f"\nhost overhead per call (torch {torch.__version__}): forward {fwd:.1f} us, forward+final states "
          f"{fwd_fs:.1f} us, decode (B rows) {dec_direct:.1f} us, decode via state pool {dec_pool:.1f} us "
          "(check_indices=False: no host sync)")
    assert fwd < 1000 and dec_pool < 2000, "host overhead far above the expected tens of microseconds"
