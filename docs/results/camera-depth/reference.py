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
- ``plane_sweep``: classical matching with the true cameras, no learning: for 128 depths
  (uniform in inverse depth, 0.8-12 world units) every other view is warped onto view 0
  through the plane at that depth, the colour difference is averaged over the other views
  that see the point and over a 5x5 window, and each pixel takes the depth of least cost
  (winner takes all). What per-pixel matching alone recovers at this resolution (the
  window was chosen among 3, 5, 7 and 9 on these scenes; in distribution they differ by about
  0.01).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

from crossview.experiments.camera_depth import DepthStudyConfig, load_data
from crossview.geometry.cameras import Cameras, invert_se3, normalize_poses
from crossview.geometry.raymaps import camray_map

VIEWS = {"in_distribution": ("main", 2), "more_views": ("main", 4), "zoomed": ("zoomed", 2),
         "wide": ("wide", 2)}


def abs_rel(prediction: torch.Tensor, truth: torch.Tensor, valid: torch.Tensor) -> float:
    """Pooled ``|d - d*| / d*`` over the valid pixels (as ``crossview.metrics.depth``)."""
    return float(((prediction - truth).abs() / truth.clamp_min(1e-12))[valid].mean())


SWEEP_DEPTHS = 128
SWEEP_RANGE = (0.8, 12.0)  # world units: nearer than any object, farther than any background
SWEEP_WINDOW = 5


def plane_sweep(scenes: dict[str, torch.Tensor], views: int) -> torch.Tensor:
    """Winner-take-all plane-sweep depth of view 0 from views ``1..views-1`` (see the module
    docstring); ``[N, H, W]`` in world units."""
    images, K = scenes["images"].double(), scenes["K"].double()
    viewmats = scenes["viewmats"].double()
    n, _, _, height, width = images.shape
    rays = camray_map(Cameras(K[:, 0], viewmats[:, 0], (height, width))).reshape(n, -1, 3)
    depths = 1.0 / torch.linspace(1 / SWEEP_RANGE[1], 1 / SWEEP_RANGE[0], SWEEP_DEPTHS,
                                  dtype=torch.float64)
    cost = images.new_zeros(n, SWEEP_DEPTHS, height, width)
    seen = torch.zeros_like(cost)
    for view in range(1, views):
        relative = viewmats[:, view] @ invert_se3(viewmats[:, 0])  # camera 0 -> view
        for k, depth in enumerate(depths):
            points = torch.einsum("nab,npb->npa", relative[:, :3, :3], rays * depth)
            projected = torch.einsum("nab,npb->npa", K[:, view],
                                     points + relative[:, None, :3, 3])
            z = projected[..., 2]
            x, y = projected[..., 0] / z, projected[..., 1] / z
            grid = torch.stack([x / width * 2 - 1, y / height * 2 - 1], dim=-1)
            warped = F.grid_sample(images[:, view], grid.reshape(n, height, width, 2),
                                   align_corners=False, padding_mode="border")
            inside = ((z > 0) & (x >= 0) & (x <= width) & (y >= 0) & (y <= height))
            inside = inside.reshape(n, height, width).double()
            cost[:, k] += (warped - images[:, 0]).abs().mean(dim=1) * inside
            seen[:, k] += inside
    seen_box = _box(seen)
    mean_cost = torch.where(seen_box > 0.5, _box(cost) / seen_box.clamp_min(1e-9), torch.inf)
    return depths[mean_cost.argmin(dim=1)]


def _box(maps: torch.Tensor) -> torch.Tensor:
    """Mean over the :data:`SWEEP_WINDOW` square around each pixel (inside the image)."""
    return F.avg_pool2d(maps, SWEEP_WINDOW, 1, SWEEP_WINDOW // 2, count_include_pad=False)


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
            "plane_sweep": abs_rel(plane_sweep(scenes, views), truth, valid),
        }
    Path(out).write_text(json.dumps(results, indent=2) + "\n")
    for setting, values in results.items():
        print(setting, {k: round(v, 3) for k, v in values.items()})


if __name__ == "__main__":
    main(*sys.argv[1:3])
