"""SGBM on rank-transformed images in the stereo fusion: whether, with which window and which
share of intensity, and whether the colour run still fills its holes, chosen by
leave-one-group-out on real-train scenes.

SGBM compares intensities; the rank transform
(:mod:`crossview.models.dense.rank_transform`) keeps only their order in a window, which two
cameras, two exposures or two lightings share. For every stereo scene under ROOT the bundled
``matchstereo-hybrid`` model runs with its defaults (the fused preset's network, the right
image lined up), and what it hands the fusion is recorded; then
:func:`crossview.models.dense.sgbm_fusion.fuse_with_sgbm` fuses it with each setting of
``sgbm_fusion.FUSION_SGBM_RUNS`` (the whole fusion, both views; the left view scored):

- ``colour``: SGBM on the colour images only (the fusion before this study);
- ``rank{r}_grey{g}``: SGBM on ``g`` grey channels and ``3 - g`` rank channels of radius ``r``
  only;
- ``rank{r}_grey{g}+colour``: that, with the colour run's answers in its holes.

The shipped setting's left view is checked to be the default run's, so that what is scored is
what ships.

Run: ``OMP_NUM_THREADS=2 python docs/results/real-stereo/real_rank_sgbm.py OUT.json
../shared/real-train``, then ``python docs/results/real-stereo/real_choice.py OUT.json
../shared/real-train``.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from crossview.geometry.disparity import field_to_disparity
from crossview.models.dense import inference, sgbm_fusion

sys.path.insert(0, str(Path(__file__).parent))
from real_study import run_study

RADII = (2, 3, 4, 5, 6, 7)
GREY_CHANNELS = (0, 1, 2)
SHIPPED = sgbm_fusion.FUSION_SGBM_RUNS


@dataclass
class FusionInputs:
    """What the fused default hands the fusion on one scene: the images ``x0, x1 [1, 3, H, W]``
    (the right one lined up), the network's refined fields ``[2, H, W, 2]``, and the scene's
    ground truth ``truth [H, W]`` and ``valid`` mask."""

    x0: torch.Tensor
    x1: torch.Tensor
    field: torch.Tensor
    truth: np.ndarray
    valid: np.ndarray


def setting_runs() -> dict[str, tuple[dict, ...]]:
    """``{setting: FUSION_SGBM_RUNS}`` of the grid above."""
    runs: dict[str, tuple[dict, ...]] = {"colour": ({},)}
    for radius, grey in itertools.product(RADII, GREY_CHANNELS):
        rank = {"radius": radius, "grey_channels": grey}
        runs[f"rank{radius}_grey{grey}"] = (rank,)
        runs[f"rank{radius}_grey{grey}+colour"] = (rank, {})
    return runs


def recorded_scene(model: torch.nn.Module, sample: Mapping) -> FusionInputs:
    """The scene run by the fused default (``predict_fields``), the fusion's inputs recorded;
    checks that the shipped fusion of them is the default run's left view."""
    recorded = []

    def recording(x0: torch.Tensor, x1: torch.Tensor, field: torch.Tensor,
                  **work: object) -> sgbm_fusion.FusedFields:  # work: a preset's runs, passes
        recorded.append((x0.clone(), x1.clone(), field.clone()))
        return sgbm_fusion.fuse_with_sgbm(x0, x1, field)

    inference.fuse_with_sgbm = recording
    try:
        default = inference.predict_fields(model, sample["image0"], sample["image1"], "stereo")
    finally:
        inference.fuse_with_sgbm = sgbm_fusion.fuse_with_sgbm
    scene = FusionInputs(*recorded[0], sample["disparity"], np.asarray(sample["valid"], bool))
    if not np.array_equal(field_to_disparity(default.field[:1])[0].numpy(),
                          fused_left(scene, SHIPPED)):
        raise RuntimeError("the study's fusion is not the default run's")
    return scene


def fused_left(scene: FusionInputs, runs: tuple[dict, ...]) -> np.ndarray:
    """The left view's disparity ``[H, W]`` of the whole fusion with ``FUSION_SGBM_RUNS = runs``
    (the left view is not moved back by the lining up: only the right one is)."""
    shipped = sgbm_fusion.FUSION_SGBM_RUNS
    sgbm_fusion.FUSION_SGBM_RUNS = runs
    try:
        fused = sgbm_fusion.fuse_with_sgbm(scene.x0, scene.x1, scene.field).field
    finally:
        sgbm_fusion.FUSION_SGBM_RUNS = shipped
    return field_to_disparity(fused[:1])[0].numpy()


def settings(scene: FusionInputs) -> dict[str, np.ndarray]:
    """``{setting: left disparity [H, W]}`` of one scene."""
    return {name: fused_left(scene, runs) for name, runs in setting_runs().items()}


if __name__ == "__main__":
    run_study(Path(sys.argv[1]), sys.argv[2], settings,
              lambda setting: setting in ("colour", "rank5_grey2+colour"),
              scene=recorded_scene, shipped=str(SHIPPED))
