"""KDA (Kimi Delta Attention): FLA's layer (fla/layers/kda.py) over the DGPS `kda` package, with the same
parameters. The decay is diagonal, one natural-log rate per key channel:
    g = -exp(A_log[h]) * softplus(f_proj(x) + dt_bias)      [B,T,HV,K] float32
    beta = sigmoid(b_proj(x))                               [B,T,HV]
The output norm gates with a sigmoid of g_proj(x) (a low-rank projection with a bias).
FLA's optional `safe_gate` / `lower_bound` parametrisation is not offered.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

from ._base import DgpsLayer
from ._modules import GatedRMSNorm, inverse_softplus_dt


class KDA(DgpsLayer):
    spec = "kda"
    norm_activation = "sigmoid"

    def __init__(self, hidden_size=2048, expand_v=1, head_dim=128, num_heads=16, num_v_heads=None, mode="chunk",
                 use_short_conv=True, allow_neg_eigval=False, safe_gate=False, lower_bound=None, conv_size=4,
                 conv_bias=False, layer_idx=None, norm_eps=1e-5, spec=None, **kwargs):
        if safe_gate or lower_bound is not None:
            raise ValueError("KDA: safe_gate / lower_bound gate parametrisations are not supported")
        super().__init__(hidden_size, head_dim, num_heads, expand_v, num_v_heads, True, use_short_conv, conv_size,
                         conv_bias, norm_eps, layer_idx, spec, allow_neg_eigval, mode)
        HV, K, V = self.num_v_heads, self.head_k_dim, self.head_v_dim
        self.gate_dim = HV * K
        self.f_proj = nn.Sequential(nn.Linear(hidden_size, V, bias=False), nn.Linear(V, self.gate_dim, bias=False))
        self.b_proj = nn.Linear(hidden_size, HV, bias=False)
        self.A_log = nn.Parameter(torch.empty(HV).uniform_(1, 16).log())
        self.dt_bias = nn.Parameter(inverse_softplus_dt(self.gate_dim))
        self.A_log._no_weight_decay = self.dt_bias._no_weight_decay = True
        self.g_proj = nn.Sequential(nn.Linear(hidden_size, V, bias=False), nn.Linear(V, self.value_dim, bias=True))
        self.o_norm = GatedRMSNorm(V, eps=norm_eps, activation="sigmoid")

    def gates(self, x):
        B, T = x.shape[:2]
        HV, K = self.num_v_heads, self.head_k_dim
        f = (self.f_proj(x).float() + self.dt_bias.float()).view(B, T, HV, K)
        g = -self.A_log.float().exp().view(HV, 1) * F.softplus(f)
        return dict(g=g, beta=self.b_proj(x).float().sigmoid())
