"""Test-time adaptation: a copy of a dense model fitted to the one pair it is about to run on.

A network trained elsewhere meets a user's photographs with their own cameras, textures and
disparity range. The pair itself carries a training signal without ground truth: each view,
warped along the field, should look like the other one. :func:`adapt_to_pair` takes a few
Adam steps of the self-supervised loss of :mod:`crossview.train.photometric` (census
photometric error at consistent pixels plus edge-aware smoothness) on the pair, through the
same padded full-resolution pass as inference (with the low-resolution initialisation when
the run uses it), on a copy of the model: the caller's model is left as it was. The result
is then run like any model (:func:`crossview.estimate_disparity` with ``adapt=N``).

Each step is a forward and a backward pass at full resolution (several times the cost of
inference), so adaptation is opt-in and shows a progress bar in the CLI. The default budget
(:class:`AdaptationSettings`) was chosen by leave-one-out over held-out real scenes
(``docs/results/real-stereo/README.md``).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
from torch import nn

from crossview import memory
from crossview.data.image_batch import ImageLike, as_image_batch
from crossview.device import resolve_device
from crossview.errors import UserError
from crossview.models.dense.inference import initialises_low, run_padded
from crossview.train.photometric import photometric_loss

# Peak memory of one adaptation step of a pair (the forward pass keeping its activations, the
# backward, Adam's state): measured on matchstereo-hybrid (peak RSS over the loaded model, one
# step, lri on) as 880 MiB at 256x320 and 2480 MiB at 512x640, i.e. 6.8 kB per padded pixel
# and pair plus 333 MiB; the constants sit above both.
ADAPTATION_BYTES_PER_PIXEL = 7500
ADAPTATION_FIXED = 400 * 2**20


# --adapt's learning rate where the stereo network's answer is the run's (no SGBM fusion: fuse
# off, or self-fused): chosen over {2e-5, 1e-4, 3e-4, 1e-3} by the mean bad-2 after 5, 10 and
# 20 steps on the five real-train scenes held out of the bundled weights' training; 3e-4 and
# more diverge within five steps (docs/results/network-alone/adapt_rate.py). A fused run keeps
# AdaptationSettings.lr, chosen for the fused default.
NETWORK_ANSWER_LR = 1e-4


@dataclass(frozen=True)
class AdaptationSettings:
    """Budget of :func:`adapt_to_pair`: ``steps`` Adam steps at learning rate ``lr`` on all
    weights, the smoothness weighted by ``smooth_weight`` against the census term."""

    steps: int = 5
    lr: float = 2e-5
    smooth_weight: float = 0.5

    def __post_init__(self) -> None:
        if self.steps < 1:
            raise UserError(f"adaptation steps must be >= 1, got {self.steps}")
        if not self.lr > 0 or not self.smooth_weight >= 0:
            raise UserError(f"adaptation needs lr > 0 and smooth_weight >= 0, got {self.lr}, "
                            f"{self.smooth_weight}")

    @classmethod
    def for_run(cls, steps: int, task: str, fused: bool) -> AdaptationSettings:
        """``steps`` steps at the learning rate for a run of ``task`` that does (``fused``) or
        does not fuse with the classical matcher: :data:`NETWORK_ANSWER_LR` for stereo whose
        answer is the network's, the default rate otherwise."""
        if task == "stereo" and not fused:
            return cls(steps=steps, lr=NETWORK_ANSWER_LR)
        return cls(steps=steps)


def adapt_to_pair(model: nn.Module, img0: ImageLike, img1: ImageLike, task: str, *,
                  settings: AdaptationSettings = AdaptationSettings(), lri: bool | None = None,
                  device: str | torch.device = "cpu",
                  on_step: Callable[[int, float], None] | None = None) -> nn.Module:
    """A copy of ``model`` adapted to the pair ``img0, img1`` (module docstring).

    Args:
        model: a dense (stereo or flow) MatchStereo-family network; not modified.
        img0, img1: the pair in any form of :func:`crossview.data.image_batch.as_image_batch`
            (``[B, 3, H, W]`` batches adapt to all their pairs at once).
        task: ``"stereo"`` or ``"flow"``.
        settings: the budget.
        lri: the pass to adapt (as :func:`crossview.models.dense.inference.predict_fields`;
            ``None``: the model's default).
        on_step: called after each step with ``(step, loss)`` (1-based), for progress.

    Returns:
        The adapted copy on ``device``, in eval mode, with the model's defaults
        (``refine_by_default``, ``lri_by_default``, ``fuse_by_default``, names) carried over.
    """
    adapted = model
    for step, loss, current in adaptation_steps(model, img0, img1, task, settings=settings,
                                                lri=lri, device=device):
        adapted = current  # settings.steps >= 1: always the copy
        if on_step is not None:
            on_step(step, loss)
    return adapted.requires_grad_(False)


def adaptation_steps(model: nn.Module, img0: ImageLike, img1: ImageLike, task: str, *,
                     settings: AdaptationSettings = AdaptationSettings(),
                     lri: bool | None = None, device: str | torch.device = "cpu"
                     ) -> Iterator[tuple[int, float, nn.Module]]:
    """The steps of :func:`adapt_to_pair` one at a time (arguments as there): yields
    ``(step, loss before the step, the copy after it)`` for steps ``1 .. settings.steps``;
    the copy is one object, updated in place (run it between steps to see the adaptation
    progress)."""
    target = resolve_device(device)
    x0, x1 = as_image_batch(img0, "first image"), as_image_batch(img1, "second image")
    if x0.shape != x1.shape:
        raise UserError(f"the two images differ in size: {tuple(x0.shape[-2:])} and "
                        f"{tuple(x1.shape[-2:])} (H, W)")
    _check_memory(model, x0.shape, target)
    lri = initialises_low(model, lri)
    adapted = copy.deepcopy(model).to(target).eval()
    x0, x1 = x0.to(target).float(), x1.to(target).float()
    optimizer = torch.optim.Adam(adapted.parameters(), lr=settings.lr)
    for step in range(1, settings.steps + 1):
        with torch.enable_grad():
            field = run_padded(adapted, x0, x1, task, lri)[0]
            loss, _ = photometric_loss(x0, x1, field, smooth_weight=settings.smooth_weight)
            if not torch.isfinite(loss):
                raise UserError(f"test-time adaptation diverged at step {step} (loss {loss}); "
                                "run without adaptation or with a smaller learning rate")
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        yield step, float(loss.detach()), adapted


def _check_memory(model: nn.Module, shape: torch.Size, device: torch.device) -> None:
    """Refuse a pair whose adaptation step needs more memory than ``device`` has."""
    batch, _, h, w = shape
    padded = batch * (-(-h // 32) * 32) * (-(-w // 32) * 32)
    name = getattr(model, "model_name", type(model).__name__)
    memory.check_memory(ADAPTATION_BYTES_PER_PIXEL * padded + ADAPTATION_FIXED,
                        f"test-time adaptation of {name} on {h}x{w} px",
                        "adapt on smaller images or run without adaptation", device)
