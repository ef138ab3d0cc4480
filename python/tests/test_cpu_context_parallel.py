"""Context parallelism without a GPU (docs/context_parallel.md): the bound plan against an independent
enumeration of the pieces, the binding's argument checks, the op's refusals, and two ranks exchanging over
a real gloo group with the runtime's phases stood in for (cp_workers.SlotRuntime): the header exchange,
the slots' all-gather through host copies, and every rank raising together on a rank's bad arguments."""
import os
import random

import pytest
import torch

import dgps
from dgps._native import native
from dgps._tensors import FORWARD_SLOTS, view
from dgps.reference import generate_inputs


# ----------------------------------------------------------------------------------------- the plan
def naive_plan(cu, bounds):
    """Per rank (fragments, local_cu, continues_in, continues_out, fold_from) and per document the rank
    writing its final state, by walking every token: an independent statement of the plan's contract."""
    G, N = len(bounds) - 1, len(cu) - 1
    doc_of = {}
    for n in range(N):
        for t in range(cu[n], cu[n + 1]):
            doc_of[t] = n
    ranks = []
    for r in range(G):
        frags = []
        for t in range(bounds[r], bounds[r + 1]):
            n = doc_of.get(t)
            if n is None:
                continue
            if frags and frags[-1][0] == n:
                frags[-1][2] = t + 1
            else:
                frags.append([n, t, t + 1])
        local = [0]
        for _, b, e in frags:
            local.append(local[-1] + e - b)
        cont_in = bool(frags) and frags[0][1] > cu[frags[0][0]]
        cont_out = bool(frags) and frags[-1][2] < cu[frags[-1][0] + 1]
        ranks.append(dict(fragments=[tuple(f) for f in frags], local_cu_seqlens=local, continues_in=cont_in,
                          continues_out=cont_out))
    for r, rp in enumerate(ranks):
        first = rp["fragments"][0][0] if rp["continues_in"] else None
        holds_first = [any(f[0] == first for f in ranks[j]["fragments"]) for j in range(r)]
        rp["fold_from"] = [j for j in range(r) if first is not None and holds_first[j]]
    final = []
    for n in range(N):
        if cu[n] < cu[n + 1]:
            final.append(next(r for r in range(G) if bounds[r] <= cu[n + 1] - 1 < bounds[r + 1]))
        else:  # an empty document: the rank whose non-empty range holds token cu[n], else the last
            final.append(next((r for r in range(G) if bounds[r] <= cu[n] < bounds[r + 1]), G - 1))
    return ranks, final


def random_batch(rng):
    T = rng.randint(1, 60)
    N = rng.randint(1, 6)
    cuts = sorted(rng.randint(0, T) for _ in range(N))  # may repeat (empty documents) and stop short (padding)
    cu = [0] + cuts
    G = rng.randint(1, 6)
    inner = sorted(rng.randint(0, T) for _ in range(G - 1))  # uneven, possibly empty ranks
    return T, cu, [0] + inner + [T]


def test_plan_matches_token_enumeration():
    rng = random.Random(20261202)
    for _ in range(300):
        T, cu, bounds = random_batch(rng)
        plan = native.CpPlan(cu, bounds)
        ranks, final = naive_plan(cu, bounds)
        assert (plan.ranks, plan.num_docs, plan.tokens, plan.cu_seqlens) == (len(bounds) - 1, len(cu) - 1, T, cu)
        assert plan.final_state_rank == final, (cu, bounds)
        for r, want in enumerate(ranks):
            got = plan.rank(r)
            assert (got["begin"], got["end"]) == (bounds[r], bounds[r + 1])
            for key in ("fragments", "local_cu_seqlens", "continues_in", "continues_out", "fold_from"):
                assert got[key] == want[key], (key, r, cu, bounds)


def test_equal_bounds_and_slot_size():
    assert dgps.cp_equal_bounds(10, 4) == [0, 3, 6, 9, 10]
    assert native.cp_equal_bounds(8, 4) == [0, 2, 4, 6, 8]
    rng = random.Random(3)
    for _ in range(20):
        HV, K, V = rng.randint(1, 8), rng.randint(1, 130), rng.randint(1, 130)
        assert native.cp_slot_elements(rng.randint(1, 9), HV, K, V) == HV * K * K + HV * K * V  # M then E


@pytest.mark.parametrize("cu,bounds,what", [
    ([0, 5, 30], [0, 10, 20], "cu_seqlens"),       # past T
    ([0, 7, 5], [0, 10], "cu_seqlens"),            # decreasing
    ([0, 5], [0, 7, 3, 10], "rank"),               # decreasing bounds
    ([1, 5], [0, 10], "cu_seqlens"),               # not from 0
])
def test_malformed_plan_is_one_clear_error(cu, bounds, what):
    with pytest.raises(dgps.InvalidArgument, match=f"CpPlan: .*{what}"):
        native.CpPlan(cu, bounds)


def test_bad_group_size_is_refused():
    with pytest.raises(dgps.InvalidArgument, match="cp_equal_bounds"):
        native.cp_equal_bounds(10, 0)
    with pytest.raises(dgps.InvalidArgument, match=r"CpPlan.rank: rank 2 outside \[0, G = 2\)"):
        native.CpPlan([0, 10], [0, 5, 10]).rank(2)


# ----------------------------------------------------------------------------------------- binding checks
def piece_views(op, plan, rank, x, bounds):
    """The forward slots of `rank`'s piece (host tensors: the checks below fail before any launch)."""
    b, e = bounds[rank], bounds[rank + 1]
    mine = plan.rank(rank)
    n = len(mine["fragments"])
    HV, K, V = x["v"].shape[2], x["k"].shape[3], x["v"].shape[3]
    t = {name: x[name][:, b:e].contiguous() for name in ("q", "k", "v", "g", "beta")}
    t["cu_seqlens"] = torch.tensor(mine["local_cu_seqlens"], dtype=torch.int64)
    t["initial_state"] = torch.zeros(n, HV, K, V)
    t["o"] = torch.empty(1, e - b, HV, V, dtype=x["q"].dtype)
    return [view(t.get(s)) for s in FORWARD_SLOTS], (HV, K, V)


def test_binding_names_bad_buffers_and_pieces():
    op = dgps.load("gdn")
    rt = native.Runtime(tune_mode="default")
    cu, bounds = [0, 5, 17, 20], [0, 12, 24]
    x = generate_inputs(op, 1, 24, 2, 64, 64, seed=9, cu_seqlens=cu)
    plan = native.CpPlan(cu, bounds)
    vs, (HV, K, V) = piece_views(op, plan, 0, x, bounds)
    S = native.cp_slot_elements(plan.num_docs, HV, K, V)
    with pytest.raises(dgps.InvalidArgument, match=r"cp_publish \(rank 0\): 'send' has shape \[10\], expected "
                                                   rf"\[{S}\]"):
        rt.cp_publish(op.package, plan, 0, vs, view(torch.empty(10)), 0)
    with pytest.raises(dgps.InvalidArgument, match=r"cp_publish \(rank 0\): 'send' has dtype f64, expected f32"):
        rt.cp_publish(op.package, plan, 0, vs, view(torch.empty(S, dtype=torch.float64)), 0)
    with pytest.raises(dgps.InvalidArgument, match=r"cp_run \(rank 0\): 'gathered' has shape \[1, \d+\], expected "
                                                   rf"\[2, {S}\]"):
        rt.cp_run(op.package, plan, 0, vs, view(torch.empty(1, S)), None, None, None, None, 0)
    # rank 1's piece handed in as rank 0's: the runtime's piece check names the token count
    vs1, _ = piece_views(op, plan, 1, x, [0, 11, 24])
    with pytest.raises(dgps.InvalidArgument, match=r"publishPieceSummary \(rank 0\): piece 'v' has shape "
                                                   r"\[1, 13, 2, 64\], expected B = 1 and T = 12"):
        rt.cp_publish(op.package, plan, 0, vs1, view(torch.empty(S)), 0)
    with pytest.raises(dgps.InvalidArgument, match=r"\(rank 5\): rank outside \[0, G = 2\)"):
        rt.cp_publish(op.package, plan, 5, vs, view(torch.empty(S)), 0)
    # a hypergrad_ogd package runs the preconditioner round (the one rule): its phase 1 needs the folded d's scratch
    osdn = dgps.load("osdn")
    with pytest.raises(dgps.InvalidArgument, match=r"publishPieceSummary \(rank 0\): PiecePrecond 'local_initial' "
                                                   "is not given"):
        rt.cp_publish(osdn.package, plan, 0, vs, view(torch.empty(S)), 0)
    # phase 0 is for a package with the preconditioner round only; that round's phase 1 needs its accumulators
    P = native.cp_precond_slot_elements(2, 64, False)
    assert P == 2 * 2 * 64  # Γ then Σ, [H, K] each
    assert native.cp_precond_slot_elements(2, 64, True) == 2 * 64 * (64 + 1)  # M [H, K, K] then e [H, K]
    with pytest.raises(dgps.InvalidArgument, match=r"publishPiecePrecondSummary \(rank 0\): package gdn has no "
                                                   "preconditioner state"):
        rt.cp_publish_precond(op.package, plan, 0, vs, view(torch.empty(P)), 0)
    pgdn = dgps.load("pgdn")
    with pytest.raises(dgps.InvalidArgument, match=r"cp_publish_precond \(rank 0\): 'send' has shape \[10\], "
                                                   rf"expected \[{P}\]"):
        rt.cp_publish_precond(pgdn.package, plan, 0, vs, view(torch.empty(10)), 0)
    with pytest.raises(dgps.InvalidArgument, match=r"publishPieceSummary \(rank 0\): PiecePrecond 'local_initial' "
                                                   "is not given"):
        rt.cp_publish(pgdn.package, plan, 0, vs, view(torch.empty(S)), 0)


def test_workspace_covers_both_phases():
    op = dgps.load("gdn")
    rt = native.Runtime(tune_mode="default")
    cu, bounds = [0, 5, 17, 20], [0, 12, 24]
    x = generate_inputs(op, 1, 24, 2, 64, 64, seed=9, cu_seqlens=cu)
    plan = native.CpPlan(cu, bounds)
    for rank in (0, 1):
        vs, _ = piece_views(op, plan, rank, x, bounds)
        got = rt.cp_workspace_bytes(op.package, plan, rank, vs)
        assert got >= rt.forward_workspace_bytes(op.package, vs)  # phase 2 is this forward
    # a rank holding only padding runs no kernel and needs no scratch
    plan = native.CpPlan([0, 10], [0, 10, 24])
    vs, _ = piece_views(op, plan, 1, x, [0, 10, 24])
    assert rt.cp_workspace_bytes(op.package, plan, 1, vs) == 0


# ----------------------------------------------------------------------------------------- the op's refusals
def small_inputs(name):
    op = dgps.load(name)
    x = generate_inputs(op, 1, 12, 2, 64, 64, seed=4)
    return op, x


def test_op_refuses_what_it_cannot_split():
    op, x = small_inputs("gdn")
    q, k, v = x.pop("q"), x.pop("k"), x.pop("v")
    with pytest.raises(TypeError, match="cp_group must be a torch.distributed ProcessGroup"):
        op(q, k, v, cp_group=object(), **x)
    with pytest.raises(dgps.InvalidArgument, match="cp_bounds is given without cp_group"):
        op(q, k, v, cp_bounds=[0, 6, 12], **x)
    dp, y = small_inputs("gated_deltaproduct")
    with pytest.raises(dgps.InvalidArgument,
                       match="package 'gated_deltaproduct' cannot run context-parallel: it runs 2 Householder steps"):
        dp(y.pop("q"), y.pop("k"), y.pop("v"), cp_group=object(), **y)
    with pytest.raises(dgps.InvalidArgument, match="spec 'gdn' has no preconditioner state"):
        op(q, k, v, cp_group=object(), initial_precond_state=torch.zeros(1, 2, 64), **x)


def test_shipped_segment_packages():
    """The runtime's one rule (contextParallelSupport) as info["context_parallel"]: segment kernels, and no
    preconditioner, an ema_sq_squash one or an unclamped hypergrad_ogd one (folded in the preconditioner round
    first: per channel, or K×K per key head)."""
    info = {n: dgps.load(n).info for n in dgps.shipped_names()}
    have = {n for n, i in info.items() if i["context_parallel"]}
    assert {"gdn", "deltanet", "kda", "mamba2", "linear_attention", "pgdn", "pkda", "pdn", "atq", "osdn",
            "osdn_apf"} <= have
    assert "gated_deltaproduct" not in have
    precond = {"pgdn", "pkda", "pdn", "atq", "osdn", "osdn_apf"}
    assert {n for n in have if info[n]["context_parallel_precond"]} == precond
    # the unclamped hypergrad_ogd packages carry d by its K×K map, the ema_sq_squash ones per channel
    assert {n for n in have if info[n]["context_parallel_precond_full_map"]} == {"osdn", "osdn_apf"}
    assert all(info[n]["context_parallel_reason"] == "" for n in have)
    # Gated DeltaProduct has segment kernels (over its step rows) but no context-parallel piece bookkeeping
    assert info["gated_deltaproduct"]["segment_kernels"]
    assert "2 Householder steps per token" in info["gated_deltaproduct"]["context_parallel_reason"]


def test_offsets_must_be_integers():
    from dgps._context_parallel import host_ints, rank_bounds
    assert host_ints(torch.tensor([0, 3, 9], dtype=torch.int32), "cu_seqlens", "offsets") == [0, 3, 9]
    assert host_ints((0, 3), "cu_seqlens", "offsets") == [0, 3]
    with pytest.raises(TypeError, match=r"cp_bounds: expected integers \(G\+1 token offsets\), got \[0, 2.5, 5\]"):
        rank_bounds([0, 2.5, 5], 2, 0, 2, None)
    with pytest.raises(TypeError, match="cu_seqlens: expected integers"):
        host_ints([0, True], "cu_seqlens", "offsets")
    with pytest.raises(dgps.InvalidArgument, match="cu_seqlens: expected a 1-D int64 .or int32. tensor"):
        host_ints(torch.tensor([0.0, 3.0]), "cu_seqlens", "offsets")


def test_layer_refuses_masks():
    from dgps.layers import GatedDeltaNet
    layer = GatedDeltaNet(hidden_size=64, head_dim=64, num_heads=1, expand_v=1)
    x = torch.randn(1, 8, 64)
    with pytest.raises(ValueError, match="cp_group with an attention_mask"):
        layer(x, attention_mask=torch.ones(1, 8), cp_group=object())
    with pytest.raises(ValueError, match="cp_bounds is given without cp_group"):
        layer(x, cp_bounds=[0, 8])


# ----------------------------------------------------------------------------------------- two gloo ranks
def test_ranks_exchange_over_gloo(tmp_path):
    import torch.distributed as dist
    import torch.multiprocessing as mp
    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("torch.distributed with gloo is not available in this torch build")
    import cp_workers
    G = 2
    mp.spawn(cp_workers.cpu_plumbing_worker, args=(G, str(tmp_path / "store"), str(tmp_path)), nprocs=G)
    res = [torch.load(os.path.join(tmp_path, f"rank{r}.pt")) for r in range(G)]
    for r in range(G):
        assert "crash" not in res[r], res[r].get("crash")
        kind, msg = res[r]["device"]
        assert kind == "InvalidArgument" and f"rank {r}): tensor 'q' is on cpu" in msg, msg
        assert res[r]["bounds_length"][0] == "InvalidArgument"
        assert "cp_bounds has 4 entries, but cp_group has G = 2 ranks" in res[r]["bounds_length"][1]
        for name in ("ok", "ok_tensor_cu", "after_errors"):
            kind, got = res[r][name]
            assert kind == "ok", (name, got)
            assert got["o"] == [1, 12, 2, 64] and got["fs"] == [3, 2, 64, 64] and got["fs_zero"]
    # T = 24 over [0, 12, 24] with documents [0, 5), [5, 17), [17, 20): rank 0 publishes document 1's
    # summary, rank 1 folds it in; each rank's local batch is its fragments
    plan = native.CpPlan([0, 5, 17, 20], [0, 12, 24])
    for r in range(G):
        seen = res[r]["ok"][1]["seen"]
        assert seen["local_cu"] == plan.rank(r)["local_cu_seqlens"]
        assert list(seen["local_initial"]) == [len(plan.rank(r)["fragments"]), 2, 64, 64]
    assert res[0]["ok"][1]["seen"]["gathered"] is None  # rank 0 continues no document: no slots passed
    gathered = res[1]["ok"][1]["seen"]["gathered"]
    S = native.cp_slot_elements(3, 2, 64, 64)
    assert gathered.shape == (G, S)
    assert torch.equal(gathered[0], cp_workers.slot_pattern(0, S))  # rank 0's slot, in rank 0's row
    assert torch.equal(gathered[1], cp_workers.slot_pattern(1, S))
    # rank 1 alone had a bad split: it names its own problem, rank 0 names rank 1; nobody waited
    bad_bounds = res[1]["one_rank_bad_bounds"][1]
    assert "cp_bounds gives this rank tokens [13, 24) (11 tokens), but its piece holds 12" in bad_bounds
    assert "rank 1 refused its arguments before the exchange" in res[0]["one_rank_bad_bounds"][1]
    # phase 1 failed on rank 0: it raises its own error, rank 1 names it instead of folding its slot
    assert res[0]["phase1_failure"] == ("DgpsError", "cp_publish: a launch failed (stood in)")
    assert res[1]["phase1_failure"][0] == "DgpsError"
    assert "rank 0 failed in phase 1" in res[1]["phase1_failure"][1]
    # other cu_seqlens on one rank: each rank names the other
    assert "rank 1 planned another split: its cu_seqlens hash" in res[0]["other_cu"][1]
    assert "rank 0 planned another split: its cu_seqlens hash" in res[1]["other_cu"][1]


def test_precond_round_over_gloo(tmp_path):
    """pgdn over two gloo ranks with the runtime's phases stood in: phase 0's accumulator slots arrive in rank
    order, on the rank that continues a document, in phase 1 (before its memory summary) and in phase 2; the
    accumulator tensors go with them; a failure in phase 0 raises on every rank, naming the rank."""
    import torch.distributed as dist
    import torch.multiprocessing as mp
    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("torch.distributed with gloo is not available in this torch build")
    import cp_workers
    G = 2
    mp.spawn(cp_workers.cpu_precond_worker, args=(G, str(tmp_path / "store"), str(tmp_path)), nprocs=G)
    res = [torch.load(os.path.join(tmp_path, f"precond_rank{r}.pt")) for r in range(G)]
    P = native.cp_precond_slot_elements(2, 64, False)
    plan = native.CpPlan([0, 5, 17, 20], [0, 12, 24])
    for r in range(G):
        assert "crash" not in res[r], res[r].get("crash")
        for name in ("ok", "after_errors"):
            kind, got = res[r][name]
            assert kind == "ok", (name, got)
            assert got["fps"] == [3, 2, 64] and got["fps_zero"]  # the stood-in phase 2 writes no row
        seen = res[r]["ok"][1]["seen"]
        n = len(plan.rank(r)["fragments"])
        assert seen["phase2"]["local_final"] == [n, 2, 64] and seen["phase2"]["doc_final"] == [3, 2, 64]
        if plan.rank(r)["continues_out"]:  # phase 1 is called on every rank; the real one publishes these only
            assert seen["phase1"]["local_initial"] == [n, 2, 64]
        assert res[r]["bad_precond_init"][0] == "InvalidArgument"
    # rank 0 continues no document: no accumulator slots; rank 1 gets both ranks' in rank order in both phases
    assert res[0]["ok"][1]["seen"]["phase2"]["gathered"] is None
    for phase in ("phase1", "phase2"):
        got = res[1]["ok"][1]["seen"][phase]["gathered"]
        assert got is not None and got.shape == (G, P), phase
        for j in range(G):
            assert torch.equal(got[j], cp_workers.precond_slot_pattern(j, P)), (phase, j)
    assert "initial_precond_state: expected the documents' initial accumulators, float32 [N, H, K] = [3, 2, 64]" \
        in res[0]["bad_precond_init"][1]
    assert res[0]["phase0_failure"] == ("DgpsError", "cp_publish_precond: a launch failed (stood in)")
    assert res[1]["phase0_failure"][0] == "DgpsError" and "rank 0 failed in phase 0" in res[1]["phase0_failure"][1]


def test_backward_names_the_spec():
    """Inputs requiring grad go through an autograd.Function whose backward says there is none yet."""
    from dgps import _context_parallel
    q = torch.randn(3, requires_grad=True)
    o, fs, fps = _context_parallel.forward_autograd("gdn", lambda: (torch.randn(2), torch.randn(3), None), [q])
    assert o.requires_grad and fs.requires_grad and fps is None
    with pytest.raises(RuntimeError, match="dgps: no backward pass for spec 'gdn' yet"):
        (o.sum() + fs.sum()).backward()
    o, fs, fps = _context_parallel.forward_autograd("gdn", lambda: (torch.randn(2), None, None), [q])
    assert o.requires_grad and fs is None and fps is None
    o, fs, fps = _context_parallel.forward_autograd("pgdn", lambda: (torch.randn(2), None, torch.randn(4)), [q])
    assert o.requires_grad and fs is None and fps.shape == (4,) and fps.requires_grad
    o, fs, fps = _context_parallel.forward_autograd("gdn", lambda: (torch.randn(2), None, None), [q.detach()])
    assert not o.requires_grad


def test_layer_pieces_match_the_whole_over_gloo(tmp_path):
    """Three gloo ranks run a layer (short convolutions of width 4) on their pieces, the recurrence standing
    in as a per-token function: the rows equal the whole batch's, so each piece's convolution saw the right
    tokens before it (from one or two earlier ranks) and none across a document start."""
    import torch.distributed as dist
    import torch.multiprocessing as mp
    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("torch.distributed with gloo is not available in this torch build")
    import cp_workers
    G = 3
    mp.spawn(cp_workers.layer_halo_worker, args=(G, str(tmp_path / "store"), str(tmp_path)), nprocs=G)
    res = [torch.load(os.path.join(tmp_path, f"layer_rank{r}.pt")) for r in range(G)]
    for r in range(G):
        assert "crash" not in res[r], res[r].get("crash")
    layer, x = cp_workers.halo_layer()
    for i, (cu, bounds) in enumerate(cp_workers.LAYER_CASES):
        with torch.no_grad():
            whole = layer(x, cu_seqlens=None if cu is None else torch.tensor(cu))[0]
        got = torch.cat([res[r][i] for r in range(G)], dim=1)
        torch.testing.assert_close(got, whole, rtol=1e-12, atol=1e-12, msg=f"case {i}: cu={cu} bounds={bounds}")
    # without the halo the pieces' first rows differ: the comparison above can fail
    with torch.no_grad():
        alone = layer(x[:, 6:], cu_seqlens=None)[0]
        whole = layer(x)[0]
    assert not torch.allclose(alone[:, :3], whole[:, 6:9])
    assert "cp_bounds gives this rank tokens [5, 7) (2 tokens), but its piece holds 1" in res[1]["bad"][1]
    for r in (0, 2):
        assert "rank 1 refused its arguments before the short convolution's exchange" in res[r]["bad"][1]
