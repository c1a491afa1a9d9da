"""Reference points for the depth study's AbsRel, from the cached test scenes (no model).

    python docs/results/camera-depth/reference.py runs/camera-depth \
        docs/results/camera-depth/reference.json

- ``scale_oracle``: every pixel of view 0 predicted as the median true depth of that view. It
  knows each scene's scale exactly (which a model can only get from the cameras) and nothing
  of the scene's structure: a model below it has learned structure as well as scale.
- ``world_constant``: one depth for every pixel of every scene, the median over the training
  scenes, in world units (the world frame's scale is fixed in these scenes, 3-4.5 units from
  the origin; the models never see it: they get poses normalised to a unit baseline).
- ``baseline_constant``: one depth in units of the view 0 to farthest-view baseline (the best
  a camera-blind model can do if it only learns the typical value), the median over the
  training scenes, scaled back by each test scene's baseline.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

from crossview.experiments.camera_depth import DepthStudyConfig, load_data
from crossview.geometry.cameras import normalize_poses

VIEWS = {"in_distribution": ("main", 2), "more_views": ("main", 4), "zoomed": ("zoomed", 2),
         "wide": ("wide", 2)}


def abs_rel(prediction: torch.Tensor, truth: torch.Tensor, valid: torch.Tensor) -> float:
    """Pooled ``|d - d*| / d*`` over the valid pixels (as ``crossview.metrics.depth``)."""
    return float(((prediction - truth).abs() / truth.clamp_min(1e-12))[valid].mean())


def main(cache_dir: str, out: str) -> None:
    config = DepthStudyConfig()
    data = load_data(config, Path(cache_dir))
    train = data["train"]
    _, train_scale = normalize_poses(train["viewmats"].double())
    world = float(train["depth"][train["valid"]].double().median())
    unit_depth = (train["depth"].double() * train_scale[:, None, None, None])[train["valid"]]
    per_baseline = float(unit_depth.median())
    results = {}
    for setting, (name, views) in VIEWS.items():
        scenes = data["test"][name]
        truth, valid = scenes["depth"][:, 0].double(), scenes["valid"][:, 0]
        medians = torch.stack([t[v].median() for t, v in zip(truth, valid, strict=True)])
        _, scale = normalize_poses(scenes["viewmats"][:, :views].double())
        results[setting] = {
            "scale_oracle": abs_rel(medians[:, None, None].expand_as(truth), truth, valid),
            "world_constant": abs_rel(torch.full_like(truth, world), truth, valid),
            "baseline_constant": abs_rel((per_baseline / scale)[:, None, None].expand_as(truth),
                                         truth, valid),
        }
    Path(out).write_text(json.dumps(results, indent=2) + "\n")
    for setting, values in results.items():
        print(setting, {k: round(v, 3) for k, v in values.items()})


if __name__ == "__main__":
    main(*sys.argv[1:3])
