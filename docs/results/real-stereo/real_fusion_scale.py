"""The fusion's lengths on larger images: the real-train scenes upsampled twice, with the lengths
and thresholds as chosen (``fixed``), scaled by the factor (``scaled``), or only the lengths
scaled (``lengths``: windows, bands, hole runs, strip spans; the disparity thresholds kept).

Every length and disparity threshold of :mod:`crossview.models.dense.sgbm_fusion` was chosen on
scenes at most 740 px wide; a user's photograph is often larger. For every stereo scene under
ROOT (``SCENES=a,b,...`` keeps only those; the loop of :func:`real_study.run_study`) the pair
is upsampled twice (bicubic), the ground truth with it (nearest), the bundled ``matchstereo-
hybrid`` network runs as the fused default runs it (at 0.75 of the pair, no lri, no
refinement), SGBM as the fusion runs it, and the left view is fused with the shipped settings
(``fixed``) and with every length and threshold doubled (``scaled``:
:func:`~crossview.models.dense.sgbm_fusion.fuse_view`'s ``scale=2``, the consistency and SGBM
check thresholds doubled). Records in the format of ``real_inference_settings.py``, the
disparities halved before scoring (``bad2`` counts errors above 4 px at the upsampled scale:
the same pixels as bad-2 at the original size).

Run: ``OMP_NUM_THREADS=2 python docs/results/real-stereo/real_fusion_scale.py OUT.json ROOT``
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from crossview.geometry.consistency import noc_mask
from crossview.models.dense.classical import (
    left_right_checked,
    sgbm_disparity,
    sgbm_right_disparity,
)
from crossview.models.dense.sgbm_fusion import (
    FUSION_CONSISTENCY_PX,
    FUSION_SGBM_CHECK_PX,
    FUSION_SGBM_UNIQUENESS,
    fuse_view,
)

sys.path.insert(0, str(Path(__file__).parent))
from real_study import NetworkScene, network_scene, run_study

FACTOR = 2


def upsampled(image: np.ndarray) -> np.ndarray:
    """``[H, W, 3]`` uint8 -> ``[FACTOR H, FACTOR W, 3]``, bicubic."""
    h, w = image.shape[:2]
    return np.asarray(Image.fromarray(image).resize((w * FACTOR, h * FACTOR), Image.BICUBIC))


def nearest(values: np.ndarray) -> np.ndarray:
    """``[H, W]`` -> ``[FACTOR H, FACTOR W]``, each pixel repeated."""
    return np.repeat(np.repeat(values, FACTOR, 0), FACTOR, 1)


def upsampled_scene(model: torch.nn.Module, sample: Mapping) -> NetworkScene:
    """The scene upsampled ``FACTOR`` times (truth values kept, pixels repeated), the network
    run as the fused default runs it (0.75 of the pair, no lri, no refinement)."""
    left, right = (upsampled(np.asarray(sample[key])) for key in ("image0", "image1"))
    h, w = left.shape[:2]
    return network_scene(model, left, right, nearest(np.asarray(sample["disparity"], np.float32)),
                         nearest(np.asarray(sample["valid"], bool)), lri=False, refine=False,
                         size=(round(h * 0.75), round(w * 0.75)))


def settings(scene: NetworkScene) -> dict[str, np.ndarray]:
    """``{fixed, scaled, lengths: left disparity at the original scale}`` of one scene."""
    sgbm = sgbm_disparity(scene.left, scene.right, scene.search, pad=True,
                          uniqueness=FUSION_SGBM_UNIQUENESS)
    sgbm_right = sgbm_right_disparity(scene.left, scene.right, scene.search, pad=True,
                                      uniqueness=FUSION_SGBM_UNIQUENESS)
    out = {}
    for setting, scale, thresholds in (("fixed", 1, 1), ("scaled", FACTOR, FACTOR),
                                       ("lengths", FACTOR, 1)):
        out[setting] = fuse_view(
            scene.net, noc_mask(scene.field, FUSION_CONSISTENCY_PX * thresholds)[0].numpy(),
            left_right_checked(sgbm, sgbm_right, FUSION_SGBM_CHECK_PX * thresholds), scene.left,
            scale=scale, jumps=thresholds) / FACTOR
    return out


if __name__ == "__main__":
    run_study(Path(sys.argv[1]), sys.argv[2], settings, scene=upsampled_scene, refine=False,
              factor=FACTOR)
