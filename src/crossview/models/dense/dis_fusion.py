"""A flow network's fields fused with OpenCV DIS's, by forward-backward consistency.

The two fail in different places: the network where its training held few motions like the
pair's (large ones, weak texture), DIS (:func:`crossview.models.dense.classical.dis_flow`) at
occlusions and on thin structures. Both run in both directions; per pixel of each direction,
the fusion keeps DIS's flow where the network's forward-backward error
(:func:`crossview.geometry.consistency.consistency_error`) exceeds :data:`FUSION_DIS_FB_PX`
and DIS's does not, and the network's elsewhere. DIS runs twice (:data:`FLOW_DIS_RUNS`): on the
grey frames, then on their rank transforms
(:func:`crossview.models.dense.rank_transform.rank_transform`), which hold where the two frames'
brightness differs; the second run's flow takes the pixels where what the first choice left
still fails the check and it passes. Around the motion edges of the result, each
direction then takes the colour-weighted median of its frame
(:func:`crossview.geometry.edge_weighted_median.edge_weighted_median_flow`, the stereo fusion's
:data:`~crossview.models.dense.sgbm_fusion.EDGE_MEDIANS` passes), which puts motion edges on
colour edges. Last, each direction is polished by OpenCV's variational refinement
(:func:`crossview.models.dense.classical.variational_refinement`, :data:`FLOW_VARIATIONAL`),
the energy DIS itself ends each scale with: the network's and the median's flow carry no
smoothness term at full resolution. No ground truth is read; the rule, its threshold, the
median's passes and the refinement's settings were chosen by leave-one-group-out on real scenes
used as flow pairs (docs/real-eval.md, ``docs/results/real-flow/flow_dis_fusion.py``,
``docs/results/real-flow/flow_edge_median.py``, ``docs/results/real-flow/flow_variational.py``).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch

from crossview.data.image_batch import uint8_images
from crossview.geometry.consistency import consistency_error
from crossview.geometry.edge_weighted_median import edge_weighted_median_flow
from crossview.models.dense.classical import dis_flow, grey_image, variational_refinement
from crossview.models.dense.opencv_threads import shared_opencv_threads
from crossview.models.dense.rank_transform import rank_transform
from crossview.models.dense.sgbm_fusion import EDGE_MEDIANS, FUSION_THREADS

# chosen by leave-one-group-out over {0, 0.5, 1, 2, 4} px, two rules (docs/real-eval.md)
FUSION_DIS_FB_PX = 0.5
# DIS's runs in order, each choosing by the rule above against what the runs before it left:
# on the grey frames (None) or on their rank transforms of this radius; chosen by
# leave-one-group-out over {grey}, {rank r}, {rank r, grey}, {grey, rank r} for r in {2, 3, 5}
# (docs/results/real-flow/flow_rank_dis.py)
FLOW_DIS_RUNS: tuple[int | None, ...] = (None, 2)
# the stereo fusion's two passes, chosen by leave-one-group-out over them and 12 single passes
# (docs/results/real-flow/flow_edge_median.py)
FLOW_EDGE_MEDIANS = EDGE_MEDIANS
# chosen by leave-one-group-out among the 33 of 43 settings (iterations, weights, before or
# after the medians) within 10 x 5 iterations (docs/results/real-flow/flow_variational.py)
FLOW_VARIATIONAL = {"iterations": 10, "sor_iterations": 5, "alpha": 40.0, "delta": 1.0,
                    "gamma": 20.0}


def forward_backward_choice(field: torch.Tensor, classical: torch.Tensor,
                            threshold: float = FUSION_DIS_FB_PX) -> torch.Tensor:
    """Per pixel ``classical``'s flow where ``field``'s forward-backward error exceeds
    ``threshold`` px and ``classical``'s does not, else ``field``'s: both ``[2B, H, W, 2]``
    (forward rows first) -> ``[2B, H, W, 2]``."""
    error_network = consistency_error(field)[0]
    error_classical = consistency_error(classical)[0]
    use_classical = (error_network > threshold) & (error_classical <= threshold)
    return torch.where(use_classical[..., None], classical, field)


def fuse_with_dis(x0: torch.Tensor, x1: torch.Tensor, field: torch.Tensor, *,
                  runs: tuple[int | None, ...] | None = None,
                  medians: tuple[dict, ...] | None = None) -> torch.Tensor:
    """Both directions' flow fields fused with DIS's.

    Args:
        x0, x1: the first and second frames ``[B, 3, H, W]``, 0..255 (rounded to uint8 for
            DIS).
        field: the network's fields ``[2B, H, W, 2]`` (forward rows first, then backward), as
            :func:`crossview.models.dense.inference.predict_fields` holds them.
        runs: DIS's runs, in order (at least one; ``None``: :data:`FLOW_DIS_RUNS`).
        medians: the median passes, in order (``()`` for none; ``None``:
            :data:`FLOW_EDGE_MEDIANS`).

    Returns:
        The fused fields ``[2B, H, W, 2]`` after the edge medians and the variational
        refinement, on ``field``'s device and dtype.
    """
    b = x0.shape[0]
    runs = FLOW_DIS_RUNS if runs is None else runs
    if not runs:
        raise ValueError("runs must name at least one DIS run")
    if field.shape[0] != 2 * b or field.shape[1:3] != x0.shape[-2:]:
        raise ValueError(f"field must be [2B, H, W, 2] for frames {tuple(x0.shape)}, "
                         f"got {field.shape=}")
    frames0, frames1 = uint8_images(x0), uint8_images(x1)
    firsts, seconds = frames0 + frames1, frames1 + frames0  # row r's frames

    def polish(flow: np.ndarray, first: np.ndarray, second: np.ndarray) -> np.ndarray:
        for settings in FLOW_EDGE_MEDIANS if medians is None else medians:
            flow = edge_weighted_median_flow(flow, first, **settings)
        return variational_refinement(flow, first, second, **FLOW_VARIATIONAL)

    def dis_inputs(radius: int | None) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Row r's first and second frames as one DIS run sees them."""
        if radius is None:
            return firsts, seconds
        ranked0, ranked1 = ([rank_transform(grey_image(f), radius) for f in frames]
                            for frames in (frames0, frames1))
        return ranked0 + ranked1, ranked1 + ranked0

    # OpenCV and numpy release the GIL: the directions run side by side, OpenCV's threads shared
    workers = min(2 * b, FUSION_THREADS)
    with ThreadPoolExecutor(max_workers=workers) as pool, shared_opencv_threads(workers):
        fused = field
        for radius in runs:
            classical = np.stack(list(pool.map(dis_flow, *dis_inputs(radius))))
            fused = forward_backward_choice(fused, torch.from_numpy(classical).to(field))
        fused = np.stack(list(pool.map(polish, fused.float().cpu().numpy(), firsts, seconds)))
    return torch.from_numpy(fused).to(field)
