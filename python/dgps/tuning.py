"""``dgps.tune``: autotune a package's chunked forward on this GPU (runtime/include/dgps/runtime/Tune.h).

    r = dgps.tune("pgdn", B=8, T=4096, H=16, K=128, V=128)   # {"config": "chunk=..", "median_ms": .., ...}

Candidates are screened in dgps-tune-trial child processes (the wheel carries one; $DGPS_TUNE_TRIAL
overrides), timed, and the winner is appended to the tuning database ($DGPS_TUNING_DB, default
~/.cache/dgps/tuning.jsonl). Later calls on the same shape bucket use it (the default `recorded` mode).
"""
import os

from ._native import native
from ._paths import find_tool


def tune(op, B, T, H, K, V, HV=None, dtype="bf16", device=0, force=False, db_path="", cache_dir="",
         isolate=True):
    """Tunes ``op`` (an Op or anything dgps.load takes) for the dense shape B, T, H, HV (default H), K, V.
    Returns {"ok", "message", "config", "median_ms", "reused", "db_path", "table"}; raises DgpsError
    before any trial when there is no GPU, the shape is unsupported, or no trial helper is found."""
    if not hasattr(op, "package"):
        from .op import load
        op = load(op)
    if isolate and not os.environ.get("DGPS_TUNE_TRIAL"):
        helper = find_tool("dgps-tune-trial", "DGPS_TUNE_TRIAL")
        if helper:
            os.environ["DGPS_TUNE_TRIAL"] = helper
    dtype = {"bfloat16": "bf16", "float16": "f16"}.get(str(dtype).replace("torch.", ""), str(dtype))
    return native.tune(op.package, B, T, H, HV or H, K, V, dtype, device, force, db_path, cache_dir, isolate)
