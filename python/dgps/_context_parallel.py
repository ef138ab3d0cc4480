"""Context parallelism over a torch.distributed process group: one rank's forward over its contiguous piece
of a packed batch (docs/context_parallel.md). The C++ runtime does the phases
(runtime/include/dgps/runtime/ContextParallelForward.h, bound in python/src/ContextParallelBinding.cpp);
this module makes the plan, runs the all-gathers between the phases on the group, and checks that every
rank planned the same split.

    header all-gather                     every rank's plan (or refusal), checked on every rank
    phase 0 (Runtime.cp_publish_precond)  only with a preconditioner state (info["context_parallel_precond"]):
                                          this rank's last fragment's preconditioner summary, (Γ, Σ) or for
                                          hypergrad_ogd (M, e), into its slot
    all-gather                            one fixed-size slot per rank (2·H·K floats, or H·K·(K + 1))
    phase 1 (Runtime.cp_publish)          with a preconditioner state, first the fragments' accumulator starts
                                          (folded from phase 0's slots, into precond_local_initial, on every
                                          rank); this rank's last fragment summarised as (M, E) into its slot,
                                          when the document continues on a later rank
    all-gather                            one fixed-size slot per rank over the group
    phase 2 (Runtime.cp_run)              the continued document's memory start folded from the earlier slots,
                                          the piece run from its start states (the accumulator's from phase 1:
                                          the same precond_local_initial), the final states of the documents it
                                          ends

Before the phases the ranks all-gather a fixed-size header: what each rank planned (group size, rank, token
range, T, N, H, HV, K, V and a hash of cu_seqlens), or that it refused its arguments. Every rank compares all
of them with its own plan, so a rank given other pieces, other cu_seqlens or other shapes is named on every
rank instead of the wrong summaries being folded in silence, and every rank raises together, so none waits
in a gather that another never reaches. Reading the headers waits for that exchange on the host. The
slots carry a status word the same way: a rank whose phase 0 or 1 raises still joins that phase's gather, and
the others raise naming it (reading the statuses waits for that gather too).
"""
import operator

import torch

from ._native import native
from ._tensors import FORWARD_SLOTS, current_stream, view, views

_HEADER_WORDS = 16            # int64 words per rank's header (_HEADER_FIELDS, then zeros)
_MAGIC = 0x44475053_43503031  # "DGPSCP01": the rank's arguments passed its checks
_FAILED = 0x44475053_46415431  # "DGPSFAT1": the rank refused its arguments (and raises its own error)
_HEADER_FIELDS = ("magic", "group size", "rank", "first token", "end token", "total tokens T", "documents N",
                  "key heads H", "value heads HV", "key dim K", "value dim V", "cu_seqlens hash")


def _where(rank):
    return f"dgps (context parallel, rank {rank})"


def equal_bounds(tokens, ranks):
    """The default split of `tokens` packed tokens over `ranks` ranks: G+1 offsets, ⌈T/G⌉ tokens per rank
    (the last ones shorter or empty), cp::equalRankBounds. Public as dgps.cp_equal_bounds."""
    return native.cp_equal_bounds(tokens, ranks)


def group_shape(group):
    """(G, rank) of this process in `group`; a clear error for anything else."""
    import torch.distributed as dist
    if not dist.is_available():
        raise native.InvalidArgument("dgps: cp_group needs torch.distributed, which this torch build lacks")
    if not isinstance(group, dist.ProcessGroup):
        raise TypeError(f"dgps: cp_group must be a torch.distributed ProcessGroup (dist.new_group(...) or "
                        f"dist.group.WORLD), got {type(group).__name__}")
    G, rank = dist.get_world_size(group), dist.get_rank(group)
    if rank < 0:
        raise native.InvalidArgument("dgps: this process is not a member of cp_group (dist.get_rank(cp_group) "
                                     "is -1); call the op on the group's ranks only")
    return G, rank


def host_ints(values, name, what):
    """`values` (a list/tuple of integers, or a 1-D int tensor) as Python ints; a float or a bool is refused,
    not rounded. A CUDA tensor is read back, which waits for the device."""
    if isinstance(values, torch.Tensor):
        if values.dim() != 1 or values.dtype not in (torch.int32, torch.int64):
            raise native.InvalidArgument(f"dgps: {name}: expected a 1-D int64 (or int32) tensor of {what}, got "
                                         f"{values.dtype} of shape {list(values.shape)}")
        return [int(c) for c in values.tolist()]
    if not isinstance(values, (list, tuple)):
        raise TypeError(f"dgps: {name}: expected a list of ints or an int tensor ({what}), got "
                        f"{type(values).__name__}")
    try:
        if any(isinstance(c, bool) for c in values):
            raise TypeError("bool")
        return [operator.index(c) for c in values]
    except TypeError:
        shown = list(values[:8]) if len(values) <= 8 else f"{list(values[:8])[:-1]} ... ({len(values)} values)"
        raise TypeError(f"dgps: {name}: expected integers ({what}), got {shown}") from None


def global_cu_seqlens(cu_seqlens):
    """The documents' offsets as host ints (host_ints; a CPU tensor or a list avoids reading the device).
    None stays None."""
    if cu_seqlens is None:
        return None
    return host_ints(cu_seqlens, "cu_seqlens", "N+1 global offsets")


def rank_bounds(cp_bounds, G, rank, local_tokens, cu):
    """The G+1 token bounds of the ranks' pieces: cp_bounds when given, else G pieces of local_tokens each
    (every rank holds as many tokens as this one). Checks that this rank's piece has its tokens."""
    if cp_bounds is None:
        T = G * local_tokens
        if cu is not None and cu and cu[-1] > T:
            raise native.InvalidArgument(
                f"{_where(rank)}: cu_seqlens ends at token {cu[-1]}, but {G} ranks of {local_tokens} tokens (this "
                f"rank's piece) hold {T}; without cp_bounds every rank holds the same number of tokens; pass "
                f"cp_bounds=[0, ..., T] (G+1 token offsets) for uneven pieces")
        return native.cp_equal_bounds(T, G)
    bounds = host_ints(cp_bounds, "cp_bounds", "G+1 token offsets")
    if len(bounds) != G + 1:
        raise native.InvalidArgument(
            f"{_where(rank)}: cp_bounds has {len(bounds)} entries, but cp_group has G = {G} ranks: expected "
            f"G+1 = {G + 1} token offsets [0, ..., T] (rank r holds tokens [cp_bounds[r], cp_bounds[r+1]))")
    if bounds[rank + 1] - bounds[rank] != local_tokens:
        raise native.InvalidArgument(
            f"{_where(rank)}: cp_bounds gives this rank tokens [{bounds[rank]}, {bounds[rank + 1]}) "
            f"({bounds[rank + 1] - bounds[rank]} tokens), but its piece holds {local_tokens} (q.shape[1], or a "
            f"layer's hidden_states.shape[1])")
    return bounds


def check_rank_device(rank, tensors):
    """Every tensor on the rank's CUDA device, torch.cuda.current_device() (where the rank's kernels run and
    where an NCCL group gathers)."""
    where = f"cuda:{torch.cuda.current_device()}" if torch.cuda.is_available() else None
    for name, x in tensors.items():
        if x is not None and str(x.device) != where:
            raise native.InvalidArgument(
                f"{_where(rank)}: tensor '{name}' is on {x.device}, expected this rank's CUDA device "
                f"{where or '(torch sees none)'}: torch.cuda.current_device(), which torch.cuda.set_device(...) "
                "chooses on each rank before the forward")


def _cu_hash(cu):
    h = 0
    for c in cu:
        h = (h * 1000003 + c + 1) % (2 ** 61 - 1)
    return h


def _header(plan, rank, H, HV, K, V, cu_hash=None):
    r = plan.rank(rank)
    fields = [_MAGIC, plan.ranks, rank, r["begin"], r["end"], plan.tokens, plan.num_docs, H, HV, K, V,
              _cu_hash(plan.cu_seqlens) if cu_hash is None else cu_hash]
    return fields + [0] * (_HEADER_WORDS - len(fields))


def check_headers(headers, plan, rank, H, HV, K, V):
    """headers: [G, _HEADER_WORDS] int64, what each rank planned. Raises naming the first rank that
    disagrees with this rank's plan, and on what."""
    cu_hash = _cu_hash(plan.cu_seqlens)
    for j, got in enumerate(headers.tolist()):
        if got[0] == _FAILED:
            raise native.InvalidArgument(
                f"{_where(rank)}: rank {j} refused its arguments before the exchange (its own error names the "
                "problem); no rank ran the forward")
        want = _header(plan, j, H, HV, K, V, cu_hash)
        for name, g, w in zip(_HEADER_FIELDS, got, want):
            if g != w:
                raise native.InvalidArgument(
                    f"{_where(rank)}: rank {j} planned another split: its {name} is {g}, this rank's plan says {w} "
                    f"(every rank must pass the same global cu_seqlens and cp_bounds, its own piece of the tokens, "
                    f"and the same head counts and dims)")


def _is_gloo(group):
    import torch.distributed as dist
    return dist.get_backend(group) == "gloo"


def _exchange_device(group):
    """Where the group gathers: the host for gloo, else the rank's CUDA device."""
    return torch.device("cpu") if _is_gloo(group) else torch.device("cuda", torch.cuda.current_device())


def all_gather_rows(send, G, group):
    """[G, len(send)], row j = rank j's 1-D `send`, in rank order. NCCL (and any backend gathering device
    tensors) gathers on the device with all_gather_into_tensor, ordered on the current stream; gloo gathers
    CPU tensors only, so `send` is staged through a host copy (which waits for the work queued before it,
    phase 1) and the rows come back on the host, gathered with all_gather (every torch version's gloo
    implements it; all_gather_into_tensor only recent ones)."""
    import torch.distributed as dist
    if _is_gloo(group):
        host = send.cpu()
        out = torch.empty((G, send.numel()), dtype=send.dtype)
        dist.all_gather(list(out.unbind(0)), host, group=group)
        return out
    out = torch.empty((G, send.numel()), dtype=send.dtype, device=send.device)
    gather = getattr(dist, "all_gather_into_tensor", None) or dist._all_gather_base  # torch < 1.13
    gather(out, send, group=group)
    return out


class _RankCall:
    """One rank's checked call: the plan, its piece's views and buffers, ready for the two phases."""

    def __init__(self, op, t, cu_seqlens, G, rank, cp_bounds, want_final):
        from . import _ops
        q, k, v = t["q"], t["k"], t["v"]
        check_rank_device(rank, {n: t.get(n) for n in ("q", "k", "v", "g", "beta", "precond_g", "precond_beta",
                                                         "precond_center", "initial_state", "initial_precond_state")})
        if q.dim() != 4 or q.shape[0] != 1 or k.dim() != 4 or v.dim() != 4:
            raise native.InvalidArgument(
                f"{_where(rank)}: expected this rank's piece of the packed tokens as q, k [1, T_r, H, K] and "
                f"v [1, T_r, HV, V] (B = 1), got q {list(q.shape)}, k {list(k.shape)}, v {list(v.shape)}")
        T_r, H, K = q.shape[1], k.shape[2], k.shape[3]
        HV, V = v.shape[2], v.shape[3]
        cu = global_cu_seqlens(cu_seqlens)
        bounds = rank_bounds(cp_bounds, G, rank, T_r, cu)
        self.plan = plan = native.CpPlan(cu if cu is not None else [0, bounds[-1]], bounds)
        self.rank, self.dims = rank, (H, HV, K, V)
        N = plan.num_docs
        self.doc_initial = init = t["initial_state"]
        if init is not None and (init.dtype != torch.float32 or tuple(init.shape) != (N, HV, K, V)):
            raise native.InvalidArgument(
                f"{_where(rank)}: initial_state: expected the documents' initial states, float32 [N, HV, K, V] = "
                f"{[N, HV, K, V]} (global: one row per document of cu_seqlens, the same on every rank), got "
                f"{init.dtype} of shape {list(init.shape)}")
        self.mine = mine = plan.rank(rank)
        n = len(mine["fragments"])
        dev = q.device
        state = (HV, K, V)
        self.local_initial = torch.empty((n,) + state, dtype=torch.float32, device=dev) if n else None
        self.doc_final = (torch.zeros((N,) + state, dtype=torch.float32, device=dev)
                          if want_final and op.info["final_state"] else None)
        self.local_final = (torch.empty((n,) + state, dtype=torch.float32, device=dev)
                            if self.doc_final is not None and n else None)
        self.o = q.new_empty((1, T_r, HV, V))
        # the preconditioner round's accumulators [·, H, K] (docs/context_parallel.md): global initial and final
        # rows, the fragments' local starts and ends
        self.precond = bool(op.info["context_parallel_precond"])
        self.precond_doc_initial = self.precond_doc_final = None
        self.precond_local_initial = self.precond_local_final = None
        if self.precond:
            pinit = t["initial_precond_state"]
            if pinit is None and op.info["context_parallel_precond_full_map"]:
                # hypergrad_ogd's d starts at the spec's init without an initial state, which the runtime's
                # context-parallel phases cannot fill in (they refuse it too): the caller passes it
                raise native.InvalidArgument(
                    f"{_where(rank)}: initial_precond_state: required for {op.name} with cp_group (a "
                    f"hypergrad_ogd preconditioner starts from the spec's init when none is given); pass the "
                    f"documents' initial d, float32 [N, H, K] = {[N, H, K]}")
            if pinit is not None and (pinit.dtype != torch.float32 or tuple(pinit.shape) != (N, H, K)):
                raise native.InvalidArgument(
                    f"{_where(rank)}: initial_precond_state: expected the documents' initial accumulators, float32 "
                    f"[N, H, K] = {[N, H, K]} (global: one row per document of cu_seqlens, the same on every rank), "
                    f"got {pinit.dtype} of shape {list(pinit.shape)}")
            self.precond_doc_initial = pinit
            self.precond_local_initial = torch.empty((n, H, K), dtype=torch.float32, device=dev) if n else None
            if want_final and op.info["final_precond_state"]:
                self.precond_doc_final = torch.zeros((N, H, K), dtype=torch.float32, device=dev)
                self.precond_local_final = torch.empty((n, H, K), dtype=torch.float32, device=dev) if n else None
        local_cu = torch.tensor(mine["local_cu_seqlens"], dtype=torch.int64, device=dev)
        tensors = dict(t, cu_seqlens=local_cu, initial_state=self.local_initial, final_state=self.local_final,
                       o=self.o, initial_precond_state=None, final_precond_state=None)
        # the views are raw pointers: the call keeps every tensor they point at alive until it is done
        self.tensors = tensors
        self.views = views(tensors, FORWARD_SLOTS)
        nbytes = op.runtime.cp_workspace_bytes(op.package, plan, rank, self.views, op.config)  # validates
        if nbytes:
            self.tensors["workspace"] = _ops._workspace(nbytes, dev)
            self.views[-1] = view(self.tensors["workspace"])
        self.device = dev

    def header(self):
        return _header(self.plan, self.rank, *self.dims)


def _failed_header(G, rank):
    return [_FAILED, G, rank] + [0] * (_HEADER_WORDS - 3)


def forward(op, prepare, cu_seqlens, group, cp_bounds, want_final):
    """One rank's piece: (o [1, T_r, HV, V], final_state [N, HV, K, V] or None, final_precond_state [N, H, K]
    or None). `prepare()` gives the tensors of Op._prepare (contiguous, f32 gates): this rank's tokens and the
    documents' initial_state (and initial_precond_state).

    The ranks first all-gather their headers (fixed size), so that a rank whose arguments fail its checks
    still joins that exchange: every rank then raises (this rank its own error, the others naming it)
    instead of waiting in a gather the failed rank never reaches, and the summary slots are gathered only
    when every rank agrees on their size."""
    G, rank = group_shape(group)
    try:
        call, error = _RankCall(op, prepare(), cu_seqlens, G, rank, cp_bounds, want_final), None
        header = call.header()
    except Exception as e:  # noqa: BLE001 (any refusal: tell the other ranks, then raise it here)
        call, error, header = None, e, _failed_header(G, rank)
    headers = all_gather_rows(torch.tensor(header, dtype=torch.int64, device=_exchange_device(group)), G, group)
    if error is not None:
        raise error
    check_headers(headers.cpu(), call.plan, rank, *call.dims)

    plan, dev = call.plan, call.device
    stream = current_stream(dev)
    H, HV, K, V = call.dims
    precond = {}
    if call.precond:
        S0 = native.cp_precond_slot_elements(H, K, bool(op.info["context_parallel_precond_full_map"]))
        pgathered = _exchange_slots(
            lambda slot: op.runtime.cp_publish_precond(op.package, plan, rank, call.views, view(slot), stream,
                                                       op.config), S0, dev, G, group, rank, "phase 0")
        pslots = pgathered.contiguous().to(dev) if call.mine["continues_in"] else None
        precond = dict(precond_gathered=view(pslots), precond_doc_initial=view(call.precond_doc_initial),
                       precond_local_initial=view(call.precond_local_initial))
        call.tensors["precond_slots"] = pslots  # alive until the call is done: its view is a raw pointer
    S = native.cp_slot_elements(plan.num_docs, HV, K, V)
    gathered = _exchange_slots(
        lambda slot: op.runtime.cp_publish(op.package, plan, rank, call.views, view(slot), stream, op.config,
                                           **precond), S, dev, G, group, rank, "phase 1")
    slots = gathered.contiguous().to(dev) if call.mine["continues_in"] else None
    if call.precond:
        precond.update(precond_doc_final=view(call.precond_doc_final),
                       precond_local_final=view(call.precond_local_final))
    op.runtime.cp_run(op.package, plan, rank, call.views, view(slots), view(call.doc_initial), view(call.doc_final),
                      view(call.local_initial), view(call.local_final), stream, op.config, **precond)
    return call.o, call.doc_final, call.precond_doc_final


def _exchange_slots(publish, S, dev, G, group, rank, phase):
    """Runs publish(slot) into this rank's slot of S floats and all-gathers the slots over the group:
    [G, S], row j = rank j's slot. Each slot is followed by a status word (and one of padding): 1 when the
    phase was launched, 0 when it raised, so that the rank still joins the gather and the others raise naming
    it instead of folding its slot."""
    send = torch.empty((S + 2,), dtype=torch.float32, device=dev)
    try:
        publish(send[:S])
        error = None
    except Exception as e:  # noqa: BLE001 (tell the other ranks, then raise it here)
        error = e
    send[S:].fill_(0.0 if error else 1.0)
    gathered = all_gather_rows(send, G, group)
    if error is not None:
        raise error
    failed = [j for j, ok in enumerate(gathered[:, S].tolist()) if ok != 1.0]
    if failed:
        raise native.DgpsError(f"{_where(rank)}: rank {failed[0]} failed in {phase} (its summary; its own error "
                               "names the problem); this rank did not run its piece")
    return gathered[:, :S]


class _NoBackward(torch.autograd.Function):
    """Autograd entry of the context-parallel forward: DGPS has no backward kernels yet, so backward names
    the spec (as the single-device forward's does, _ops._ForwardFunction)."""

    @staticmethod
    def forward(ctx, name, run, *inputs):
        ctx.spec_name = name
        o, fs, fps = run()
        return (o,) + tuple(x for x in (fs, fps) if x is not None)

    @staticmethod
    def backward(ctx, *grads):
        raise RuntimeError(f"dgps: no backward pass for spec '{ctx.spec_name}' yet (DGPS generates forward "
                           "and decode kernels only; run it under torch.no_grad() or detach its inputs)")


def forward_autograd(name, run, inputs):
    """run() -> (o, final_state or None, final_precond_state or None), through _NoBackward when some input
    requires grad."""
    from . import _ops
    if not _ops.needs_autograd(inputs):
        return run()
    holder = {}

    def recorded():
        out = run()
        holder["present"] = (out[1] is not None, out[2] is not None)
        return out

    out = list(_NoBackward.apply(name, recorded, *inputs))
    o = out.pop(0)
    has_fs, has_fps = holder["present"]
    return o, (out.pop(0) if has_fs else None), (out.pop(0) if has_fps else None)
