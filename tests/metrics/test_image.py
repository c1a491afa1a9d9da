from __future__ import annotations

import numpy as np
import torch

from crossview.metrics.image import PSNR, SSIM, psnr, ssim


def test_psnr_of_a_known_error() -> None:
    target = torch.zeros(2, 3, 4, 4)
    prediction = target + torch.tensor([2.55, 25.5]).view(2, 1, 1, 1)
    torch.testing.assert_close(psnr(prediction, target), torch.tensor([40.0, 20.0]))


def test_ssim_of_identical_images_is_one() -> None:
    images = 255 * torch.rand(2, 3, 16, 16, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(ssim(images, images), torch.ones(2, dtype=torch.float64))
    assert float(ssim(images, images.flip(-1)).max()) < 0.5


def test_specs_pool_over_every_rendered_view() -> None:
    target = np.zeros((2, 3, 8, 8), np.float32)
    prediction = target + np.array([2.55, 25.5], np.float32).reshape(2, 1, 1, 1)
    score = PSNR.fn(prediction, {"target_images": target})
    assert score.count == 2 and abs(score.value - 30.0) < 1e-4
    assert SSIM.fn(target, {"target_images": target}).value == 1.0
