"""The short convolution's halo under context parallelism: a rank's first tokens need the W - 1 tokens before
its piece (W: the convolution width), which earlier ranks hold. Every rank all-gathers its last W - 1 hidden
states over cp_group; each rank prepends the ones before its piece (from one or several earlier ranks, when
a rank holds fewer than W - 1 tokens), runs its projections and convolutions on the extended piece with
cu_seqlens cut to it (so no window reaches across a document start), and drops the halo's rows.

The exchange carries a status word per rank, so a rank that cannot find its piece in the split (its
cp_bounds, cu_seqlens or token count disagree) still joins it, and every rank raises together instead of
waiting in the op's exchange that the failed rank would never reach."""
import torch

from .._context_parallel import all_gather_rows, global_cu_seqlens, group_shape, rank_bounds


def _halo_dtype(dtype):
    """Exchanged exactly: float32/float64 as they are, half types through float32 (exact)."""
    return dtype if dtype in (torch.float32, torch.float64) else torch.float32


def extend_piece(x, halo, cu_seqlens, group, cp_bounds, who):
    """x [1, T_r, hidden] this rank's hidden states; halo = W - 1 tokens. Returns (x_ext [1, h + T_r, hidden],
    cu_ext (int64 tensor on x's device, or None for one sequence), h): the h = min(halo, first token) tokens
    before the piece, then the piece; cu_ext holds the global documents' starts inside the extended range,
    shifted to it, and its end."""
    G, rank = group_shape(group)
    T_r, hidden = (x.shape[1] if x.dim() == 3 else 0), x.shape[-1]
    dtype = _halo_dtype(x.dtype)
    send = torch.zeros((1 + halo * hidden,), dtype=dtype, device=x.device)
    error = None
    try:
        if x.dim() != 3 or x.shape[0] != 1:
            raise ValueError(f"{who}: with cp_group, hidden_states must be this rank's piece [1, T_r, hidden], "
                             f"got {list(x.shape)}")
        cu = global_cu_seqlens(cu_seqlens)
        bounds = rank_bounds(cp_bounds, G, rank, T_r, cu)
        m = min(halo, T_r)
        if m:
            send[1 + (halo - m) * hidden:] = x[0, T_r - m:].reshape(-1).to(dtype)
        send[0] = 1  # this rank's tail is valid
    except Exception as e:  # noqa: BLE001 (tell the other ranks, then raise it here)
        error = e
    tails = all_gather_rows(send, G, group).to(x.device)
    if error is not None:
        raise error
    failed = [j for j in range(G) if tails[j, 0].item() != 1]
    if failed:
        raise ValueError(f"{who} (context parallel, rank {rank}): rank {failed[0]} refused its arguments before "
                         "the short convolution's exchange (its own error names the problem)")
    tails = tails[:, 1:].view(G, halo, hidden)
    begin, end = bounds[rank], bounds[rank + 1]
    h = min(halo, begin)
    rows = []
    for t in range(begin - h, begin):
        j = max(r for r in range(G) if bounds[r] <= t < bounds[r + 1])  # the rank holding token t
        rows.append(tails[j, halo - (bounds[j + 1] - t)])
    x_ext = torch.cat([torch.stack(rows).to(x.dtype).unsqueeze(0), x], dim=1) if rows else x
    cu_ext = None
    if cu is not None:
        s = begin - h
        inner = [c - s for c in cu if s < c < end]
        cu_ext = torch.tensor([0] + inner + [end - s], dtype=torch.int64, device=x.device)
    return x_ext, cu_ext, h
