"""DGPS from Python: generated linear-recurrence kernels (GDN, KDA, PGDN, OSDN, ...) as torch ops.

    import dgps
    op = dgps.load("pgdn")                                   # generated/pgdn, JIT-compiled on first use
    o, final_state, final_precond_state = op(q, k, v, g=g, beta=beta, precond_g=pg, precond_beta=pb,
                                             output_final_state=True)
    o = op.decode(q1, k1, v1, g=g1, beta=b1, ..., state_pool=pool, state_indices=idx, precond_state_pool=pp)

See docs/python.md. Errors are DgpsError (a RuntimeError) with the runtime's message; bad arguments raise
InvalidArgument, which is also a ValueError.
"""
from ._context_parallel import equal_bounds as cp_equal_bounds
from ._native import DgpsError, InvalidArgument
from ._paths import shipped_names
from .op import Op, default_runtime, load
from .reference import reference
from .tuning import tune

__all__ = ["DgpsError", "InvalidArgument", "Op", "load", "tune", "reference", "shipped_names", "default_runtime",
           "cp_equal_bounds", "layers"]


def __getattr__(name):
    if name == "layers":  # imported on demand: the layers pull in torch.nn
        from . import layers
        return layers
    raise AttributeError(f"module 'dgps' has no attribute {name!r}")
