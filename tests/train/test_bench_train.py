from __future__ import annotations

import math

import pytest

from crossview.bench.train import bench_train
from crossview.models.matchstereo.config import MatchStereoConfig
from crossview.models.matchstereo.model import MatchStereo
from crossview.models.registry import ModelSpec, register_model

MICRO = MatchStereoConfig(dims=(8, 8, 8, 8), encoder_depths=(1, 1, 1, 1),
                          decoder_layers=(1, 1, 1, 1), radii=(1, 1, 1, 1), heads=2,
                          encoder_head=0)


@pytest.mark.slow
def test_rows_for_each_model_and_backend() -> None:
    register_model(ModelSpec("bench-train-micro", lambda: MatchStereo(MICRO), "stereo"),
                   replace=True)
    rows = bench_train(["bench-train-micro"], (128, 192), 1, repeats=1, warmup=0)
    assert [(r["model"], r["backend"]) for r in rows] == [("bench-train-micro", "cpu"),
                                                          ("bench-train-micro", "reference")]
    for row in rows:
        assert row["step_s"] > 0 and row["samples_per_s"] == row["steps_per_s"]
        assert math.isclose(row["over_fused"], row["step_s"] / rows[0]["step_s"])
    assert rows[0]["params"] == sum(p.numel() for p in MatchStereo(MICRO).parameters())
