"""The skeleton shared by every DGPS layer, in flash-linear-attention's shape:

  x [B,T,hidden] -> q,k,v projections -> short causal convolutions (+SiLU) -> heads
                 -> gates (subclass: decay, gain, preconditioner inputs)
                 -> the DGPS recurrence (a generated package, dgps.load(spec))
                 -> gated RMS norm per head (o_norm) -> o_proj
Padding masks ([B,T], 1 = token) are handled by packing the kept tokens into one varlen call. With cp_group
each rank holds a piece of the packed tokens (context parallelism: the convolutions' halo in _halo.py, the
recurrence's exchange in the op). Subclasses add their gate parameters and implement ``gates(x)``.
"""
import math

import torch.nn as nn
import torch.nn.functional as F

from ..op import load
from ._halo import extend_piece
from ._modules import GatedRMSNorm, RMSNorm, ShortConvolution, repad, unpad


class DgpsLayer(nn.Module):
    spec = None            # default spec name (a shipped package)
    norm_activation = "swish"

    def __init__(self, hidden_size, head_dim, num_heads, expand_v, num_v_heads=None, use_gate=True,
                 use_short_conv=True, conv_size=4, conv_bias=False, norm_eps=1e-5, layer_idx=None, spec=None,
                 allow_neg_eigval=False, mode="chunk", **kwargs):
        super().__init__()
        self.spec_name = spec or self.spec
        self.op = load(self.spec_name)
        info = self.op.info
        self.hidden_size, self.head_dim, self.num_heads = hidden_size, head_dim, num_heads
        self.num_v_heads = num_v_heads if num_v_heads is not None else num_heads
        self.head_k_dim, self.head_v_dim = head_dim, int(head_dim * expand_v)
        if not math.isclose(head_dim * expand_v, self.head_v_dim, rel_tol=1e-5):
            raise ValueError(f"{type(self).__name__}: head_dim * expand_v = {head_dim * expand_v} is not an integer")
        if self.head_k_dim not in info["key_dims"] or self.head_v_dim not in info["value_dims"]:
            raise ValueError(f"{type(self).__name__}: spec '{self.spec_name}' supports head_dim (K) in "
                             f"{info['key_dims']} and head_v_dim (V) in {info['value_dims']}; got K={self.head_k_dim}, "
                             f"V={self.head_v_dim}")
        if self.num_v_heads != self.num_heads * info["gva_ratio"]:
            raise ValueError(f"{type(self).__name__}: spec '{self.spec_name}' has gva_ratio {info['gva_ratio']}, so "
                             f"num_v_heads must be {self.num_heads * info['gva_ratio']}, got {self.num_v_heads}")
        if allow_neg_eigval:
            raise ValueError(f"{type(self).__name__}: allow_neg_eigval (beta in [0,2]) is outside spec "
                             f"'{self.spec_name}''s gain range {info['gain_range']}")
        self.key_dim, self.value_dim = num_heads * head_dim, self.num_v_heads * self.head_v_dim
        self.use_gate, self.use_short_conv, self.layer_idx, self.mode = use_gate, use_short_conv, layer_idx, mode

        self.q_proj = nn.Linear(hidden_size, self.key_dim, bias=False)
        self.k_proj = nn.Linear(hidden_size, self.key_dim, bias=False)
        self.v_proj = nn.Linear(hidden_size, self.value_dim, bias=False)
        if use_short_conv:
            self.q_conv1d = ShortConvolution(self.key_dim, conv_size, conv_bias)
            self.k_conv1d = ShortConvolution(self.key_dim, conv_size, conv_bias)
            self.v_conv1d = ShortConvolution(self.value_dim, conv_size, conv_bias)
        self.o_proj = nn.Linear(self.value_dim, hidden_size, bias=False)

    def make_output_norm(self, norm_eps):
        """o_norm (and g_proj when gated), as FLA's GatedDeltaNet builds them."""
        if self.use_gate:
            self.g_proj = nn.Linear(self.hidden_size, self.value_dim, bias=False)
            self.o_norm = GatedRMSNorm(self.head_v_dim, eps=norm_eps, activation=self.norm_activation)
        else:
            self.o_norm = RMSNorm(self.head_v_dim, eps=norm_eps)

    def gates(self, x):
        """{name: tensor} of the op's gate inputs for hidden states x [B,T,hidden] (float32)."""
        raise NotImplementedError

    def output_gate(self, x):
        return self.g_proj(x) if self.use_gate else None

    def recurrence(self, q, k, v, gates, cu_seqlens, **context_parallel):
        """The DGPS op (tests swap in the float64 reference here); context_parallel: cp_group and
        cp_bounds of a context-parallel call, passed only when cp_group is given."""
        o, _, _ = self.op(q, k, v, cu_seqlens=cu_seqlens, **gates, **context_parallel)
        return o

    def _check_context_parallel(self, attention_mask):
        if attention_mask is not None:
            raise ValueError(f"{type(self).__name__}: cp_group with an attention_mask: pass this rank's piece of "
                             "the packed tokens and the global cu_seqlens instead of a padding mask")

    def _qkv_context_parallel(self, x, cu_seqlens, cp_group, cp_bounds):
        """q, k, v of this rank's piece; the short convolutions see the tokens before it (_halo.py)."""
        if not self.use_short_conv:
            return self._qkv(x, None)  # per token: nothing to exchange
        halo = self.q_conv1d.kernel_size[0] - 1
        x_ext, cu_ext, h = extend_piece(x, halo, cu_seqlens, cp_group, cp_bounds, type(self).__name__)
        return tuple(t[:, h:] for t in self._qkv(x_ext, cu_ext))

    def _qkv(self, x, cu_seqlens):
        q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)
        if self.use_short_conv:
            q, k, v = (self.q_conv1d(q, cu_seqlens), self.k_conv1d(k, cu_seqlens), self.v_conv1d(v, cu_seqlens))
        else:
            q, k, v = F.silu(q), F.silu(k), F.silu(v)
        B, T = x.shape[:2]
        return (q.view(B, T, self.num_heads, self.head_k_dim), k.view(B, T, self.num_heads, self.head_k_dim),
                v.view(B, T, self.num_v_heads, self.head_v_dim))

    def forward(self, hidden_states, attention_mask=None, past_key_values=None, use_cache=False,
                output_attentions=False, cu_seqlens=None, cp_group=None, cp_bounds=None, **kwargs):
        """Returns (o [B,T,hidden], None, past_key_values), as FLA's layers do. Caches (use_cache) are
        not kept: serve decode through ``self.op.decode`` with a state pool (docs/python.md).

        cp_group (a torch.distributed ProcessGroup): context parallelism, as the op's (Op.__call__):
        hidden_states [1, T_r, hidden] is this rank's contiguous piece of the packed tokens, cu_seqlens the
        global documents' offsets (or None: one sequence), cp_bounds the optional split; o comes back for the
        rank's tokens. Projections and gates are per token; the short convolutions get the conv_size - 1 tokens
        before the piece from the earlier ranks (one all-gather, _halo.py), the recurrence exchanges its
        summaries (the op). A padding mask is refused (pack the tokens and pass cu_seqlens)."""
        if cp_group is not None:
            self._check_context_parallel(attention_mask)
        elif cp_bounds is not None:
            raise ValueError(f"{type(self).__name__}: cp_bounds is given without cp_group")
        if use_cache:
            raise NotImplementedError(f"{type(self).__name__}: use_cache is not supported; decode with "
                                      "layer.op.decode(..., state_pool=..., state_indices=...)")
        B, T, _ = hidden_states.shape
        x, indices = hidden_states, None
        if attention_mask is not None:
            if attention_mask.dim() != 2:
                raise ValueError("attention_mask must be a [batch, seq_len] 0/1 padding mask")
            x, indices, cu_seqlens = unpad(hidden_states, attention_mask[:, -T:])
        if cp_group is None:
            q, k, v = self._qkv(x, cu_seqlens)
        else:
            q, k, v = self._qkv_context_parallel(x, cu_seqlens, cp_group, cp_bounds)
        cp = {} if cp_group is None else dict(cp_group=cp_group, cp_bounds=cp_bounds)
        o = self.recurrence(q, k, v, self.gates(x), cu_seqlens, **cp)
        gate = self.output_gate(x)
        if gate is not None:
            o = self.o_norm(o, gate.view(*o.shape))
        else:
            o = self.o_norm(o)
        o = self.o_proj(o.flatten(-2))
        if indices is not None:
            o = repad(o, indices, B, T)
        return o, None, past_key_values
