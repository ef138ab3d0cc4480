"""The ranks of the context-parallel tests: functions torch.multiprocessing.spawn runs in G processes, each
joining one gloo group through a file store and writing what it saw to `out_dir` (the test process
compares). Not a test module: the spawned processes import it by name."""
import ctypes
import datetime
import os
import traceback

import torch
import torch.distributed as dist

import dgps
from dgps import _context_parallel
from dgps._native import native
from dgps._tensors import FORWARD_SLOTS
from dgps.reference import generate_inputs

PER_TOKEN = ("q", "k", "v", "g", "beta", "precond_g", "precond_beta")
GLOBAL = ("initial_state", "initial_precond_state", "precond_center")  # the same on every rank


def join_group(rank, G, store, backend="gloo"):
    dist.init_process_group(backend, init_method=f"file://{store}", rank=rank, world_size=G,
                            timeout=datetime.timedelta(seconds=120))


def piece(x, bounds, rank, device):
    """This rank's tokens of the packed batch x (B = 1), each its own contiguous tensor, as a real rank holds
    them; the documents' initial states whole."""
    b, e = bounds[rank], bounds[rank + 1]
    out = {n: x[n][:, b:e].contiguous().to(device) for n in PER_TOKEN if n in x}
    out.update({n: x[n].to(device) for n in GLOBAL if n in x})
    return out


def poison(device, *shapes):
    """NaN-filled blocks left in torch's allocator cache: outputs allocated next start as NaN."""
    blocks = [torch.full(s, float("nan"), device=device) for s in shapes]
    del blocks


# ----------------------------------------------------------------------------------------- CPU plumbing
class SlotRuntime:
    """Stands in for the runtime on the CPU, where views point at host memory: validates the piece as the
    real runtime does (Validation.h reads shapes only), fills this rank's slot in phase 1 with a pattern
    unique to the rank, and records in phase 2 the gathered slots and the views it was handed."""

    def __init__(self, rank):
        self.real = native.Runtime(tune_mode="default")
        self.rank = rank
        self.seen = {}
        self.fail_publish = False

    def cp_workspace_bytes(self, package, plan, rank, views, config):
        if plan.rank(rank)["fragments"]:
            self.real.validate_forward(package, views)
        return 0

    def cp_publish(self, package, plan, rank, views, send, stream, config):
        if self.fail_publish:
            raise native.DgpsError("cp_publish: a launch failed (stood in)")
        ptr, dtype, shape, _ = send
        assert dtype == "f32" and len(shape) == 1
        pattern = slot_pattern(rank, shape[0])
        ctypes.memmove(ptr, pattern.data_ptr(), pattern.numel() * 4)

    def cp_run(self, package, plan, rank, views, gathered, doc_initial, doc_final, local_initial, local_final,
               stream, config):
        named = dict(zip(FORWARD_SLOTS, views))
        self.seen = dict(rank=rank, local_cu_shape=named["cu_seqlens"][2],
                         local_initial=None if local_initial is None else local_initial[2],
                         doc_final=None if doc_final is None else doc_final[2], gathered=None)
        if named["cu_seqlens"][0]:
            n = named["cu_seqlens"][2][0]
            self.seen["local_cu"] = list((ctypes.c_int64 * n).from_address(named["cu_seqlens"][0]))
        if gathered is not None:
            ptr, _, shape, _ = gathered
            count = shape[0] * shape[1]
            self.seen["gathered"] = torch.tensor(list((ctypes.c_float * count).from_address(ptr))).view(shape)


def slot_pattern(rank, n):
    return torch.arange(n, dtype=torch.float32) + 1000.0 * (rank + 1)


def precond_slot_pattern(rank, n):
    return -torch.arange(n, dtype=torch.float32) - 1000.0 * (rank + 1)


def _host_floats(v):
    """A view (ptr, dtype, shape, device) of host f32 memory as a tensor copy; None stays None."""
    if v is None:
        return None
    ptr, dtype, shape, _ = v
    count = 1
    for d in shape:
        count *= d
    return torch.tensor(list((ctypes.c_float * count).from_address(ptr))).view(shape)


class PrecondSlotRuntime(SlotRuntime):
    """SlotRuntime for a package with the preconditioner round: phase 0 fills this rank's accumulator slot with
    its own pattern; phases 1 and 2 record the accumulator slots and tensors they were handed."""

    def __init__(self, rank):
        super().__init__(rank)
        self.fail_precond = False
        self.precond_seen = {}

    def cp_publish_precond(self, package, plan, rank, views, send, stream, config):
        if self.fail_precond:
            raise native.DgpsError("cp_publish_precond: a launch failed (stood in)")
        ptr, dtype, shape, _ = send
        assert dtype == "f32" and len(shape) == 1
        pattern = precond_slot_pattern(rank, shape[0])
        ctypes.memmove(ptr, pattern.data_ptr(), pattern.numel() * 4)

    def cp_publish(self, package, plan, rank, views, send, stream, config, precond_gathered=None,
                   precond_doc_initial=None, precond_local_initial=None):
        self.precond_seen["phase1"] = dict(gathered=_host_floats(precond_gathered),
                                           doc_initial=_host_floats(precond_doc_initial),
                                           local_initial=None if precond_local_initial is None
                                           else list(precond_local_initial[2]))
        super().cp_publish(package, plan, rank, views, send, stream, config)

    def cp_run(self, package, plan, rank, views, gathered, doc_initial, doc_final, local_initial, local_final,
               stream, config, precond_gathered=None, precond_doc_initial=None, precond_doc_final=None,
               precond_local_initial=None, precond_local_final=None):
        self.precond_seen["phase2"] = dict(gathered=_host_floats(precond_gathered),
                                           doc_final=None if precond_doc_final is None else list(precond_doc_final[2]),
                                           local_final=None if precond_local_final is None
                                           else list(precond_local_final[2]))
        super().cp_run(package, plan, rank, views, gathered, doc_initial, doc_final, local_initial, local_final,
                       stream, config)


def _attempt(fn):
    try:
        return ("ok", fn())
    except Exception as e:  # noqa: BLE001 (the test process checks the type and message)
        return (type(e).__name__, str(e))


def cpu_plumbing_worker(rank, G, store, out_dir):
    """The scenarios of test_cpu_context_parallel.test_ranks_exchange_over_gloo, on one rank."""
    try:
        join_group(rank, G, store)
        group = dist.group.WORLD
        op = dgps.load("gdn")
        runtime = SlotRuntime(rank)
        op = dgps.Op(op.package.directory, runtime=runtime)
        T, cu = 24, [0, 5, 17, 20]
        x = generate_inputs(op, 1, T, 2, 64, 64, seed=7, cu_seqlens=cu)
        bounds = native.cp_equal_bounds(T, G)
        p = piece(x, bounds, rank, "cpu")
        results = {}
        # on the CPU every tensor is off the rank's device: every rank refuses, together
        results["device"] = _attempt(lambda: op(p["q"], p["k"], p["v"], g=p["g"], beta=p["beta"], cu_seqlens=cu,
                                                cp_group=group))
        _context_parallel.check_rank_device = lambda rank, tensors: None  # host views from here on
        _context_parallel.current_stream = lambda device: 0

        def run(**kw):
            args = dict(g=p["g"], beta=p["beta"], cu_seqlens=cu, initial_state=p["initial_state"],
                        output_final_state=True, cp_group=group)
            args.update(kw)
            o, fs, _ = op(p["q"], p["k"], p["v"], **args)
            return dict(o=list(o.shape), fs=list(fs.shape), fs_zero=bool((fs == 0).all()), seen=runtime.seen)

        results["ok"] = _attempt(run)
        results["ok_tensor_cu"] = _attempt(lambda: run(cu_seqlens=torch.tensor(cu, dtype=torch.int32)))
        # rank 1 alone is given a bound that disagrees with its tokens: it names its own problem, rank 0 names it
        bad = list(bounds)
        bad[1] += 1
        results["one_rank_bad_bounds"] = _attempt(lambda: run(cp_bounds=bad if rank == 1 else bounds))
        # the ranks disagree on the documents: both name the other's cu_seqlens
        results["other_cu"] = _attempt(lambda: run(cu_seqlens=cu if rank == 0 else [0, 6, 17, 20]))
        results["bounds_length"] = _attempt(lambda: run(cp_bounds=bounds + [T]))
        # phase 1 raises on rank 0 alone (a launch error): rank 0 raises it, rank 1 names rank 0
        runtime.fail_publish = rank == 0
        results["phase1_failure"] = _attempt(run)
        runtime.fail_publish = False
        results["after_errors"] = _attempt(run)  # the group still works: every rank made the same exchanges
        torch.save(results, os.path.join(out_dir, f"rank{rank}.pt"))
        # no rank tears the group down while a peer's last collective may still be reading from it (gloo aborts
        # the peer on a closed connection)
        dist.barrier()
    except Exception:  # noqa: BLE001 (reported to the test process with the traceback)
        torch.save({"crash": traceback.format_exc()}, os.path.join(out_dir, f"rank{rank}.pt"))
        raise
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def cpu_precond_worker(rank, G, store, out_dir):
    """The preconditioner round's exchange (test_cpu_context_parallel.test_precond_round_over_gloo) on one
    rank: pgdn with the runtime's phases stood in."""
    try:
        join_group(rank, G, store)
        group = dist.group.WORLD
        runtime = PrecondSlotRuntime(rank)
        op = dgps.Op(dgps.load("pgdn").package.directory, runtime=runtime)
        T, cu = 24, [0, 5, 17, 20]
        x = generate_inputs(op, 1, T, 2, 64, 64, seed=8, cu_seqlens=cu)
        p = piece(x, native.cp_equal_bounds(T, G), rank, "cpu")
        _context_parallel.check_rank_device = lambda rank, tensors: None  # host views from here on
        _context_parallel.current_stream = lambda device: 0

        def run(**kw):
            args = dict(g=p["g"], beta=p["beta"], precond_g=p["precond_g"], precond_beta=p["precond_beta"],
                        precond_center=p["precond_center"], cu_seqlens=cu, initial_state=p["initial_state"],
                        initial_precond_state=p["initial_precond_state"], output_final_state=True, cp_group=group)
            args.update(kw)
            o, fs, fps = op(p["q"], p["k"], p["v"], **args)
            return dict(o=list(o.shape), fs=list(fs.shape), fps=list(fps.shape), fps_zero=bool((fps == 0).all()),
                        seen=dict(runtime.precond_seen))

        results = {"ok": _attempt(run)}
        # the accumulators of the wrong shape: every rank refuses, together
        results["bad_precond_init"] = _attempt(lambda: run(initial_precond_state=torch.zeros(3, 2, 32)))
        runtime.fail_precond = rank == 0
        results["phase0_failure"] = _attempt(run)
        runtime.fail_precond = False
        results["after_errors"] = _attempt(run)
        torch.save(results, os.path.join(out_dir, f"precond_rank{rank}.pt"))
        dist.barrier()  # as cpu_plumbing_worker: no teardown under a peer's last collective
    except Exception:  # noqa: BLE001 (reported to the test process with the traceback)
        torch.save({"crash": traceback.format_exc()}, os.path.join(out_dir, f"precond_rank{rank}.pt"))
        raise
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


# ----------------------------------------------------------------------------------------- GPU ranks
def gpu_cases(G):
    """(package, T, global cu_seqlens or None, cp_bounds or None) for every package info["context_parallel"]
    accepts (the ema_sq_squash ones through the preconditioner round): a packed batch with padding and an empty
    document over the equal split, one sequence crossing every boundary, and an uneven split with an empty
    rank and a one-token rank (G = 4) or a one-token rank (G = 2)."""
    names = [n for n in dgps.shipped_names() if dgps.load(n).info["context_parallel"]]
    cu = [0, 300, 301, 700, 700, 1000]
    uneven = [0, 1, 1024] if G == 2 else [0, 0, 500, 501, 1024]
    cases = []
    for name in names:
        cases += [(name, 1024, cu, None), (name, 768, None, None), (name, 1024, cu, uneven)]
    return cases


GPU_LAYERS = ("GatedDeltaNet", "KDA", "PreconditionedGatedDeltaNet")  # layers over context-parallel specs
GPU_LAYER_CU = [0, 250, 600]             # two documents; the second crosses every piece boundary for G = 4


def gpu_layer(name, device):
    """A bf16 layer (short convolutions on) and hidden states [1, 600, 256], the same on every rank."""
    import dgps.layers
    torch.manual_seed(5)
    layer = getattr(dgps.layers, name)(hidden_size=256, head_dim=64, num_heads=4, expand_v=1)
    layer = layer.to(device).bfloat16().eval()
    torch.manual_seed(6)
    return layer, torch.randn(1, GPU_LAYER_CU[-1], 256).bfloat16().to(device)


def case_inputs(op, T, cu, seed):
    H = op.info["heads_qk"] or 2
    K = [d for d in (64, 128) if d in op.info["key_dims"] and d in op.info["value_dims"]][0]
    return generate_inputs(op, 1, T, H, K, K, HV=H * op.info["gva_ratio"], seed=seed, cu_seqlens=cu)


def gpu_worker(rank, G, store, out_dir, backend="gloo"):
    """Every case of gpu_cases(G) on this rank's piece through a `backend` group: gloo with every rank on
    cuda:0 (sharing the GPU), nccl with rank r on cuda:r; o and the final states to out_dir."""
    try:
        device = f"cuda:{rank if backend == 'nccl' else 0}"
        torch.cuda.set_device(device)
        join_group(rank, G, store, backend)
        for i, (name, T, cu, bounds) in enumerate(gpu_cases(G)):
            op = dgps.load(name, config=dgps.load(name).info["default_config"])
            x = case_inputs(op, T, cu, seed=100 + i)
            b = bounds or native.cp_equal_bounds(T, G)
            p = piece(x, b, rank, device)
            HV, V = x["v"].shape[2], x["v"].shape[3]
            poison(device, (1, b[rank + 1] - b[rank], HV, V), tuple(x["initial_state"].shape),
                   *([tuple(x["initial_precond_state"].shape)] if "initial_precond_state" in x else []))
            extra = {n: p[n] for n in ("g", "beta", "precond_g", "precond_beta", "precond_center",
                                       "initial_precond_state") if n in p}
            o, fs, fps = op(p["q"], p["k"], p["v"], **extra, initial_state=p["initial_state"], cu_seqlens=cu,
                            cp_bounds=bounds, output_final_state=True, cp_group=dist.group.WORLD)
            assert (fps is not None) == bool(op.info["context_parallel_precond"])
            torch.save({"o": o.cpu(), "final_state": None if fs is None else fs.cpu(),
                        "final_precond_state": None if fps is None else fps.cpu()},
                       os.path.join(out_dir, f"case{i}_rank{rank}.pt"))
        for name in GPU_LAYERS:
            layer, h = gpu_layer(name, device)
            b = native.cp_equal_bounds(h.shape[1], G)
            with torch.no_grad():
                o = layer(h[:, b[rank]:b[rank + 1]], cu_seqlens=GPU_LAYER_CU, cp_group=dist.group.WORLD)[0]
            torch.save(o.cpu(), os.path.join(out_dir, f"layer_{name}_rank{rank}.pt"))
        dist.barrier()  # as cpu_plumbing_worker: no teardown under a peer's last collective
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


# ----------------------------------------------------------------------------------------- layer halo
LAYER_T = 12
LAYER_CASES = [  # (global cu_seqlens or None, cp_bounds or None) for G = 3
    ([0, 2, 9, 12], [0, 5, 6, 12]),  # rank 1 holds one token: rank 2's halo comes from ranks 0 and 1
    (None, None),                    # one sequence, 4 tokens per rank
    ([0, 5, 12], [0, 5, 6, 12]),     # a document starts at rank 1's first token: no halo may leak in
]


def per_token_recurrence(q, k, v, gates, cu_seqlens, **cp):
    """Stands in for the op: o depends on every per-token input of its own token only, so a layer's output
    rows show whether q, k, v and the gates reached the recurrence right (H = HV, K = V)."""
    o = q + k + v
    for g in gates.values():
        o = o + (g.unsqueeze(-1) if g.dim() == 3 else g)
    return o


def halo_layer():
    from dgps.layers import GatedDeltaNet
    torch.manual_seed(0)
    layer = GatedDeltaNet(hidden_size=64, head_dim=64, num_heads=1, expand_v=1).double()
    layer.recurrence = per_token_recurrence
    return layer, torch.randn(1, LAYER_T, 64, dtype=torch.float64)


def layer_halo_worker(rank, G, store, out_dir):
    """Each case of LAYER_CASES on this rank's piece of the hidden states; then rank 1 alone with bounds
    that disagree with its tokens."""
    try:
        join_group(rank, G, store)
        layer, x = halo_layer()
        results = {}
        for i, (cu, bounds) in enumerate(LAYER_CASES):
            b = bounds or native.cp_equal_bounds(LAYER_T, G)
            with torch.no_grad():
                results[i] = layer(x[:, b[rank]:b[rank + 1]], cu_seqlens=cu, cp_group=dist.group.WORLD,
                                   cp_bounds=bounds)[0]
        b = [0, 5, 6, 12]
        bad = [0, 5, 7, 12] if rank == 1 else b
        results["bad"] = _attempt(lambda: layer(x[:, b[rank]:b[rank + 1]], cp_group=dist.group.WORLD, cp_bounds=bad))
        torch.save(results, os.path.join(out_dir, f"layer_rank{rank}.pt"))
        dist.barrier()  # as cpu_plumbing_worker: no teardown under a peer's last collective
    except Exception:  # noqa: BLE001 (reported to the test process with the traceback)
        torch.save({"crash": traceback.format_exc()}, os.path.join(out_dir, f"layer_rank{rank}.pt"))
        raise
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
