"""Context parallelism on one GPU (docs/context_parallel.md): G in {2, 4} processes spawned with
torch.multiprocessing, each a rank of one gloo group on cuda:0 holding its contiguous piece of the tokens
(cp_workers.gpu_worker), run every package info["context_parallel"] accepts through op(..., cp_group=...)
(the ema_sq_squash ones, pgdn, pkda, pdn and atq, and the hypergrad_ogd ones, osdn and osdn_apf, through the
preconditioner round, with drawn initial accumulators or d). Their pieces of o, put together, and their final
states (and final preconditioner states), summed over the ranks, must equal the single-call forward of the
whole batch on the same GPU and the float64 reference: a packed batch (documents crossing piece boundaries, an
empty document, padding rows), one sequence crossing every boundary, and an uneven split (an empty rank and a one-token rank), all from drawn initial states. Each
rank's outputs start poisoned (NaN); rows of final_state a rank does not own must be exactly zero. With two
GPUs or more, the same with an NCCL group, one rank per GPU (skipped, saying so, on one GPU). Also the layers
GatedDeltaNet, KDA and PreconditionedGatedDeltaNet (short convolutions on) on the ranks' pieces of one packed
batch against the layer on the whole batch."""
import os

import pytest
import torch

import dgps
from dgps._native import native
from helpers import TOL_OUT, TOL_STATE, rel_err, requires_cuda

pytestmark = [pytest.mark.gpu, requires_cuda]

TOL_SINGLE = 1e-2  # vs the single-call forward: pieces start at other chunk offsets (bf16 operands)


def single_call(op, x, cu):
    """The whole batch in one call on the GPU, outputs poisoned first."""
    dev = {n: t.cuda() for n, t in x.items()}
    q, k, v = dev.pop("q"), dev.pop("k"), dev.pop("v")
    blocks = [torch.full(tuple(v.shape), float("nan"), device="cuda"),
              torch.full(tuple(dev["initial_state"].shape), float("nan"), device="cuda")]
    del blocks
    cu_t = None if cu is None else torch.tensor(cu, dtype=torch.int64, device="cuda")
    dev.pop("cu_seqlens", None)
    o, fs, fps = op(q, k, v, cu_seqlens=cu_t, output_final_state=True, **dev)
    return o.cpu(), fs.cpu(), None if fps is None else fps.cpu()


def run_ranks(tmp_path, G, backend):
    import torch.distributed as dist
    import torch.multiprocessing as mp
    available = {"gloo": dist.is_available() and dist.is_gloo_available(),
                 "nccl": dist.is_available() and dist.is_nccl_available()}
    if not available[backend]:
        pytest.skip(f"torch.distributed with {backend} is not available in this torch build")
    import cp_workers
    cases = cp_workers.gpu_cases(G)
    assert cases, "no shipped package has segment kernels"
    assert {"pgdn", "pkda", "osdn", "osdn_apf"} <= {c[0] for c in cases}, \
        "the preconditioned packages (ema_sq_squash and hypergrad_ogd) run context-parallel too"
    # the parent compiles each package's variant first (the ranks pin the same configuration and load it
    # from the disk cache instead of compiling it G times at once)
    singles = []
    for i, (name, T, cu, _) in enumerate(cases):
        op = dgps.load(name, config=dgps.load(name).info["default_config"])
        x = cp_workers.case_inputs(op, T, cu, seed=100 + i)
        singles.append((op, x, single_call(op, x, cu)))
    torch.cuda.synchronize()
    layers = []
    for name in cp_workers.GPU_LAYERS:
        layer, h = cp_workers.gpu_layer(name, "cuda")
        with torch.no_grad():
            layers.append(layer(h, cu_seqlens=torch.tensor(cp_workers.GPU_LAYER_CU, device="cuda"))[0].cpu())
    torch.cuda.synchronize()
    mp.spawn(cp_workers.gpu_worker, args=(G, str(tmp_path / "store"), str(tmp_path), backend), nprocs=G)
    check_ranks(tmp_path, G, cases, singles)
    for name, whole in zip(cp_workers.GPU_LAYERS, layers):
        got = torch.cat([torch.load(os.path.join(tmp_path, f"layer_{name}_rank{r}.pt")) for r in range(G)], dim=1)
        assert got.shape == whole.shape
        e = rel_err(got, whole)
        assert e <= TOL_SINGLE, f"layer {name} G={G}: pieces vs the whole batch rel err {e:.3g}"


@pytest.mark.parametrize("G", [2, 4])
def test_gloo_ranks_on_one_gpu_match_single_call_and_float64(tmp_path, G):
    run_ranks(tmp_path, G, "gloo")


def test_nccl_ranks_match_single_call_and_float64(tmp_path):
    """One rank per GPU, gathering on the device (all_gather_into_tensor); needs two GPUs or more."""
    G = torch.cuda.device_count()
    if G < 2:
        pytest.skip(f"NCCL ranks need 2 GPUs or more; torch sees {G}")
    run_ranks(tmp_path, min(G, 4), "nccl")


def check_ranks(tmp_path, G, cases, singles):
    for i, ((name, T, cu, bounds), (op, x, (o1, fs1, fps1))) in enumerate(zip(cases, singles)):
        what = f"{name} G={G} T={T} cu={cu} bounds={bounds}"
        b = bounds or native.cp_equal_bounds(T, G)
        plan = native.CpPlan(cu if cu is not None else [0, T], b)
        ranks = [torch.load(os.path.join(tmp_path, f"case{i}_rank{r}.pt")) for r in range(G)]
        o = torch.cat([rk["o"] for rk in ranks], dim=1)
        assert o.shape == o1.shape, what
        assert torch.isfinite(o.float()).all(), f"{what}: o has non-finite rows (poison left unwritten)"
        if cu is not None:
            assert (o[:, cu[-1]:] == 0).all(), f"{what}: padding rows of o are not zero"
        e = rel_err(o, o1)
        assert e <= TOL_SINGLE, f"{what}: o vs single call rel err {e:.3g}"
        fs = torch.zeros_like(ranks[0]["final_state"])
        for r, rk in enumerate(ranks):
            owned = torch.tensor([plan.final_state_rank[n] == r for n in range(plan.num_docs)])
            assert (rk["final_state"][~owned] == 0).all(), f"{what}: rank {r} wrote rows it does not own"
            fs += rk["final_state"]
        e = rel_err(fs, fs1)
        assert e <= TOL_SINGLE, f"{what}: final_state vs single call rel err {e:.3g}"
        ref = dgps.reference(op, **x)
        e = rel_err(o, ref["o"])
        assert e <= TOL_OUT, f"{what}: o vs float64 rel err {e:.3g}"
        e = rel_err(fs, ref["final_state"])
        assert e <= TOL_STATE, f"{what}: final_state vs float64 rel err {e:.3g}"
        if fps1 is None:
            assert all(rk["final_precond_state"] is None for rk in ranks), what
            continue
        fps = torch.zeros_like(ranks[0]["final_precond_state"])
        for r, rk in enumerate(ranks):
            owned = torch.tensor([plan.final_state_rank[n] == r for n in range(plan.num_docs)])
            assert (rk["final_precond_state"][~owned] == 0).all(), \
                f"{what}: rank {r} wrote accumulators it does not own"
            fps += rk["final_precond_state"]
        e = rel_err(fps, fps1)
        assert e <= TOL_SINGLE, f"{what}: final_precond_state vs single call rel err {e:.3g}"
        e = rel_err(fps, ref["final_precond_state"])
        assert e <= TOL_STATE, f"{what}: final_precond_state vs float64 rel err {e:.3g}"
