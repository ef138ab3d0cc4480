"""``dgps.load`` and ``Op``: one generated package as a callable in the shape of flash-linear-attention's
ops (``chunk_gated_delta_rule`` and friends).

    op = dgps.load("pgdn")
    o, final_state, final_precond_state = op(q, k, v, g=g, beta=beta, precond_g=pg, precond_beta=pb,
                                             initial_state=None, output_final_state=True)

Tensors (FLA layouts, docs/spec.md): q, k [B,T,H,K] and v [B,T,HV,V] in one of the package's input
dtypes (bf16 / f16); gates in natural-log space, accepted in bf16, f16 or f32 and converted to the
ABI's f32 here; states f32 [N,HV,K,V] and [N,H,K]; cu_seqlens [N+1] int64 (int32 is widened). Strided
inputs are copied to contiguous ones. Output o has q's dtype; final states are returned when
``output_final_state`` and the spec produces them, else None.
"""
import os
import subprocess
import tempfile
import threading

import torch

from . import _context_parallel, _ops
from ._pool import check_state_indices, decode_pool
from ._native import native
from ._paths import find_package_dir, find_tool, shipped_names
from ._tensors import DECODE_SLOTS, FORWARD_SLOTS, ShapeOnly as _Shaped, address_past, views

_GATE_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
_RUNTIME = None
_RUNTIME_LOCK = threading.Lock()


def default_runtime():
    """The process-wide runtime: binary cache in $DGPS_CACHE_DIR, tile configurations from the tuning
    database in the mode $DGPS_TUNE_MODE names (recorded by default)."""
    global _RUNTIME
    with _RUNTIME_LOCK:
        if _RUNTIME is None:
            _RUNTIME = native.Runtime()
        return _RUNTIME


_LOADED = {}


def load(name_or_path, config=None, runtime=None):
    """An ``Op`` for a shipped spec name ("pgdn": generated/pgdn), a package folder, or a spec file
    (compiled on the fly with dgpsc, which needs the MLIR build: $DGPS_DGPSC or dgpsc on $PATH).
    ``config`` fixes the tile configuration ("chunk=64,block_v=32,..."); by default it comes from the
    tuning database, else the package's default. Raises DgpsError naming what was not found."""
    target = str(name_or_path)
    if os.path.isfile(target):
        return Op(_compile_spec(target), config=config, runtime=runtime)
    folder = target if os.path.isdir(target) else find_package_dir(target)
    if folder is None:
        raise native.DgpsError(
            f"dgps.load: '{target}' is neither a package folder, a spec file, nor a shipped spec name "
            f"(shipped: {', '.join(shipped_names()) or 'none found; set DGPS_GENERATED_DIR'})")
    if runtime is not None:
        return Op(folder, config=config, runtime=runtime)
    # One Op per package folder and configuration on the default runtime: layers share it.
    key = (os.path.realpath(folder), config)
    if key not in _LOADED:
        _LOADED[key] = Op(folder, config=config)
    return _LOADED[key]


def _compile_spec(spec_path):
    dgpsc = find_tool("dgpsc", "DGPS_DGPSC")
    if dgpsc is None:
        raise native.DgpsError(
            f"dgps.load: '{spec_path}' is a spec file, but dgpsc (the MLIR compiler) is not installed here; "
            "build it (scripts/build.sh) and put it on $PATH or in $DGPS_DGPSC, or pass a compiled package folder")
    out = tempfile.mkdtemp(prefix="dgps-pkg-")
    r = subprocess.run([dgpsc, "compile", spec_path, "-o", out], capture_output=True, text=True)
    if r.returncode != 0:
        raise native.DgpsError(f"dgps.load: dgpsc compile {spec_path} failed:\n{r.stderr.strip()}")
    return out


class Op:
    """One loaded package. Thread-safe to call; cheap to keep (JIT images are cached per runtime)."""

    def __init__(self, package_dir, config=None, runtime=None):
        self.package = native.Package(package_dir)
        self.info = self.package.info()
        self.name = self.info["name"]
        self.config = config
        self.runtime = runtime or default_runtime()
        self.key = f"{os.path.realpath(package_dir)}|{config or ''}|{id(self.runtime)}"
        self._workspace = {}
        self._centers = {}
        _ops.register(self)

    def __repr__(self):
        i = self.info
        return (f"dgps.Op('{self.name}': decay={i['decay']}, gain={i['gain']}, precond={i['precond']}, "
                f"solve={i['solve']}, K in {i['key_dims']}, V in {i['value_dims']})")

    # ----------------------------------------------------------------------------------- forward
    def __call__(self, q, k, v, g=None, beta=None, precond_g=None, precond_beta=None, precond_center=None,
                 initial_state=None, initial_precond_state=None, output_final_state=False, cu_seqlens=None,
                 scale=None, cp_group=None, cp_bounds=None):
        """Chunked forward over whole sequences; returns (o, final_state, final_precond_state).

        Context parallelism (``cp_group``, a torch.distributed ProcessGroup; docs/context_parallel.md): the
        packed batch of T tokens (N documents laid end to end) is split into G = cp_group's size contiguous
        pieces, and each rank calls the op on its own piece with the same global arguments:

        - local (this rank's piece): q, k [1, T_r, H, K], v [1, T_r, HV, V] and the gates [1, T_r, ...],
          the packed tokens [b_r, b_r + T_r) of the batch (B = 1); o comes back local, [1, T_r, HV, V].
        - global (the same on every rank): ``cu_seqlens`` [N+1], the documents' offsets into the whole
          packed batch (a list of ints or an int tensor; a CPU one, or a list, avoids reading a CUDA tensor
          back); None for one sequence over all T tokens. Rows past cu_seqlens[N] are padding (zeros in o).
          ``initial_state`` [N, HV, K, V] f32, one row per document (zero when None): the rank holding a
          document's first token starts it there; later ranks fold the earlier ranks' summaries over it.
        - the split: ``cp_bounds`` [G+1], rank r holding tokens [cp_bounds[r], cp_bounds[r+1]); when None,
          every rank holds the same T_r tokens (T = G * T_r).
        - final_state (with output_final_state) is [N, HV, K, V] on every rank: the rows of the documents
          whose last token this rank holds (an empty document: the rank holding token cu_seqlens[n], else
          the last) hold their final states, every other row is zero, so ``dist.all_reduce(final_state,
          group=cp_group)`` (a sum) gives every row on every rank, exactly.
        - tensors on the rank's device (torch.cuda.current_device()); a gloo group gathers through host
          copies (several ranks may then share one GPU), any other backend (NCCL) on the device.
        - with a preconditioner state (ema_sq_squash: pgdn, pkda, pdn, atq; unclamped hypergrad_ogd: osdn,
          osdn_apf; info["context_parallel_precond"]) that state (the accumulator A, or d) is folded across the
          ranks first (one more all-gather: per channel, or K×K per key head for hypergrad_ogd,
          info["context_parallel_precond_full_map"]): ``initial_precond_state``
          [N, H, K] f32 is global (one row per document), and final_precond_state [N, H, K] comes back like
          final_state (this rank's documents' rows, zeros elsewhere).
        - packages info["context_parallel"] accepts (segment kernels, and no preconditioner, an ema_sq_squash
          one or an unclamped hypergrad_ogd one: gdn, gdn_gva, deltanet, kda, mamba2, linear_attention, pgdn,
          pkda, pdn, atq, osdn, osdn_apf; not gated_deltaproduct or a clamped hypergrad_ogd spec:
          info["context_parallel_reason"] says why); eager only (the exchange reads the
          group's headers on the host), not under
          torch.compile or CUDA graph capture. Each rank checks its arguments and all ranks exchange what
          they planned before any launch: a rank that refuses its arguments, or planned another split,
          makes every rank raise (naming it) rather than wait in a collective.
        """
        if not self.info["has_forward"]:
            raise native.InvalidArgument(f"dgps: package '{self.name}' has no chunked forward kernel")
        if cp_group is not None:
            return self._context_parallel(q, k, v, dict(g=g, beta=beta, precond_g=precond_g,
                                                        precond_beta=precond_beta), precond_center, initial_state,
                                          initial_precond_state, output_final_state, cu_seqlens, scale, cp_group,
                                          cp_bounds)
        if cp_bounds is not None:
            raise native.InvalidArgument("dgps: cp_bounds is given without cp_group; it splits a context-parallel "
                                         "call's tokens over the group's ranks")
        q = self._scaled_query(q, scale)
        t = self._prepare(dict(q=q, k=k, v=v, initial_state=initial_state,
                               initial_precond_state=initial_precond_state),
                          dict(g=g, beta=beta, precond_g=precond_g, precond_beta=precond_beta), precond_center, q)
        if cu_seqlens is not None:
            cu_seqlens = self._index_tensor("cu_seqlens", cu_seqlens, torch.int64)
        args = [t["q"], t["k"], t["v"], t["g"], t["beta"], t["precond_g"], t["precond_beta"],
                t["precond_center"], t["initial_state"], t["initial_precond_state"], cu_seqlens]
        self._check_device("forward", dict(zip(FORWARD_SLOTS, args)), lambda: self._prevalidate_forward(args))
        o, fs, fps = _ops.forward(self.key, args, bool(output_final_state))
        if not output_final_state:
            return o, None, None
        return o, (fs if self.info["final_state"] else None), (fps if fps.numel() else None)

    def _context_parallel(self, q, k, v, gates, precond_center, initial_state, initial_precond_state,
                          output_final_state, cu_seqlens, scale, cp_group, cp_bounds):
        """One rank's piece of a context-parallel forward (see __call__; dgps/_context_parallel.py)."""
        if not self.info["context_parallel"]:
            raise native.InvalidArgument(
                f"dgps: package '{self.name}' cannot run context-parallel: it {self.info['context_parallel_reason']} "
                "(docs/context_parallel.md). Run the whole sequence on one rank with cp_group=None")
        if initial_precond_state is not None and not self.info["context_parallel_precond"]:
            raise native.InvalidArgument(f"dgps: spec '{self.name}' has no preconditioner state; "
                                         "initial_precond_state must be None")
        if _building_graph(_tensor("q", q)):
            raise native.InvalidArgument(
                "dgps: the context-parallel forward cannot be traced by torch.compile or captured in a CUDA graph: "
                "it exchanges over torch.distributed and reads the ranks' headers on the host; run it eagerly")

        def prepare():
            sq = self._scaled_query(q, scale)
            return self._prepare(dict(q=sq, k=k, v=v, initial_state=initial_state,
                                      initial_precond_state=initial_precond_state), gates, precond_center, sq)

        def run():
            return _context_parallel.forward(self, prepare, cu_seqlens, cp_group, cp_bounds, bool(output_final_state))

        inputs = [x for x in [q, k, v, initial_state, initial_precond_state, precond_center] + list(gates.values())
                  if x is not None]
        return _context_parallel.forward_autograd(self.name, run, inputs)

    # ----------------------------------------------------------------------------------- decode
    def decode(self, q, k, v, g=None, beta=None, precond_g=None, precond_beta=None, precond_center=None,
               state_pool=None, state_indices=None, precond_state_pool=None, scale=None, check_indices=True):
        """Decode 1 <= T <= 8 new tokens per sequence against a caller-owned state pool, in place.

        q, k [B,T,H,K], v [B,T,HV,V], per-token gates [B,T,...] as in forward (with several Householder steps per
        token, info["steps"] = n_h, k, v and beta carry T*n_h rows, as in forward). ``state_pool``
        [P,HV,K,V] f32 (and ``precond_state_pool`` [P,H,K] f32 for preconditioned specs) hold one row per
        serving slot; ``state_indices`` [B] int (int32 or int64) maps batch entry b to its row, -1 for a
        padding entry (skipped: its row is untouched and its output rows are 0). Valid indices must be
        distinct and < P: with ``check_indices`` (the default) that is checked in eager mode, at the cost
        of a host sync; under CUDA graph capture or torch.compile, or with check_indices=False, it is not,
        and an index >= P is a device-side error. Without ``state_indices`` the pool has B rows and row b
        is sequence b. Returns o [B,T,HV,V].

        The pool is gathered into a [B,...] scratch state, the decode kernel runs on it, and the rows are
        scattered back (sync-free, so it works under CUDA graph capture and torch.compile). An indexed
        pool inside the decode kernel, which would save the gather and scatter, is future work.
        """
        if not self.info["has_decode"]:
            raise native.InvalidArgument(f"dgps: package '{self.name}' has no decode kernel")
        if _tensor("q", q).dim() != 4:
            raise native.InvalidArgument(f"dgps.decode: tensor 'q': expected [B,T,H,K] with 1 <= T <= 8, "
                                         f"got shape {list(q.shape)}")
        T = q.shape[1]
        if not 1 <= T <= 8:
            raise native.InvalidArgument(f"dgps.decode: {T} tokens per step; decode takes 1 <= T <= 8 "
                                         "(use the chunked forward for prompts)")
        # k, v and beta carry info["steps"] rows per token: checked before any launch, so a wrong row count
        # never leaves the pool half updated
        n = self.info["steps"]
        for name, x in (("k", k), ("v", v), ("beta", beta)):
            if isinstance(x, torch.Tensor) and (x.dim() < 2 or x.shape[1] != T * n):
                raise native.InvalidArgument(
                    f"dgps.decode: tensor '{name}': expected {T * n} rows in dim 1 ({T} tokens"
                    + (f" x {n} Householder steps" if n > 1 else "") + f"), got shape {list(x.shape)}")
        preconditioned = self.info["precond"] != "none"
        if state_pool is None:
            raise native.InvalidArgument("dgps.decode: state_pool [P,HV,K,V] f32 is required")
        if preconditioned and precond_state_pool is None:
            raise native.InvalidArgument(f"dgps.decode: spec '{self.name}' has a preconditioner: "
                                         "precond_state_pool [P,H,K] f32 is required")
        if not preconditioned and precond_state_pool is not None:
            raise native.InvalidArgument(f"dgps.decode: spec '{self.name}' has no preconditioner: "
                                         "precond_state_pool must be None")
        for name, pool in (("state_pool", state_pool), ("precond_state_pool", precond_state_pool)):
            if pool is not None and (_tensor(name, pool).dtype != torch.float32 or not pool.is_contiguous()):
                raise native.InvalidArgument(f"dgps.decode: {name} must be a contiguous float32 tensor "
                                             f"(updated in place), got {pool.dtype}"
                                             f"{'' if pool.is_contiguous() else ', strided'}")
        q = self._scaled_query(q, scale)
        t = self._prepare(dict(q=q, k=k, v=v), dict(g=g, beta=beta, precond_g=precond_g,
                                                   precond_beta=precond_beta), precond_center, q)
        per_row = [t["q"], t["k"], t["v"], t["g"], t["beta"], t["precond_g"], t["precond_beta"]]
        B = q.shape[0]
        if state_indices is None:
            self._check_pool_rows(state_pool, precond_state_pool, B)
            self._check_device("decode", dict(q=q, state_pool=state_pool),
                               lambda: self._prevalidate_decode(per_row, t["precond_center"], state_pool,
                                                                precond_state_pool, B))
            pstate = precond_state_pool if preconditioned else state_pool.new_empty((0,))
            return _ops.decode_op(self.key, *per_row, t["precond_center"], state_pool, pstate)
        idx = self._index_tensor("state_indices", state_indices, torch.int64)
        if idx.dim() != 1 or idx.shape[0] != B:
            raise native.InvalidArgument(f"dgps.decode: state_indices: expected shape [B] = [{B}], "
                                         f"got {list(idx.shape)}")
        if precond_state_pool is not None and precond_state_pool.shape[:1] != state_pool.shape[:1]:
            raise native.InvalidArgument(f"dgps.decode: state_pool has {state_pool.shape[0]} rows but "
                                         f"precond_state_pool has {precond_state_pool.shape[0]}; one row per slot in both")
        self._check_device("decode", dict(q=q, state_pool=state_pool, state_indices=idx),
                           lambda: self._prevalidate_decode(per_row, t["precond_center"], state_pool,
                                                            precond_state_pool, B))
        if check_indices and not _building_graph(idx):
            check_state_indices(idx, state_pool.shape[0])
        return decode_pool(self.key, per_row, t["precond_center"], state_pool, precond_state_pool, idx)

    # ----------------------------------------------------------------------------------- helpers
    def workspace_bytes(self, vs):
        """Scratch bytes of the forward for these views, remembered per shape signature."""
        sig = tuple(None if x is None else (x[1], x[2], x[3]) for x in vs[:-1])
        n = self._workspace.get(sig)
        if n is None:
            n = self.runtime.forward_workspace_bytes(self.package, vs, self.config)
            self._workspace[sig] = n
        return n

    def _scaled_query(self, q, scale):
        if scale is None:
            return q
        spec_scale = self.info["scale"] if self.info["scale"] is not None else q.shape[-1] ** -0.5
        if abs(scale - spec_scale) <= 1e-6 * abs(spec_scale):
            return q
        if self.info["qk_l2norm"]:
            raise native.InvalidArgument(
                f"dgps: spec '{self.name}' fixes the query scale at {spec_scale:g} and normalises q in the "
                f"kernel, so scale={scale:g} cannot be applied; set `scale:` in the spec")
        return q * (scale / spec_scale)  # the recurrence is linear in q without normalisation

    def _prepare(self, activations, gates, precond_center, q):
        """Contiguous tensors; gates in f32; the default precond_center where the spec takes one."""
        out = {}
        for name, x in activations.items():
            out[name] = None if x is None else _tensor(name, x).contiguous()
        for name, x in gates.items():
            if x is None:
                out[name] = None
                continue
            x = _tensor(name, x)
            if x.dtype not in _GATE_DTYPES:
                raise native.InvalidArgument(f"dgps: tensor '{name}': dtype {x.dtype}; gates are accepted in "
                                             "float32, bfloat16 or float16 (converted to the ABI's float32)")
            out[name] = x.float().contiguous()
        if precond_center is None and self.info["takes_precond_center"]:
            precond_center = self._default_center(q)
        if precond_center is not None:
            precond_center = _tensor("precond_center", precond_center).float().contiguous()
        out["precond_center"] = precond_center
        return out

    def _default_center(self, q):
        """The spec's centre c_h = center_init for every key head, remembered per (device, H) in eager
        mode only: a tensor made while tracing (a fake) or capturing (filled only at replay) must not
        outlive that graph."""
        key = (q.device, q.shape[2])
        c = self._centers.get(key)
        if c is None:
            c = torch.full((q.shape[2],), self.info["center_init"], dtype=torch.float32, device=q.device)
            if not _building_graph(q):
                self._centers[key] = c
        return c

    @staticmethod
    def _index_tensor(name, x, dtype):
        x = _tensor(name, x)
        if x.dtype not in (torch.int32, torch.int64):
            raise native.InvalidArgument(f"dgps: tensor '{name}': dtype {x.dtype}; expected int64 (or int32)")
        return x.to(dtype).contiguous()

    def _check_pool_rows(self, state_pool, precond_state_pool, B):
        if state_pool.dim() < 1 or state_pool.shape[0] != B:
            raise native.InvalidArgument(
                f"dgps.decode: without state_indices, state_pool must have B = {B} rows, got shape "
                f"{list(state_pool.shape)}")

    def _check_device(self, call, tensors, prevalidate):
        """All tensors on one CUDA device. Off CUDA, shape and dtype problems are reported first (by the
        runtime's own validation, which reads only shapes), then the device."""
        for name, x in tensors.items():
            if x is not None and not x.is_cuda:
                prevalidate()
                raise native.InvalidArgument(
                    f"dgps.{call}: tensor '{name}' is on {x.device}; DGPS launches CUDA kernels, so every "
                    "tensor must be on the same CUDA device")

    def _prevalidate_forward(self, args):
        B, T, _, K = args[0].shape if args[0].dim() == 4 else (0, 0, 0, 0)
        HV, V = (args[2].shape[2], args[2].shape[3]) if args[2].dim() == 4 else (0, 0)
        o = _Shaped(args[0], (B, T, HV, V), address_past(args))
        self.runtime.validate_forward(self.package, views(dict(zip(FORWARD_SLOTS, args + [o])), FORWARD_SLOTS))

    def _prevalidate_decode(self, per_row, center, state_pool, precond_state_pool, B):
        q, v = per_row[0], per_row[2]
        if q.dim() == 4 and v.dim() == 4 and q.shape[1] > 1:
            per_row = list(_ops.token_rows(per_row, 0, self.info["steps"], contiguous=False))
        shape_o = (B, 1, v.shape[2], v.shape[3]) if v.dim() == 4 else tuple(v.shape)
        state = _Shaped(state_pool, (B,) + tuple(state_pool.shape[1:]))
        pstate = None if precond_state_pool is None else _Shaped(precond_state_pool,
                                                                 (B,) + tuple(precond_state_pool.shape[1:]))
        tensors = dict(zip(DECODE_SLOTS, per_row + [center, state, pstate, _Shaped(per_row[0], shape_o, address_past(per_row + [center, state_pool, precond_state_pool]))]))
        self.runtime.validate_decode(self.package, views(tensors, DECODE_SLOTS))


def _building_graph(t):
    """True while torch.compile traces or the current CUDA stream captures a graph."""
    compiler = getattr(torch, "compiler", None)
    if compiler is not None and hasattr(compiler, "is_compiling") and compiler.is_compiling():
        return True
    dynamo = getattr(torch, "_dynamo", None)
    if dynamo is not None and hasattr(dynamo, "is_compiling") and dynamo.is_compiling():
        return True
    return t.is_cuda and torch.cuda.is_current_stream_capturing()


def _tensor(name, x):
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"dgps: '{name}' must be a torch.Tensor, got {type(x).__name__}")
    return x
