"""Drop-in nn.Modules over DGPS packages, parameter-compatible with flash-linear-attention's layers:
GatedDeltaNet (gdn), PreconditionedGatedDeltaNet (pgdn), KDA (kda), OSDN (osdn / osdn_apf).
``layer.load_state_dict(fla_layer.state_dict())`` carries a trained FLA layer over (docs/python.md)."""
from .gated_deltanet import GatedDeltaNet, PreconditionedGatedDeltaNet
from .kda import KDA
from .osdn import OSDN

__all__ = ["GatedDeltaNet", "PreconditionedGatedDeltaNet", "KDA", "OSDN"]
