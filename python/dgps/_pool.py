"""Decode against a caller-owned state pool (continuous batching), around the runtime's dense decode.

The decode kernel (Runtime::decode) reads and writes a [B,...] state. Rows of a [P,...] pool named by
``state_indices`` (-1: padding) are gathered, decoded and scattered back with torch ops, without a host
sync, so the step can be captured in a CUDA graph and traced by torch.compile. An indexed pool inside the
kernel, which would save the gather and the scatter, is future work (docs/python.md).
"""
import torch

from . import _ops


def check_state_indices(idx, rows):
    """Raises InvalidArgument unless every entry is -1 or a distinct row in [0, rows). Reads the indices
    back to the host (a sync), so callers skip it under capture and tracing."""
    from ._native import native
    bad = (idx < -1) | (idx >= rows)
    if bool(bad.any()):
        raise native.InvalidArgument(f"dgps.decode: state_indices {idx[bad].tolist()} out of range: entries "
                                     f"are -1 (padding) or a row of the pool in [0, {rows})")
    valid = idx[idx >= 0]
    if valid.unique().numel() != valid.numel():
        raise native.InvalidArgument(f"dgps.decode: state_indices {idx.tolist()} name a row twice; each "
                                     "sequence needs its own row of the pool")


def decode_pool(key, per_row, center, state_pool, precond_state_pool, idx):
    """Gather -> decode -> scatter over a state pool, without a host sync.

    Padding entries (index -1) must neither change any row nor race with a valid entry. Each padding
    entry is made a copy of the first valid entry (same inputs, same row), so it computes bit-identical
    values and its duplicate write-back is harmless. When no entry is valid, every entry reads row 0 and
    gets the identity inputs (zero keys, values, log-decays and gains), which leave the state unchanged.
    """
    B = idx.shape[0]
    valid = idx >= 0
    any_valid = valid.any()
    first = valid.to(torch.int32).argmax()  # first valid entry, 0 when none
    rows = torch.where(valid, torch.arange(B, device=idx.device), first)
    target = idx.index_select(0, rows).clamp(min=0)
    inputs = [None if x is None else torch.where(any_valid, x.index_select(0, rows), torch.zeros_like(x))
              for x in per_row]
    state = state_pool.index_select(0, target)
    pstate = (precond_state_pool.index_select(0, target) if precond_state_pool is not None
              else state_pool.new_empty((0,)))
    o = _ops.decode_op(key, *inputs, center, state, pstate)
    state_pool.index_copy_(0, target, state)
    if precond_state_pool is not None:
        precond_state_pool.index_copy_(0, target, pstate)
    return torch.where(valid.view(B, 1, 1, 1), o, torch.zeros_like(o))
