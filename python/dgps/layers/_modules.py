"""Building blocks of the DGPS layers, parameter-compatible with flash-linear-attention's modules (the
same parameter names and shapes, so a state dict loads either way), written in plain torch.

  ShortConvolution  depthwise causal conv1d over time + SiLU (an nn.Conv1d: weight [D,1,W], bias [D])
  GatedRMSNorm      y = x / rms(x) * weight * act(gate), act = SiLU ("swish") or sigmoid, in float32
  RMSNorm           y = x / rms(x) * weight, in float32
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


def positions_in_sequence(T, cu_seqlens, device):
    """[T] position of each packed token inside its own sequence (0 at every sequence start)."""
    t = torch.arange(T, device=device)
    if cu_seqlens is None:
        return t
    starts = cu_seqlens[:-1]
    seq = torch.searchsorted(cu_seqlens[1:], t, right=True)
    return t - starts.index_select(0, seq)


class ShortConvolution(nn.Conv1d):
    """Causal depthwise convolution of width W along time, then SiLU. With ``cu_seqlens`` (packed
    sequences, B == 1) the window never reaches across a sequence start."""

    def __init__(self, hidden_size, kernel_size=4, bias=False, activation="silu"):
        super().__init__(hidden_size, hidden_size, kernel_size, groups=hidden_size, bias=bias,
                         padding=kernel_size - 1)
        if activation not in ("silu", "swish", None):
            raise ValueError(f"ShortConvolution: activation {activation!r} (expected 'silu' or None)")
        self.hidden_size, self.activation = hidden_size, activation

    def forward(self, x, cu_seqlens=None):  # x [B,T,D]
        B, T, D = x.shape
        W = self.kernel_size[0]
        dtype, x = x.dtype, x.float()  # accumulate in float32 like FLA's kernels
        w = self.weight.squeeze(1).float()  # [D,W]; output t sums w[:, j] * x[t - (W-1) + j]
        pos = positions_in_sequence(T, cu_seqlens, x.device)
        y = x * w[:, W - 1]
        for s in range(1, W):  # tap reaching s tokens back
            shifted = F.pad(x, (0, 0, s, 0))[:, :T]
            keep = (pos >= s).float().view(1, T, 1)
            y = y + shifted * keep * w[:, W - 1 - s]
        if self.bias is not None:
            y = y + self.bias.float()
        return (F.silu(y) if self.activation else y).to(dtype)


class RMSNorm(nn.Module):
    def __init__(self, hidden_size, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(hidden_size))

    def forward(self, x):
        xf = x.float()
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight.float()
        return y.to(x.dtype)


class GatedRMSNorm(RMSNorm):
    def __init__(self, hidden_size, eps=1e-5, activation="swish"):
        super().__init__(hidden_size, eps)
        if activation not in ("swish", "silu", "sigmoid"):
            raise ValueError(f"GatedRMSNorm: activation {activation!r} (expected swish, silu or sigmoid)")
        self.activation = activation

    def forward(self, x, gate):
        xf, gf = x.float(), gate.float()
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight.float()
        act = torch.sigmoid(gf) if self.activation == "sigmoid" else F.silu(gf)
        return (y * act).to(x.dtype)


def inverse_softplus_dt(n, dt_min=0.001, dt_max=0.1, floor=1e-4):
    """Mamba-style time-step bias: softplus(bias) is log-uniform in [dt_min, dt_max]."""
    import math
    dt = torch.exp(torch.rand(n) * (math.log(dt_max) - math.log(dt_min)) + math.log(dt_min)).clamp(min=floor)
    return dt + torch.log(-torch.expm1(-dt))


def log_decay(A_log, x, dt_bias):
    """Natural-log decay g = -exp(A_log) * softplus(x + dt_bias), float32 (<= 0)."""
    return -A_log.float().exp() * F.softplus(x.float() + dt_bias.float())


def unpad(hidden_states, attention_mask):
    """[B,T,D] with a 0/1 mask [B,T] -> packed [1,total,D], the kept indices and cu_seqlens (int64)."""
    mask = attention_mask.bool()
    lengths = mask.sum(-1)
    indices = mask.flatten().nonzero().squeeze(-1)
    cu = F.pad(lengths.cumsum(0), (1, 0)).to(torch.int64)
    packed = hidden_states.flatten(0, 1).index_select(0, indices).unsqueeze(0)
    return packed, indices, cu


def repad(x, indices, B, T):
    out = x.new_zeros((B * T,) + tuple(x.shape[2:]))
    out.index_copy_(0, indices, x.squeeze(0))
    return out.view(B, T, *x.shape[2:])
