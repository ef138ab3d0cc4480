"""OSDN: a DeltaNet layer with the online hypergradient (OGD) diagonal preconditioner, over the DGPS
`osdn` package (or `osdn_apf` with APF retention). flash-linear-attention has no OSDN layer; this one
follows its DeltaNet/GatedDeltaNet layout (projections, short convolutions, gated output norm):
    beta = sigmoid(b_proj(x))                                         [B,T,HV]
    precond_g = -exp(A_log_atk) * softplus(a_atk_proj(x) + dt_bias_atk)  [B,T,H]  (osdn_apf only: the
                                                                      log retention of the preconditioner)
There is no state decay (the spec's decay is none).
"""
import torch
import torch.nn as nn

from ._base import DgpsLayer
from ._modules import inverse_softplus_dt, log_decay


class OSDN(DgpsLayer):
    spec = "osdn"

    def __init__(self, hidden_size=2048, expand_v=1, head_dim=128, num_heads=6, num_v_heads=None, mode="chunk",
                 use_gate=True, use_short_conv=True, allow_neg_eigval=False, conv_size=4, conv_bias=False,
                 layer_idx=None, norm_eps=1e-5, retention=False, spec=None, **kwargs):
        super().__init__(hidden_size, head_dim, num_heads, expand_v, num_v_heads, use_gate, use_short_conv,
                         conv_size, conv_bias, norm_eps, layer_idx, spec or ("osdn_apf" if retention else "osdn"),
                         allow_neg_eigval, mode)
        self.retention = self.op.info["hypergrad_retention"]
        self.b_proj = nn.Linear(hidden_size, self.num_v_heads, bias=False)
        if self.retention:
            H = self.num_heads
            self.a_atk_proj = nn.Linear(hidden_size, H, bias=False)
            self.A_log_atk = nn.Parameter(torch.empty(H).uniform_(0, 16).log())
            self.dt_bias_atk = nn.Parameter(inverse_softplus_dt(H))
            self.A_log_atk._no_weight_decay = self.dt_bias_atk._no_weight_decay = True
        self.make_output_norm(norm_eps)

    def gates(self, x):
        d = dict(beta=self.b_proj(x).float().sigmoid())
        if self.retention:
            d["precond_g"] = log_decay(self.A_log_atk, self.a_atk_proj(x), self.dt_bias_atk)
        return d
