"""dgps.tune on the GPU: a tuning run records a winner that later calls pick up. Slow (it compiles every
candidate), so it runs only when DGPS_PYTHON_TUNE_TEST=1 (scripts/gpu_python.sh --tune sets it)."""
import os

import pytest
import torch

import dgps
from helpers import forward_args, requires_cuda, spec_inputs

pytestmark = [pytest.mark.gpu, requires_cuda,
              pytest.mark.skipif(os.environ.get("DGPS_PYTHON_TUNE_TEST") != "1",
                                 reason="tuning compiles every candidate; set DGPS_PYTHON_TUNE_TEST=1")]


def test_tune_records_and_recorded_mode_uses_it(tmp_path):
    db = str(tmp_path / "tuning.jsonl")
    r = dgps.tune("gdn", B=2, T=256, H=2, K=64, V=64, db_path=db)
    assert r["ok"], r["message"] + "\n" + r["table"]
    assert r["config"].startswith("chunk=") and r["median_ms"] > 0 and os.path.getsize(db) > 0
    again = dgps.tune("gdn", B=2, T=256, H=2, K=64, V=64, db_path=db)
    assert again["reused"] and again["config"] == r["config"]
    os.environ["DGPS_TUNING_DB"] = db
    try:
        rt = dgps._native.native.Runtime(tune_mode="recorded")
        op = dgps.Op(dgps.load("gdn").package.directory, runtime=rt)
        x = spec_inputs(op, B=2, T=256, seed=51)
        q, k, v, kw = forward_args(x)
        from dgps._tensors import FORWARD_SLOTS, views
        o = torch.empty_like(v)
        vs = views(dict(q=q, k=k, v=v, g=kw["g"], beta=kw["beta"], initial_state=kw.get("initial_state"), o=o),
                   FORWARD_SLOTS)
        assert rt.resolve_config(op.package, vs) == r["config"]
    finally:
        del os.environ["DGPS_TUNING_DB"]
