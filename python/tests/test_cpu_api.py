"""The Python API without a GPU: loading packages, and rejecting bad input with one clear message before
anything reaches the device (the checks CI can run). Messages come from the runtime's own validation
(Validation.h) where it applies, so they name the tensor, the expected shape or dtype, and what came."""
import os

import pytest
import torch

import dgps
from dgps._tensors import view
from dgps.reference import generate_inputs

B, T, H, K, V = 2, 12, 2, 64, 64


def bf16(*shape):
    return torch.randn(*shape).bfloat16()


def pgdn_args(**over):
    args = dict(q=bf16(B, T, H, K), k=bf16(B, T, H, K), v=bf16(B, T, H, V), g=-torch.rand(B, T, H),
                beta=torch.rand(B, T, H), precond_g=-torch.rand(B, T, H), precond_beta=torch.rand(B, T, H))
    args.update(over)
    return args


def call(op, args):
    a = dict(args)
    return op(a.pop("q"), a.pop("k"), a.pop("v"), **a)


def test_shipped_specs_load():
    names = dgps.shipped_names()
    for n in ("gdn", "kda", "pgdn", "osdn"):
        assert n in names
    pgdn = dgps.load("pgdn")
    assert pgdn.name == "pgdn" and pgdn.info["precond"] == "diagonal" and pgdn.info["decay"] == "scalar"
    assert dgps.load("kda").info["decay"] == "diagonal"
    assert "pgdn" in repr(pgdn)


def test_load_by_folder_matches_name():
    by_name = dgps.load("gdn")
    by_dir = dgps.load(by_name.package.directory)
    assert by_dir.info["spec_hash"] == by_name.info["spec_hash"]


def test_load_unknown_name_lists_shipped():
    with pytest.raises(dgps.DgpsError, match=r"'no_such_spec' is neither.*shipped: .*pgdn"):
        dgps.load("no_such_spec")


def test_load_corrupt_package_carries_runtime_message(tmp_path):
    (tmp_path / "manifest.yaml").write_text("dgps_package: [not, a, number]\n")
    with pytest.raises(dgps.DgpsError, match="manifest.yaml"):
        dgps.load(str(tmp_path))


def test_spec_file_without_dgpsc(tmp_path, monkeypatch):
    spec = tmp_path / "s.yaml"
    spec.write_text("name: s\n")
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("DGPS_DGPSC", raising=False)
    with pytest.raises(dgps.DgpsError, match="dgpsc .*not installed"):
        dgps.load(str(spec))


def test_cpu_tensors_rejected():
    op = dgps.load("pgdn")
    with pytest.raises(dgps.InvalidArgument, match=r"tensor 'q' is on cpu.*CUDA") as e:
        call(op, pgdn_args())
    assert isinstance(e.value, ValueError)


def test_wrong_gate_shape():
    op = dgps.load("pgdn")
    with pytest.raises(dgps.InvalidArgument, match=r"tensor 'g': expected shape \[B,T,HV\] = \[2, 12, 2\].*got \[2, 12, 3\]"):
        call(op, pgdn_args(g=-torch.rand(B, T, H + 1)))


def test_wrong_value_dtype():
    op = dgps.load("pgdn")
    with pytest.raises(dgps.InvalidArgument, match=r"tensor 'v': expected dtype bf16"):
        call(op, pgdn_args(v=torch.randn(B, T, H, V)))


def test_integer_gate_rejected():
    op = dgps.load("pgdn")
    with pytest.raises(dgps.InvalidArgument, match=r"tensor 'beta': dtype torch.int64; gates are accepted in"):
        call(op, pgdn_args(beta=torch.ones(B, T, H, dtype=torch.int64)))


def test_missing_gate():
    op = dgps.load("pgdn")
    args = pgdn_args()
    del args["precond_g"]
    with pytest.raises(dgps.InvalidArgument, match=r"tensor 'precond_g' is required"):
        call(op, args)


def test_gate_the_spec_does_not_take():
    op = dgps.load("gdn")
    with pytest.raises(dgps.InvalidArgument, match=r"precond_g"):
        call(op, pgdn_args())


def test_mismatched_heads():
    op = dgps.load("pgdn")
    with pytest.raises(dgps.InvalidArgument, match=r"tensor 'k'"):
        call(op, pgdn_args(k=bf16(B, T, H + 1, K)))


def test_unsupported_head_dim():
    op = dgps.load("pgdn")
    n = 32
    with pytest.raises(dgps.InvalidArgument, match=r"K"):
        call(op, pgdn_args(q=bf16(B, T, H, n), k=bf16(B, T, H, n)))


def test_scale_conflict_with_in_kernel_norm():
    op = dgps.load("pgdn")
    with pytest.raises(dgps.InvalidArgument, match="fixes the query scale"):
        call(op, pgdn_args(scale=0.5))


def test_cu_seqlens_dtype():
    op = dgps.load("pgdn")
    with pytest.raises(dgps.InvalidArgument, match=r"cu_seqlens.*int64"):
        call(op, pgdn_args(cu_seqlens=torch.tensor([0.0, 12.0])))


def decode_args(T_new=1, P=5, **over):
    args = dict(q=bf16(B, T_new, H, K), k=bf16(B, T_new, H, K), v=bf16(B, T_new, H, V), g=-torch.rand(B, T_new, H),
                beta=torch.rand(B, T_new, H), precond_g=-torch.rand(B, T_new, H),
                precond_beta=torch.rand(B, T_new, H), state_pool=torch.zeros(P, H, K, V),
                precond_state_pool=torch.zeros(P, H, K), state_indices=torch.tensor([3, -1]))
    args.update(over)
    return args


def decode(op, args):
    a = dict(args)
    return op.decode(a.pop("q"), a.pop("k"), a.pop("v"), **a)


def test_decode_cpu_rejected():
    with pytest.raises(dgps.InvalidArgument, match=r"decode: tensor 'q' is on cpu"):
        decode(dgps.load("pgdn"), decode_args())


@pytest.mark.parametrize("T_new", [0, 9])
def test_decode_token_count(T_new):
    with pytest.raises(dgps.InvalidArgument, match=r"1 <= T <= 8"):
        decode(dgps.load("pgdn"), decode_args(T_new=T_new))


def test_decode_needs_precond_pool():
    with pytest.raises(dgps.InvalidArgument, match="precond_state_pool .* is required"):
        decode(dgps.load("pgdn"), decode_args(precond_state_pool=None))


def test_decode_state_indices_shape():
    with pytest.raises(dgps.InvalidArgument, match=r"state_indices: expected shape \[B\] = \[2\]"):
        decode(dgps.load("pgdn"), decode_args(state_indices=torch.tensor([0, 1, 2])))


def test_decode_state_indices_dtype():
    with pytest.raises(dgps.InvalidArgument, match=r"state_indices.*int64"):
        decode(dgps.load("pgdn"), decode_args(state_indices=torch.tensor([0.0, 1.0])))


def test_decode_pool_dtype():
    with pytest.raises(dgps.InvalidArgument, match="state_pool must be a contiguous float32"):
        decode(dgps.load("pgdn"), decode_args(state_pool=torch.zeros(5, H, K, V, dtype=torch.bfloat16)))


def test_decode_wrong_state_shape_named_by_runtime():
    with pytest.raises(dgps.InvalidArgument, match=r"tensor 'state'"):
        decode(dgps.load("pgdn"), decode_args(state_pool=torch.zeros(5, H, K, V + 64)))


def test_cuda_array_interface_view():
    class Fake:
        __cuda_array_interface__ = {"data": (4096, False), "typestr": "<f4", "shape": (3, 4), "strides": None,
                                    "version": 3}
    assert view(Fake()) == (4096, "f32", (3, 4), 0)


def naive_gdn(q, k, v, g, beta, h0, scale):
    """An independent float64 Gated DeltaNet (FLA orientation, in-kernel l2norm) for the reference check."""
    q, k, v, g, beta, h0 = (x.double() for x in (q, k, v, g, beta, h0))
    q = q / torch.sqrt((q * q).sum(-1, keepdim=True) + 1e-6) * scale
    k = k / torch.sqrt((k * k).sum(-1, keepdim=True) + 1e-6)
    Bn, Tn, Hn, _ = q.shape
    S = h0.clone()
    o = torch.zeros(Bn, Tn, Hn, v.shape[-1], dtype=torch.float64)
    for t in range(Tn):
        S = S * g[:, t].exp()[..., None, None]
        e = beta[:, t][..., None] * (v[:, t] - torch.einsum("bhkv,bhk->bhv", S, k[:, t]))
        S = S + torch.einsum("bhk,bhv->bhkv", k[:, t], e)
        o[:, t] = torch.einsum("bhkv,bhk->bhv", S, q[:, t])
    return o, S


def test_reference_matches_independent_gdn():
    op = dgps.load("gdn")
    x = generate_inputs(op, 2, 9, 2, 64, 64, seed=7)
    ref = dgps.reference(op, **x)
    o, S = naive_gdn(x["q"], x["k"], x["v"], x["g"], x["beta"], x["initial_state"], 64 ** -0.5)
    assert ref["o"].dtype == torch.float64 and ref["o"].abs().max() > 0
    assert torch.allclose(ref["o"], o, rtol=1e-9, atol=1e-12)
    assert torch.allclose(ref["final_state"], S, rtol=1e-9, atol=1e-12)


def test_reference_rejects_positive_log_decay():
    op = dgps.load("gdn")
    x = generate_inputs(op, 1, 4, 2, 64, 64, seed=1)
    x["g"] = x["g"].abs() + 0.1
    with pytest.raises(dgps.InvalidArgument, match="'g'"):
        dgps.reference(op, **x)


def test_spec_file_compiled_on_the_fly():
    from dgps._paths import find_tool
    if find_tool("dgpsc", "DGPS_DGPSC") is None:
        pytest.skip("dgpsc is not built here (DGPS_DGPSC unset and no dgpsc on PATH)")
    shipped = dgps.load("gdn")
    spec = os.path.join(os.path.dirname(os.path.dirname(shipped.package.directory)), "specs", "gdn.yaml")
    if not os.path.isfile(spec):
        spec = os.path.join(os.path.dirname(dgps.__file__), "_data", "specs", "gdn.yaml")
    op = dgps.load(spec)
    assert op.package.directory != shipped.package.directory
    assert op.info["spec_hash"] == shipped.info["spec_hash"]


def test_spec_file_with_errors_reports_dgpsc_message(tmp_path):
    from dgps._paths import find_tool
    if find_tool("dgpsc", "DGPS_DGPSC") is None:
        pytest.skip("dgpsc is not built here (DGPS_DGPSC unset and no dgpsc on PATH)")
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\ndecay:\n  kind: sideways\n")
    with pytest.raises(dgps.DgpsError, match="dgpsc compile .*bad.yaml failed"):
        dgps.load(str(bad))


def test_tune_rejects_unsupported_shape_before_any_trial():
    with pytest.raises(dgps.InvalidArgument, match=r"does not fit package gdn.*supports K in \[64, 128\], got K = 32"):
        dgps.tune("gdn", B=1, T=64, H=2, K=32, V=64)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error on a machine without a GPU")
def test_tune_without_gpu_says_so():
    with pytest.raises(dgps.DgpsError, match="no GPU to tune on"):
        dgps.tune("gdn", B=1, T=64, H=2, K=64, V=64)
