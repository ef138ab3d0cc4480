"""dgps.layers on the GPU: each layer against itself with the float64 reference recurrence swapped in,
and against flash-linear-attention's layer of the same name with the same weights (state dict copied),
when fla is importable."""
import pytest
import torch

import dgps
from dgps.layers import KDA, OSDN, GatedDeltaNet, PreconditionedGatedDeltaNet
from helpers import fla_available, rel_err, requires_cuda

pytestmark = [pytest.mark.gpu, requires_cuda]
CONFIG = dict(hidden_size=256, head_dim=64, num_heads=4, expand_v=1)


def make(cls, **kw):
    torch.manual_seed(5)
    return cls(**CONFIG, **kw).cuda().bfloat16().eval()


@pytest.mark.parametrize("cls", [GatedDeltaNet, PreconditionedGatedDeltaNet, KDA, OSDN])
def test_layer_matches_reference_recurrence(cls):
    layer = make(cls)
    h = torch.randn(2, 100, CONFIG["hidden_size"], device="cuda", dtype=torch.bfloat16)
    with torch.no_grad():
        got = layer(h)[0]
        layer.recurrence = lambda q, k, v, gates, cu: dgps.reference(layer.op, q=q, k=k, v=v, cu_seqlens=cu,
                                                                      **gates)["o"].to(q.dtype).cuda()
        want = layer(h)[0]
    e = rel_err(got, want)
    assert e < 2e-2, f"{cls.__name__}: rel err {e:.3g}"


def _fla_layer(cls):
    import fla.layers as L
    name = {GatedDeltaNet: "GatedDeltaNet", PreconditionedGatedDeltaNet: "PrecondGatedDeltaNet",
            KDA: "KimiDeltaAttention"}.get(cls)
    if name is None:
        pytest.skip(f"flash-linear-attention has no {cls.__name__} layer")
    if not hasattr(L, name):
        pytest.skip(f"this fla has no fla.layers.{name}")
    return getattr(L, name)


@pytest.mark.skipif(not fla_available(), reason="fla (flash-linear-attention) is not importable")
@pytest.mark.parametrize("cls", [GatedDeltaNet, PreconditionedGatedDeltaNet, KDA, OSDN])
def test_layer_matches_fla_layer(cls):
    fla_cls = _fla_layer(cls)
    torch.manual_seed(6)
    theirs = fla_cls(**CONFIG, mode="chunk").cuda().bfloat16().eval()
    ours = make(cls)
    ours.load_state_dict(theirs.state_dict(), strict=True)
    h = torch.randn(2, 200, CONFIG["hidden_size"], device="cuda", dtype=torch.bfloat16)  # > 64: FLA's chunk mode
    with torch.no_grad():
        o_fla, o_dgps = theirs(h)[0], ours(h)[0]
    e = rel_err(o_dgps, o_fla)
    print(f"\n{cls.__name__} vs fla.layers.{fla_cls.__name__}: rel err {e:.2e}")
    assert e < 3e-2, f"{cls.__name__}: rel err vs FLA {e:.3g}"
