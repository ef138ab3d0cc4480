"""Layer plumbing without a GPU: the recurrence is swapped for the float64 reference, and packed varlen
calls, padding masks and plain batches must agree (short convolutions must not reach across sequence
starts). Also the parameter names FLA's layers use, and clear errors for unsupported configurations."""
import pytest
import torch

import dgps
from dgps.layers import KDA, OSDN, GatedDeltaNet, PreconditionedGatedDeltaNet

HIDDEN, HEAD, HEADS = 96, 64, 2


def with_reference(layer):
    def recurrence(q, k, v, gates, cu_seqlens):
        return dgps.reference(layer.op, q=q, k=k, v=v, cu_seqlens=cu_seqlens, **gates)["o"].to(q.dtype)
    layer.recurrence = recurrence
    return layer


@pytest.mark.parametrize("cls", [GatedDeltaNet, PreconditionedGatedDeltaNet, KDA, OSDN])
def test_varlen_and_mask_match_separate_sequences(cls):
    torch.manual_seed(0)
    layer = with_reference(cls(hidden_size=HIDDEN, head_dim=HEAD, num_heads=HEADS)).double()
    a, b = torch.randn(1, 7, HIDDEN, dtype=torch.float64), torch.randn(1, 5, HIDDEN, dtype=torch.float64)
    with torch.no_grad():
        oa, ob = layer(a)[0], layer(b)[0]
        packed = layer(torch.cat([a, b], 1), cu_seqlens=torch.tensor([0, 7, 12]))[0]
        padded = torch.zeros(2, 7, HIDDEN, dtype=torch.float64)
        padded[0], padded[1, 2:] = a[0], b[0]  # left padding, as generation batches are padded
        mask = torch.ones(2, 7, dtype=torch.long)
        mask[1, :2] = 0
        masked = layer(padded, attention_mask=mask)[0]
    assert oa.abs().max() > 0
    # Gates and norms run in float32 (as FLA's do), so agreement is to float32 rounding; a convolution
    # reaching across a sequence start would differ by O(1).
    torch.testing.assert_close(packed[:, :7], oa, rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(packed[:, 7:], ob, rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(masked[0:1], oa, rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(masked[1:2, 2:], ob, rtol=1e-5, atol=1e-7)
    assert (masked[1, :2] == 0).all()


def test_fla_parameter_names():
    keys = set(PreconditionedGatedDeltaNet(hidden_size=HIDDEN, head_dim=HEAD, num_heads=HEADS).state_dict())
    for k in ("q_proj.weight", "q_conv1d.weight", "a_proj.weight", "b_proj.weight", "A_log", "dt_bias",
              "a_atk_proj.weight", "b_atk_proj.weight", "A_log_atk", "dt_bias_atk", "log_atk_scale",
              "g_proj.weight", "o_norm.weight", "o_proj.weight"):
        assert k in keys, k
    kda = set(KDA(hidden_size=HIDDEN, head_dim=HEAD, num_heads=HEADS).state_dict())
    for k in ("f_proj.0.weight", "f_proj.1.weight", "g_proj.1.bias", "dt_bias", "A_log"):
        assert k in kda, k


def test_unsupported_head_dim_is_refused():
    with pytest.raises(ValueError, match=r"supports head_dim \(K\) in \[64, 128\]"):
        GatedDeltaNet(hidden_size=HIDDEN, head_dim=256, num_heads=HEADS)


def test_negative_eigenvalues_refused():
    with pytest.raises(ValueError, match="allow_neg_eigval"):
        GatedDeltaNet(hidden_size=HIDDEN, head_dim=HEAD, num_heads=HEADS, allow_neg_eigval=True)


def test_osdn_retention_picks_apf_spec():
    layer = OSDN(hidden_size=HIDDEN, head_dim=HEAD, num_heads=HEADS, retention=True)
    assert layer.op.name == "osdn_apf" and hasattr(layer, "a_atk_proj")


@pytest.mark.parametrize("cls", [GatedDeltaNet, KDA])
def test_context_parallel_arguments_reach_the_recurrence(cls):
    """With cp_group the layer runs its per-token parts on this rank's piece and hands cp_group, cp_bounds
    and the global cu_seqlens to the op (tests/test_cpu_context_parallel.py and the GPU test check the op)."""
    torch.manual_seed(0)
    layer = with_reference(cls(hidden_size=HIDDEN, head_dim=HEAD, num_heads=HEADS, use_short_conv=False)).double()
    reference, calls = layer.recurrence, []

    def recording(q, k, v, gates, cu_seqlens, **cp):
        calls.append((cu_seqlens, cp))
        return reference(q, k, v, gates, cu_seqlens)
    layer.recurrence = recording
    x = torch.randn(1, 6, HIDDEN, dtype=torch.float64)
    group, cu = object(), torch.tensor([0, 2, 6])
    with torch.no_grad():
        torch.testing.assert_close(layer(x, cu_seqlens=cu, cp_group=group, cp_bounds=[0, 6])[0],
                                   layer(x, cu_seqlens=cu)[0], rtol=0, atol=0)
    assert calls[0][0] is cu and calls[0][1] == dict(cp_group=group, cp_bounds=[0, 6])
    assert calls[1][1] == {}  # without cp_group the recurrence is called as before
