"""The float64 reference recurrence of a spec (dsl/Reference.h), on torch tensors.

    outs = dgps.reference(op, q=q, k=k, v=v, g=g, beta=beta, ...)   # {"o", "final_state", ...} float64, CPU

Inputs are copied to the host (bf16/f16 activations exactly, as float64; gates as float32 or float64);
the computation is token by token in float64, so keep problems small (it is the tests' oracle).
"""
import torch

from ._native import native
from ._tensors import TORCH_DTYPE_NAMES


def _host_entry(name, t):
    t = t.detach().to("cpu").contiguous()
    if t.dtype in (torch.bfloat16, torch.float16):
        t = t.double()  # exact: every bf16/f16 value is a float64 value
    dtype = TORCH_DTYPE_NAMES.get(t.dtype)
    if dtype is None:
        raise native.InvalidArgument(f"dgps.reference: tensor '{name}': unsupported dtype {t.dtype}")
    return (dtype, list(t.shape), t.numpy().tobytes())


def reference(op, **tensors):
    """Runs the reference of ``op``'s spec (an Op or a name for dgps.load) on the given tensors (names of
    docs/spec.md; None values are left out). Returns {name: float64 CPU tensor}."""
    if not hasattr(op, "package"):
        from .op import load
        op = load(op)
    inputs = {n: _host_entry(n, t) for n, t in tensors.items() if t is not None}
    out = native.reference(op.package, inputs)
    return {n: torch.frombuffer(bytearray(raw), dtype=torch.float64).reshape(shape) if raw else
            torch.zeros(shape, dtype=torch.float64) for n, (shape, raw) in out.items()}
