"""Framework tensors -> the runtime's view tuples ``(data_ptr, dtype, shape, device)``.

The extension sees only these tuples and a CUstream handle, never a framework type, so one build works
with any torch version. A torch tensor is described through ``data_ptr()``; any other object with
``__cuda_array_interface__`` (CuPy, Numba, JAX arrays exported that way) through the interface dict.
Views must be row-major contiguous: callers make them so with ``.contiguous()`` first.
"""
import torch

TORCH_DTYPE_NAMES = {
    torch.bfloat16: "bf16",
    torch.float16: "f16",
    torch.float32: "f32",
    torch.float64: "f64",
    torch.int32: "i32",
    torch.int64: "i64",
}

_CAI_TYPESTRS = {"<f4": "f32", "<f8": "f64", "<f2": "f16", "<i4": "i32", "<i8": "i64", "<V2": "bf16"}

# Slot order of the extension's forward and decode calls (python/src/TensorArgs.h, the ABI order).
FORWARD_SLOTS = ("q", "k", "v", "g", "beta", "precond_g", "precond_beta", "precond_center", "initial_state",
                 "initial_precond_state", "cu_seqlens", "o", "final_state", "final_precond_state", "workspace")
DECODE_SLOTS = ("q", "k", "v", "g", "beta", "precond_g", "precond_beta", "precond_center", "state",
                "precond_state", "o")


def view(t):
    """The view tuple of a contiguous tensor, or None for None. CPU tensors get device 0: their views
    are only ever validated (shapes, dtypes), never launched; the caller checks the device first."""
    if t is None:
        return None
    if isinstance(t, ShapeOnly):
        base = view(t.like)
        return (t.data_ptr if t.data_ptr is not None else base[0], base[1], t.shape, base[3])
    if isinstance(t, torch.Tensor):
        dev = t.device.index if t.device.type == "cuda" else 0
        return (t.data_ptr(), TORCH_DTYPE_NAMES.get(t.dtype, str(t.dtype)), tuple(t.shape), dev or 0)
    cai = getattr(t, "__cuda_array_interface__", None)
    if cai is None:
        raise TypeError(f"dgps: expected a torch.Tensor or an object with __cuda_array_interface__, got {type(t)}")
    if cai.get("strides") is not None:
        raise ValueError("dgps: __cuda_array_interface__ tensors must be C-contiguous (strides None)")
    return (cai["data"][0], _CAI_TYPESTRS.get(cai["typestr"], cai["typestr"]), tuple(cai["shape"]),
            _cai_device(t))


class ShapeOnly:
    """A shape-only stand-in, for validating a call before its outputs exist: it borrows a real tensor's
    pointer, dtype and device, and is only ever validated, never launched on."""

    def __init__(self, like, shape, data_ptr=None):
        self.like, self.shape, self.data_ptr = like, tuple(shape), data_ptr


def address_past(tensors):
    """A 256-byte aligned address past every given tensor's bytes: a pointer for a ShapeOnly output
    that aliases no input (validation checks aliasing by address ranges)."""
    end = max((t.data_ptr() + t.numel() * t.element_size() for t in tensors if isinstance(t, torch.Tensor)),
              default=0)
    return (end + 4096 + 255) // 256 * 256


def _cai_device(t):
    dev = getattr(t, "device", None)
    return int(getattr(dev, "id", 0) or 0)


def views(tensors, slots):
    """View tuples of ``tensors`` (a dict by slot name) in the order of ``slots``."""
    return [view(tensors.get(name)) for name in slots]


def current_stream(device):
    """torch's current CUDA stream on ``device`` as the integer CUstream handle the runtime launches on
    (under CUDA graph capture this is the capturing stream)."""
    return torch.cuda.current_stream(device).cuda_stream
