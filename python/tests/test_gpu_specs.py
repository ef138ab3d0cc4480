"""Every shipped spec on the GPU through the Python API, against the float64 reference (dsl/Reference.h)
and, where flash-linear-attention is importable and has the same recurrence, against FLA's op on the
same tensors. Outputs are poisoned (the allocator's next blocks hold NaN) before each run."""
import inspect

import pytest
import torch

import dgps
from helpers import (TOL_OUT, TOL_PRECOND, TOL_STATE, fla_available, forward_args, rel_err, requires_cuda,
                     shipped_ops, spec_inputs)

pytestmark = [pytest.mark.gpu, requires_cuda]


def poison_allocator(*shapes):
    """Leave NaN-filled blocks of these shapes in torch's cache, so the op's outputs start as NaN."""
    blocks = [torch.full(s, float("nan"), device="cuda") for s in shapes]
    del blocks


def check_against_reference(op, x, got, what):
    ref = dgps.reference(op, **x)
    o, fs, fps = got
    e = rel_err(o, ref["o"])
    assert e <= TOL_OUT, f"{op.name} {what}: o rel err {e:.3g}"
    if "final_state" in ref:
        assert fs is not None, f"{op.name}: final_state missing"
        e = rel_err(fs, ref["final_state"])
        assert e <= TOL_STATE, f"{op.name} {what}: final_state rel err {e:.3g}"
    if "final_precond_state" in ref:
        assert fps is not None, f"{op.name}: final_precond_state missing"
        e = rel_err(fps, ref["final_precond_state"])
        assert e <= TOL_PRECOND, f"{op.name} {what}: final_precond_state rel err {e:.3g}"


@pytest.mark.parametrize("name", shipped_ops())
def test_forward_matches_reference(name):
    op = dgps.load(name)
    x = spec_inputs(op, B=2, T=100, seed=11)
    q, k, v, kw = forward_args(x)
    poison_allocator(*(tuple(x[n].shape) for n in ("v", "initial_state", "initial_precond_state") if n in x))
    check_against_reference(op, x, op(q, k, v, output_final_state=True, **kw), "dense")


@pytest.mark.parametrize("name", [n for n in shipped_ops() if dgps.load(n).info["varlen"]])
def test_varlen_matches_reference(name):
    op = dgps.load(name)
    x = spec_inputs(op, B=1, T=100, seed=12, cu_seqlens=[0, 37, 38, 100])
    q, k, v, kw = forward_args(x)
    check_against_reference(op, x, op(q, k, v, output_final_state=True, **kw), "varlen")


@pytest.mark.parametrize("name", ["pgdn", "kda", "gdn"])
def test_strided_inputs_and_bf16_gates(name):
    """Non-contiguous q/k/v are copied, not rejected; bf16 gates are converted to the ABI's f32."""
    op = dgps.load(name)
    x = spec_inputs(op, B=2, T=70, seed=13)
    gates = [n for n in ("g", "beta", "precond_g", "precond_beta") if n in x]
    for n in gates:
        x[n] = x[n].bfloat16().float()  # the values a bf16 gate carries
    q, k, v, kw = forward_args(x)
    strided = [t.transpose(1, 2).contiguous().transpose(1, 2) for t in (q, k, v)]
    assert not strided[0].is_contiguous()
    kw16 = {n: (t.bfloat16() if n in gates else t) for n, t in kw.items()}
    got = op(*strided, output_final_state=True, **kw16)
    check_against_reference(op, x, got, "strided+bf16 gates")
    same = op(q, k, v, output_final_state=True, **kw)
    assert torch.equal(got[0], same[0]), "strided and contiguous inputs must give the same output"


# ----------------------------------------------------------------------------- flash-linear-attention
def _l2(x):
    xf = x.float()
    return (xf * torch.rsqrt((xf * xf).sum(-1, keepdim=True) + 1e-6)).to(x.dtype)


def _fla_call(name, x):
    """FLA's op for spec `name` on the same tensors, or a skip reason. q and k are l2-normalised here
    (FLA's in-kernel normalisation is then a no-op up to eps), so every FLA version agrees."""
    if name == "gdn":
        from fla.ops.gated_delta_rule import chunk_gated_delta_rule as f
        kw = dict(g=x["g"], beta=x["beta"])
    elif name == "kda":
        from fla.ops.kda import chunk_kda as f
        kw = dict(g=x["g"], beta=x["beta"])
    elif name == "deltanet":
        from fla.ops.delta_rule import chunk_delta_rule as f
        kw = dict(beta=x["beta"])
    elif name == "pgdn":
        from fla.ops.precond_gated_delta_rule import chunk_precond_gated_delta_rule as f
        kw = dict(g=x["g"], g_atk=x["precond_g"], beta=x["beta"], beta_atk=x["precond_beta"],
                  log_atk_scale=x["precond_center"], x=1.5, eps=1e-6)
    elif name == "pkda":
        from fla.ops.precond_kda import chunk_precond_kda as f
        kw = dict(g=x["g"], g_atk=x["precond_g"], beta=x["beta"], beta_atk=x["precond_beta"],
                  log_atk_scale=x["precond_center"], x=1.5, eps=1e-6)
    else:
        return None
    params = inspect.signature(f).parameters
    missing = [n for n in kw if n not in params and "kwargs" not in params]
    if missing:
        pytest.skip(f"this fla's {f.__name__} lacks {missing}")
    if "use_qk_l2norm_in_kernel" in params:
        kw["use_qk_l2norm_in_kernel"] = False
    o = f(_l2(x["q"]), _l2(x["k"]), x["v"], output_final_state=False, **kw)
    return o[0] if isinstance(o, tuple) else o


@pytest.mark.skipif(not fla_available(), reason="fla (flash-linear-attention) is not importable")
@pytest.mark.parametrize("name", ["gdn", "kda", "deltanet", "pgdn", "pkda"])
def test_forward_matches_fla(name):
    if name not in dgps.shipped_names():
        pytest.skip(f"{name} is not shipped")
    op = dgps.load(name)
    x = spec_inputs(op, B=2, T=130, seed=14, initial_state=False)
    q, k, v, kw = forward_args(x)
    ours = op(q, k, v, **kw)[0]
    theirs = _fla_call(name, x)
    ref = dgps.reference(op, **x)["o"]
    e_ours, e_fla, e_between = rel_err(ours, ref), rel_err(theirs, ref), rel_err(ours, theirs.double())
    print(f"\n{name}: rel err vs float64: dgps {e_ours:.2e}, fla {e_fla:.2e}; dgps vs fla {e_between:.2e}")
    assert e_ours <= TOL_OUT and e_between <= 2 * TOL_OUT
