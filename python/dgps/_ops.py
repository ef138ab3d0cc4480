"""The torch operators behind ``Op.__call__`` and ``Op.decode``.

Two functional kernels, registered as ``torch.library`` custom ops on torch >= 2.4 so that
``torch.compile(fullgraph=True)`` traces them as single nodes (their fake implementations give output
shapes without touching the GPU) and CUDA graphs capture them:

  dgps::forward      (key, q, k, v, gates..., initial states, cu_seqlens, want_final) -> (o, final_state,
                     final_precond_state); absent outputs are empty tensors of shape [0].
  dgps::decode_step  (key, q, k, v, gates..., state, precond_state) -> o; updates ``state`` and
                     ``precond_state`` in place (declared as mutated), T tokens one after another.

Capture safety: every buffer (outputs, the forward's workspace) comes from torch's caching allocator,
the launch goes to torch's current stream, and nothing reads device memory back to the host. The
first call of a new shape JIT-compiles (or loads from the disk cache) before its launch, so run one
call outside capture first (docs/python.md).

``key`` names an ``Op`` in ``_OPS`` (its package folder and tile configuration): custom-op schemas carry
strings, not Python objects. On torch < 2.4 the same functions are called directly (eager only).
"""
import warnings
from typing import List, Optional, Tuple

import torch

from ._tensors import DECODE_SLOTS, FORWARD_SLOTS, current_stream, view, views

_OPS = {}  # key -> dgps.op.Op


def register(op):
    _OPS[op.key] = op


def _empty(like):
    return like.new_empty((0,), dtype=torch.float32)


def _workspace(nbytes, device):
    """Scratch of at least ``nbytes`` at a 256-byte aligned address (the runtime's requirement), from
    torch's allocator so graph capture stays legal. int64 words: views have no byte type, and the
    workspace may have any dtype. The slack makes the alignment independent of the allocator's."""
    words = (nbytes + 7) // 8
    buf = torch.empty((words + 32,), dtype=torch.int64, device=device)
    skip = (-buf.data_ptr()) % 256 // 8
    return buf[skip:skip + words]


def _forward_shapes(op, q, v, cu_seqlens):
    B, T, H, K = q.shape
    HV, V = v.shape[2], v.shape[3]
    N = cu_seqlens.shape[0] - 1 if cu_seqlens is not None else B
    return B, T, H, K, HV, V, N


def _forward_outputs(op, q, v, cu_seqlens, want_final):
    B, T, H, K, HV, V, N = _forward_shapes(op, q, v, cu_seqlens)
    o = q.new_empty((B, T, HV, V))
    info = op.info
    fs = q.new_empty((N, HV, K, V), dtype=torch.float32) if want_final and info["final_state"] else _empty(q)
    has_precond_state = info["final_precond_state"] and info["precond"] != "none"
    fps = q.new_empty((N, H, K), dtype=torch.float32) if want_final and has_precond_state else _empty(q)
    return o, fs, fps


def forward_impl(key: str, q, k, v, g, beta, precond_g, precond_beta, precond_center, initial_state,
                 initial_precond_state, cu_seqlens, want_final: bool):
    op = _OPS[key]
    o, fs, fps = _forward_outputs(op, q, v, cu_seqlens, want_final)
    tensors = dict(q=q, k=k, v=v, g=g, beta=beta, precond_g=precond_g, precond_beta=precond_beta,
                   precond_center=precond_center, initial_state=initial_state,
                   initial_precond_state=initial_precond_state, cu_seqlens=cu_seqlens, o=o,
                   final_state=fs if fs.numel() else None, final_precond_state=fps if fps.numel() else None)
    vs = views(tensors, FORWARD_SLOTS)
    nbytes = op.workspace_bytes(vs)
    if nbytes:
        vs[-1] = view(_workspace(nbytes, q.device))
    op.runtime.forward(op.package, vs, current_stream(q.device), op.config)
    return o, fs, fps


def forward_fake(key: str, q, k, v, g, beta, precond_g, precond_beta, precond_center, initial_state,
                 initial_precond_state, cu_seqlens, want_final: bool):
    return _forward_outputs(_OPS[key], q, v, cu_seqlens, want_final)


# Positions in a decode's per-token tuple (q, k, v, g, beta, precond_g, precond_beta) of the tensors with one row
# per Householder step (info["steps"] rows per token: [B,T*n_h,...]).
STEP_ROWS = (1, 2, 4)


def token_rows(per_token, t, steps, contiguous=True):
    """Token t of each [B,T,...] tensor (rows t*steps .. t*steps+steps-1 of the per-step ones); contiguous copies
    (each its own aligned tensor) unless `contiguous` is False (views, for shape checks)."""
    def rows(i, x):
        r = x[:, t * steps:(t + 1) * steps] if i in STEP_ROWS else x[:, t:t + 1]
        return r.contiguous() if contiguous else r
    return tuple(None if x is None else rows(i, x) for i, x in enumerate(per_token))


def decode_impl(key: str, q, k, v, g, beta, precond_g, precond_beta, precond_center, state, precond_state):
    """T = q.shape[1] single-token steps, in order, on [B,T,...] inputs (k, v and beta with info["steps"] rows per
    token); state rows are updated in place."""
    op = _OPS[key]
    B, T = q.shape[0], q.shape[1]
    HV, V = v.shape[2], v.shape[3]
    stream = current_stream(q.device)
    pstate = precond_state if precond_state.numel() else None
    per_token = (q, k, v, g, beta, precond_g, precond_beta)
    if T == 1:
        o = q.new_empty((B, 1, HV, V))
        steps = [(per_token, o)]
    else:
        # Token t of every row, each its own contiguous (and so aligned) tensor: [B,1,...] slices of the
        # packed [B,T,...] inputs would be strided.
        outs = [q.new_empty((B, 1, HV, V)) for _ in range(T)]
        steps = [(token_rows(per_token, t, op.info["steps"]), outs[t]) for t in range(T)]
    for (qt, kt, vt, gt, bt, pgt, pbt), ot in steps:
        tensors = dict(q=qt, k=kt, v=vt, g=gt, beta=bt, precond_g=pgt, precond_beta=pbt,
                       precond_center=precond_center, state=state, precond_state=pstate, o=ot)
        op.runtime.decode(op.package, views(tensors, DECODE_SLOTS), stream)
    return o if T == 1 else torch.cat(outs, dim=1)


def decode_fake(key: str, q, k, v, g, beta, precond_g, precond_beta, precond_center, state, precond_state):
    return q.new_empty((q.shape[0], q.shape[1], v.shape[2], v.shape[3]))


def _register_custom_ops():
    """(forward_op, decode_op) as torch.library custom ops with fake implementations (torch >= 2.4)."""
    T_ = torch.Tensor
    O_ = Optional[torch.Tensor]

    @torch.library.custom_op("dgps::forward", mutates_args=())
    def _forward_op(key: str, q: T_, k: T_, v: T_, g: O_, beta: O_, precond_g: O_, precond_beta: O_,
                    precond_center: O_, initial_state: O_, initial_precond_state: O_, cu_seqlens: O_,
                    want_final: bool) -> Tuple[T_, T_, T_]:
        return forward_impl(key, q, k, v, g, beta, precond_g, precond_beta, precond_center, initial_state,
                            initial_precond_state, cu_seqlens, want_final)

    _forward_op.register_fake(forward_fake)

    @torch.library.custom_op("dgps::decode_step", mutates_args=("state", "precond_state"))
    def _decode_op(key: str, q: T_, k: T_, v: T_, g: O_, beta: O_, precond_g: O_, precond_beta: O_,
                   precond_center: O_, state: T_, precond_state: T_) -> T_:
        return decode_impl(key, q, k, v, g, beta, precond_g, precond_beta, precond_center, state, precond_state)

    _decode_op.register_fake(decode_fake)
    return _forward_op, _decode_op


# On torch < 2.4 (Debian 12's 1.13) the functions are called directly: eager only, no torch.compile
# integration. A registration that fails on a newer torch keeps the package usable in eager mode and is
# reported here and by the torch.compile tests, never silently.
HAS_CUSTOM_OP = False
CUSTOM_OP_ERROR = None
forward_op, decode_op = forward_impl, decode_impl
if hasattr(torch.library, "custom_op") and hasattr(torch.library, "register_fake"):
    try:
        forward_op, decode_op = _register_custom_ops()
        HAS_CUSTOM_OP = True
    except Exception as e:  # noqa: BLE001 (any failure: report it, keep eager mode working)
        CUSTOM_OP_ERROR = f"{type(e).__name__}: {e}"
        warnings.warn(f"dgps: registering the torch.library custom ops failed ({CUSTOM_OP_ERROR}); "
                      "torch.compile and CUDA graphs of models calling DGPS will not work")


class _ForwardFunction(torch.autograd.Function):
    """Autograd entry of the forward: DGPS has no backward kernels yet, so backward names the spec."""

    @staticmethod
    def forward(ctx, key, want_final, *tensors):
        ctx.spec_name = _OPS[key].name
        return forward_op(key, *tensors, want_final)

    @staticmethod
    def backward(ctx, *grads):
        raise RuntimeError(f"dgps: no backward pass for spec '{ctx.spec_name}' yet (DGPS generates forward "
                           "and decode kernels only; run it under torch.no_grad() or detach its inputs)")


def needs_autograd(tensors: List[Optional[torch.Tensor]]) -> bool:
    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)


def forward(key, tensors, want_final):
    """Runs dgps::forward, through the autograd.Function when some input requires grad."""
    if needs_autograd(tensors):
        return _ForwardFunction.apply(key, want_final, *tensors)
    return forward_op(key, *tensors, want_final)
