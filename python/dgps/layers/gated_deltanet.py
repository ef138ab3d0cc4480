"""GatedDeltaNet and PreconditionedGatedDeltaNet: FLA's layers (fla/layers/gated_deltanet.py,
precond_gated_deltanet.py) over the DGPS `gdn` and `pgdn` packages, with the same parameters.

Gates (float32): g = -exp(A_log) * softplus(a_proj(x) + dt_bias)   [B,T,HV] natural-log decay
                 beta = sigmoid(b_proj(x))                          [B,T,HV]
PGDN adds the squash accumulator's own gate and gain per key head and the learnable centre:
                 precond_g = -exp(A_log_atk) * softplus(a_atk_proj(x) + dt_bias_atk)   [B,T,H]
                 precond_beta = sigmoid(b_atk_proj(x))                                 [B,T,H]
                 precond_center = log_atk_scale                                        [H]
"""
import torch
import torch.nn as nn

from ._base import DgpsLayer
from ._modules import inverse_softplus_dt, log_decay


class GatedDeltaNet(DgpsLayer):
    spec = "gdn"

    def __init__(self, hidden_size=2048, expand_v=1, head_dim=128, num_heads=6, num_v_heads=None, mode="chunk",
                 use_gate=True, use_short_conv=True, allow_neg_eigval=False, conv_size=4, conv_bias=False,
                 layer_idx=None, norm_eps=1e-5, spec=None, **kwargs):
        super().__init__(hidden_size, head_dim, num_heads, expand_v, num_v_heads, use_gate, use_short_conv,
                         conv_size, conv_bias, norm_eps, layer_idx, spec, allow_neg_eigval, mode)
        self.a_proj = nn.Linear(hidden_size, self.num_v_heads, bias=False)
        self.b_proj = nn.Linear(hidden_size, self.num_v_heads, bias=False)
        self.A_log = nn.Parameter(torch.empty(self.num_v_heads).uniform_(0, 16).log())
        self.dt_bias = nn.Parameter(inverse_softplus_dt(self.num_v_heads))
        self.A_log._no_weight_decay = self.dt_bias._no_weight_decay = True
        self.make_output_norm(norm_eps)

    def gates(self, x):
        return dict(g=log_decay(self.A_log, self.a_proj(x), self.dt_bias), beta=self.b_proj(x).float().sigmoid())


class PreconditionedGatedDeltaNet(GatedDeltaNet):
    spec = "pgdn"

    def __init__(self, hidden_size=2048, expand_v=1, head_dim=128, num_heads=6, num_v_heads=None, mode="chunk",
                 use_gate=True, use_short_conv=True, allow_neg_eigval=False, conv_size=4, conv_bias=False,
                 layer_idx=None, norm_eps=1e-5, squash_x=1.5, squash_eps=1e-6, log_atk_scale_init=-0.2, spec=None,
                 **kwargs):
        super().__init__(hidden_size, expand_v, head_dim, num_heads, num_v_heads, mode, use_gate, use_short_conv,
                         allow_neg_eigval, conv_size, conv_bias, layer_idx, norm_eps, spec)
        # x and eps of the squash are fixed by the spec; refuse a layer that asks for others.
        spec_squash = self._spec_squash()
        if spec_squash and (abs(squash_x - spec_squash[0]) > 1e-12 or abs(squash_eps - spec_squash[1]) > 1e-15):
            raise ValueError(f"PreconditionedGatedDeltaNet: spec '{self.spec_name}' fixes squash x={spec_squash[0]}, "
                             f"eps={spec_squash[1]}; got squash_x={squash_x}, squash_eps={squash_eps}")
        H = self.num_heads
        self.a_atk_proj = nn.Linear(hidden_size, H, bias=False)
        self.b_atk_proj = nn.Linear(hidden_size, H, bias=False)
        self.log_atk_scale = nn.Parameter(torch.full((H,), float(log_atk_scale_init)))
        self.A_log_atk = nn.Parameter(torch.empty(H).uniform_(0, 16).log())
        self.dt_bias_atk = nn.Parameter(inverse_softplus_dt(H))
        for p in (self.log_atk_scale, self.A_log_atk, self.dt_bias_atk):
            p._no_weight_decay = True

    def _spec_squash(self):
        info = self.op.info
        return (info["squash_x"], info["squash_eps"]) if info["precond_source"] == "ema_sq_squash" else None

    def gates(self, x):
        d = super().gates(x)
        d["precond_g"] = log_decay(self.A_log_atk, self.a_atk_proj(x), self.dt_bias_atk)
        d["precond_beta"] = self.b_atk_proj(x).float().sigmoid()
        d["precond_center"] = self.log_atk_scale
        return d
