"""The views the operators hand to the runtime, checked on the CPU: a recording runtime runs the real
runtime's validation (Validation.h, which reads only shapes, dtypes, pointers) and workspace sizing on
every launch the forward and decode would make, for every shipped spec. This is the host half of a launch;
the GPU tests run the whole of it."""
import pytest
import torch

import dgps
from dgps import _ops
from dgps._native import native
from dgps._tensors import DECODE_SLOTS, FORWARD_SLOTS
from dgps.reference import generate_inputs


class RecordingRuntime:
    def __init__(self):
        self.real = native.Runtime(tune_mode="default")
        self.launches = []

    def forward(self, package, views, stream, config):
        self.real.validate_forward(package, views)
        self.launches.append(("forward", dict(zip(FORWARD_SLOTS, views))))

    def decode(self, package, views, stream):
        self.real.validate_decode(package, views)
        self.launches.append(("decode", dict(zip(DECODE_SLOTS, views))))

    def forward_workspace_bytes(self, package, views, config):
        return self.real.forward_workspace_bytes(package, views, config)


@pytest.fixture
def recording(monkeypatch):
    monkeypatch.setattr(_ops, "current_stream", lambda device: 0)
    monkeypatch.setattr(dgps.Op, "_check_device", lambda *a, **kw: None)
    return RecordingRuntime()


def load(name, runtime):
    return dgps.Op(dgps.load(name).package.directory, runtime=runtime)


@pytest.mark.parametrize("name", [n for n in dgps.shipped_names() if dgps.load(n).info["has_forward"]])
@pytest.mark.parametrize("varlen", [False, True])
def test_forward_views_pass_validation(recording, name, varlen):
    op = load(name, recording)
    if varlen and not op.info["varlen"]:
        pytest.skip(f"{name} takes no cu_seqlens")
    K = [d for d in (64, 128, 120) if d in op.info["key_dims"] and d in op.info["value_dims"]][0]
    H = op.info["heads_qk"] or 2
    cu = [0, 5, 17] if varlen else None
    x = generate_inputs(op, 1 if varlen else 2, 17, H, K, K, seed=1, cu_seqlens=cu)
    q, k, v = x.pop("q"), x.pop("k"), x.pop("v")
    o, fs, fps = op(q, k, v, output_final_state=True, **x)
    kind, views = recording.launches[-1]
    # o has one row per token (q's rows; v has T*n_h rows when a token takes several Householder steps)
    assert kind == "forward" and views["o"][0] == o.data_ptr() and views["o"][2] == (q.shape[0], q.shape[1], v.shape[2], K)
    N = 2
    if op.info["final_state"]:
        assert fs.shape == (N, v.shape[2], K, K) and views["final_state"][0] == fs.data_ptr()
    else:
        assert fs is None
    if op.info["final_precond_state"] and op.info["precond"] != "none":
        assert fps.shape == (N, H, K)
    else:
        assert fps is None
    need = recording.forward_workspace_bytes(op.package, [views[s] for s in FORWARD_SLOTS[:-1]] + [None], None)
    assert (views["workspace"] is not None) == (need > 0)
    if need:
        assert views["workspace"][1] == "i64" and views["workspace"][2][0] * 8 >= need
        assert views["workspace"][0] % 256 == 0


@pytest.mark.parametrize("name", [n for n in dgps.shipped_names() if dgps.load(n).info["has_decode"]])
@pytest.mark.parametrize("T", [1, 3])
def test_decode_views_pass_validation(recording, name, T):
    op = load(name, recording)
    K = [d for d in (64, 128, 120) if d in op.info["key_dims"] and d in op.info["value_dims"]][0]
    H = op.info["heads_qk"] or 2
    x = generate_inputs(op, 2, T, H, K, K, seed=2, initial_state=False)
    q, k, v = x.pop("q"), x.pop("k"), x.pop("v")
    HV = v.shape[2]
    pool = torch.zeros(4, HV, K, K)
    ppool = torch.zeros(4, H, K) if op.info["precond"] != "none" else None
    o = op.decode(q, k, v, **x, state_pool=pool, precond_state_pool=ppool, state_indices=torch.tensor([2, -1]))
    assert o.shape == (2, T, HV, K)
    launches = [l for l in recording.launches if l[0] == "decode"]
    assert len(launches) == T  # one single-token step per new token
    n = op.info["steps"]  # k, v and beta carry n rows per token (several Householder steps per token)
    for _, views in launches:
        assert views["q"][2] == (2, 1, H, K) and views["state"][2] == (2, HV, K, K)
        assert views["k"][2] == (2, n, H, K) and views["v"][2] == (2, n, HV, K)


def test_decode_refuses_per_token_keys_for_several_steps(recording):
    """Gated DeltaProduct's k, v, beta carry 2 rows per token; one row per token is one error before any launch."""
    op = load("gated_deltaproduct", recording)
    x = generate_inputs(op, 2, 2, 2, 64, 64, seed=4, initial_state=False)
    q, k, v = x.pop("q"), x.pop("k"), x.pop("v")
    pool = torch.zeros(2, v.shape[2], 64, 64)
    with pytest.raises(dgps.InvalidArgument, match="tensor 'k': expected 4 rows in dim 1 \\(2 tokens x 2 Householder"):
        op.decode(q, k[:, :2], v, **x, state_pool=pool)
    assert recording.launches == [] and not pool.any()


def test_forward_conversions(recording):
    """Strided q is copied, bf16 gates become f32, the default centre is filled in, contiguous f32 inputs
    cross without a copy, and no final state is made unless asked for."""
    op = load("pgdn", recording)
    x = generate_inputs(op, 2, 9, 2, 64, 64, seed=3, initial_state=False)
    q = x.pop("q").transpose(1, 2).contiguous().transpose(1, 2)
    k, v = x.pop("k"), x.pop("v")
    center = x.pop("precond_center")
    g16 = x["g"].bfloat16()
    o, fs, fps = op(q, k, v, g=g16, beta=x["beta"], precond_g=x["precond_g"], precond_beta=x["precond_beta"])
    _, views = recording.launches[-1]
    assert fs is None and fps is None and views["final_state"] is None and views["final_precond_state"] is None
    assert views["q"][0] != q.data_ptr() and views["k"][0] == k.data_ptr()
    assert views["g"][1] == "f32" and views["beta"][0] == x["beta"].data_ptr()
    assert views["precond_center"][2] == (2,) and center.shape == (2,)


def test_decode_without_indices_updates_pool_in_place(recording):
    op = load("gdn", recording)
    x = generate_inputs(op, 3, 1, 2, 64, 64, seed=4, initial_state=False)
    q, k, v = x.pop("q"), x.pop("k"), x.pop("v")
    pool = torch.zeros(3, 2, 64, 64)
    op.decode(q, k, v, **x, state_pool=pool)
    _, views = recording.launches[-1]
    assert views["state"][0] == pool.data_ptr() and views["precond_state"] is None


def test_backward_names_the_spec(recording):
    op = load("pgdn", recording)
    x = generate_inputs(op, 1, 5, 2, 64, 64, seed=5)
    q = x.pop("q").requires_grad_(True)
    o = op(q, x.pop("k"), x.pop("v"), **x)[0]
    assert o.requires_grad
    with pytest.raises(RuntimeError, match="dgps: no backward pass for spec 'pgdn' yet"):
        o.float().sum().backward()


def test_context_parallel_refusals_launch_nothing(recording):
    """A context-parallel call the op refuses (not a process group; a package without segment kernels)
    launches nothing, and the single-device path is unchanged (tests/test_cpu_context_parallel.py covers
    the context-parallel plumbing)."""
    op = load("gdn", recording)
    x = generate_inputs(op, 1, 9, 2, 64, 64, seed=3)
    q, k, v = x.pop("q"), x.pop("k"), x.pop("v")
    with pytest.raises(TypeError, match="cp_group must be a torch.distributed ProcessGroup"):
        op(q, k, v, cp_group=object(), **x)
    dp = load("gated_deltaproduct", recording)
    y = generate_inputs(dp, 1, 9, 2, 64, 64, seed=3)
    with pytest.raises(dgps.InvalidArgument, match="cannot run context-parallel: it runs 2 Householder steps"):
        dp(y.pop("q"), y.pop("k"), y.pop("v"), cp_group=object(), **y)
    assert recording.launches == []
    op(q, k, v, cp_group=None, **x)
    assert len(recording.launches) == 1
