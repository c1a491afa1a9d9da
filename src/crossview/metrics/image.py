"""Image-reconstruction metrics for novel view synthesis: PSNR and SSIM of rendered views.

Registered for task ``novel-view``: a prediction is the rendered target views
``[V, 3, H, W]`` (0..255) of one sample, compared with ``sample["target_images"]`` (same
shape); the :class:`~crossview.metrics.score.Score` of a sample sums the per-view values over
its ``V`` views, so the ``pooled`` reduction is the mean over every rendered view.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from skimage.metrics import structural_similarity

from crossview.metrics.registry import register_metric
from crossview.metrics.score import MetricSpec, Score

TASK = "novel-view"


def psnr(prediction: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """PSNR in dB per image of ``[..., 3, H, W]`` images in 0..255 -> ``[...]``."""
    mse = ((prediction - target) ** 2).flatten(-3).mean(-1)
    return 10.0 * torch.log10(255.0**2 / mse.clamp_min(1e-10))


def ssim(prediction: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """SSIM per image (7x7 Gaussian-free window, data range 255) of ``[N, 3, H, W]`` -> ``[N]``."""
    values = [structural_similarity(p.numpy(), t.numpy(), data_range=255.0, channel_axis=0,
                                    win_size=7)
              for p, t in zip(prediction.double(), target.double(), strict=True)]
    return torch.tensor(values)


def _per_view(fn: Any) -> Any:
    def score(prediction: Any, sample: Mapping[str, Any]) -> Score:
        pred = torch.as_tensor(np.asarray(prediction, np.float32))
        target = torch.as_tensor(np.asarray(sample["target_images"], np.float32))
        if pred.shape != target.shape or pred.dim() != 4:
            raise ValueError(f"rendered views must be [V, 3, H, W] like the targets: "
                             f"{pred.shape=}, {target.shape=}")
        values = fn(pred, target).double()
        return Score(float(values.sum()), int(values.numel()))

    return score


PSNR = register_metric(MetricSpec("psnr", TASK, _per_view(psnr),
                                  "peak signal-to-noise ratio of the rendered views", "dB"))
SSIM = register_metric(MetricSpec("ssim", TASK, _per_view(ssim),
                                  "structural similarity of the rendered views (7x7 window)"))
