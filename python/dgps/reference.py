"""The float64 reference recurrence (and the random input generator) of a spec (dsl/Reference.h), on torch tensors.

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
    return (dtype, list(t.shape), _bytes(t))


def _bytes(t):
    try:
        return t.numpy().tobytes()
    except (RuntimeError, TypeError):  # torch built without numpy: slower, but these are test-sized
        return bytes(t.view(torch.uint8).flatten().tolist()) if t.numel() else b""


_FROM_NAME = {v: k for k, v in TORCH_DTYPE_NAMES.items()}


def _from_bytes(dtype, shape, raw):
    if not raw:
        return torch.zeros(shape, dtype=dtype)
    return torch.frombuffer(bytearray(raw), dtype=dtype).reshape(shape)


def reference(op, **tensors):
    """Runs the reference of ``op``'s spec (an Op or a name for dgps.load) on the given tensors (names of
    docs/spec.md; None values are left out). Returns {name: float64 CPU tensor}."""
    if not hasattr(op, "package"):
        from .op import load
        op = load(op)
    inputs = {n: _host_entry(n, t) for n, t in tensors.items() if t is not None}
    out = native.reference(op.package, inputs)
    return {n: _from_bytes(torch.float64, shape, raw) for n, (shape, raw) in out.items()}


def generate_inputs(op, B, T, H, K, V, HV=None, seed=1, dtype=torch.bfloat16, cu_seqlens=None, initial_state=True,
                    device="cpu"):
    """Random inputs for ``op``'s spec with the distributions of dsl/InputGen.h (every gate inside its
    contract, states drawn): {name: tensor} on ``device``, activations in ``dtype``, the rest float32,
    cu_seqlens int64 (a list of N+1 offsets, B must be 1)."""
    if not hasattr(op, "package"):
        from .op import load
        op = load(op)
    if HV is None:
        HV = H * op.info["gva_ratio"]
    name = TORCH_DTYPE_NAMES[dtype]
    raw = native.generate_inputs(op.package, B, T, H, HV, K, V, seed, name, list(cu_seqlens or []), initial_state)
    return {n: _from_bytes(_FROM_NAME[dt], shape, b).to(device) for n, (dt, shape, b) in raw.items()}
