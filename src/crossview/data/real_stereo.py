"""Real stereo scenes with ground truth as training data, and the mixture with synthetic data.

:class:`RealStereoTraining` reads a folder of real stereo scene folders (the layout of
:mod:`crossview.data.datasets.scenes`: ``SCENE/left.png, right.png, gt.npy``), keeps them in
memory, and turns index ``i`` into one augmented crop of one scene, a pure function of
``(seed, i)`` as the synthetic streams are (:mod:`crossview.data.synthetic.dataset`), so runs
resume exactly and shard by rank. Real ground truth covers the left view only; the right view's
is made by forward warping (:func:`right_view_disparity`), so both
views are supervised as in the synthetic data. Samples carry the synthetic engine's keys:
``image0``, ``image1`` float32 ``[3, H, W]`` in 0..255, ``disparity``, ``disparity1`` float32
``[H, W]``, ``valid``, ``valid1`` bool ``[H, W]``.

For flow training (``task="flow"``) a scene is a pair of frames whose motion is horizontal:
the flow from the left image to the right one is ``(-d, 0)`` and back ``(+d1, 0)``
(:func:`stereo_as_flow`). So that a flow network does not learn that motion is leftward and
horizontal, each training sample also swaps its frames with probability
:data:`SWAP_PROBABILITY` and transposes the pair (x and y exchanged: vertical motion) with
probability :data:`TRANSPOSE_PROBABILITY`, before the flow augmentation's own flips. Samples
then carry the synthetic flow engine's keys: ``flow``, ``flow_backward`` float32
``[2, H, W]``, ``valid``, ``valid1``.

``holdout`` names scenes kept out of training (for validation: :class:`RealStereoValidation`
serves them whole, cropped to multiples of 32). :class:`MixedStream` interleaves two datasets in
a fixed proportion, also a pure function of the index.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset

from crossview.data.datasets.scenes import SceneFolders
from crossview.data.synthetic.dataset import Transform
from crossview.errors import UserError

_STREAM = 0x5EA1  # keeps the real stream's generators apart from the synthetic ones'
TASKS = ("stereo", "flow")
SWAP_PROBABILITY = 0.5  # flow samples: the right image first (motion to the right)
TRANSPOSE_PROBABILITY = 0.25  # flow samples: x and y exchanged (vertical motion)


def right_view_disparity(disparity: np.ndarray, valid: np.ndarray
                         ) -> tuple[np.ndarray, np.ndarray]:
    """The right view's disparity from the left view's, by forward warping with a z-buffer.

    Each known left pixel ``(x, y)`` of disparity ``d`` lands on the right pixels
    ``floor(x - d)`` and ``ceil(x - d)`` of row ``y`` (both, so that a surface stretched by
    the change of view leaves no one-pixel cracks); where several land on one pixel the
    largest disparity (the nearest surface) wins, as it occludes the others. Right pixels no
    left pixel lands on (occluded in the left view, or with unknown ground truth) are unknown.

    Args:
        disparity: ``[H, W]`` positive left disparity in pixels (left ``(x, y)`` matches right
            ``(x - d, y)``).
        valid: ``[H, W]`` bool, where ``disparity`` is known.

    Returns:
        ``(disparity1 [H, W] float32, 0 where unknown; valid1 [H, W] bool)``.

    >>> d1, v1 = right_view_disparity(np.array([[0.0, 0.0, 2.0, 2.0]]), np.ones((1, 4), bool))
    >>> d1.tolist(), v1.tolist()
    ([[2.0, 2.0, 0.0, 0.0]], [[True, True, False, False]])
    """
    if disparity.ndim != 2 or disparity.shape != valid.shape:
        raise ValueError(f"disparity and valid must both be [H, W]; got {disparity.shape=}, "
                         f"{valid.shape=}")
    h, w = disparity.shape
    ys, xs = np.nonzero(valid)
    values = disparity[ys, xs].astype(np.float32)
    best = np.full(h * w, -np.inf, np.float32)
    for target in (np.floor(xs - values), np.ceil(xs - values)):
        inside = (target >= 0) & (target < w)
        flat = ys[inside] * w + target[inside].astype(np.int64)
        np.maximum.at(best, flat, values[inside])
    best = best.reshape(h, w)
    valid1 = np.isfinite(best)
    return np.where(valid1, best, 0.0).astype(np.float32), valid1


def _tensors(sample: dict[str, Any]) -> dict[str, torch.Tensor]:
    """A scene reader's numpy sample (left ground truth only) -> both views' tensors."""
    disparity1, valid1 = right_view_disparity(sample["disparity"], sample["valid"])
    image = {key: torch.from_numpy(np.ascontiguousarray(sample[key], np.float32)).permute(2, 0, 1)
             for key in ("image0", "image1")}
    return {**image,
            "disparity": torch.from_numpy(sample["disparity"].astype(np.float32)),
            "valid": torch.from_numpy(sample["valid"].copy()),
            "disparity1": torch.from_numpy(disparity1),
            "valid1": torch.from_numpy(valid1)}


def stereo_as_flow(sample: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A stereo sample of :func:`_tensors`' keys as a flow sample: the left image is frame 0,
    the right image frame 1; ``flow = (-disparity, 0)``, ``flow_backward = (+disparity1, 0)``
    ``[2, H, W]``, the validity masks kept.

    >>> s = stereo_as_flow({"image0": torch.zeros(3, 1, 2), "image1": torch.ones(3, 1, 2),
    ...     "disparity": torch.tensor([[1.0, 2.0]]), "valid": torch.tensor([[True, False]]),
    ...     "disparity1": torch.tensor([[3.0, 0.0]]), "valid1": torch.tensor([[True, False]])})
    >>> s["flow"].tolist(), s["flow_backward"].tolist()
    ([[[-1.0, -2.0]], [[0.0, 0.0]]], [[[3.0, 0.0]], [[0.0, 0.0]]])
    """
    zero = torch.zeros_like(sample["disparity"])
    return {"image0": sample["image0"], "image1": sample["image1"],
            "flow": torch.stack([-sample["disparity"], zero]),
            "flow_backward": torch.stack([sample["disparity1"], zero]),
            "valid": sample["valid"], "valid1": sample["valid1"]}


def swap_frames(sample: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A flow sample with its frames in the other order (frame 1 first): the images, the two
    flows and the two validity masks exchange places."""
    return {"image0": sample["image1"], "image1": sample["image0"],
            "flow": sample["flow_backward"], "flow_backward": sample["flow"],
            "valid": sample["valid1"], "valid1": sample["valid"]}


def transpose_pair(sample: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A flow sample with x and y exchanged: every map transposed ``[..., H, W] -> [..., W,
    H]`` and the flows' two components swapped, so horizontal motion becomes vertical."""
    out = {key: value.transpose(-1, -2).contiguous() for key, value in sample.items()}
    for key in ("flow", "flow_backward"):
        out[key] = out[key].flip(0)
    return out


def split_scenes(root: str | Path, holdout: Sequence[str]) -> tuple[list[int], list[int],
                                                                    SceneFolders]:
    """The stereo scenes under ``root`` split into training and ``holdout`` indices.

    A ``holdout`` name that is not a scene of ``root`` is a :class:`UserError` (a typo would
    otherwise leave the scene in training)."""
    scenes = SceneFolders(root, task="stereo")
    names = scenes.names()
    unknown = sorted(set(holdout) - set(names))
    if unknown:
        raise UserError(f"{root}: no scene named {', '.join(unknown)} (held-out scenes must be "
                        f"among: {', '.join(names)})")
    train = [i for i, name in enumerate(names) if name not in holdout]
    if not train:
        raise UserError(f"{root}: every scene is held out; nothing is left to train on")
    return train, [i for i, name in enumerate(names) if name in holdout], scenes


def _check_task(task: str) -> None:
    if task not in TASKS:
        raise ValueError(f"task must be one of {TASKS}, got {task=}")


class RealStereoTraining(Dataset):
    """``length`` augmented crops of the real scenes under ``root`` minus ``holdout``, as
    stereo or (``task="flow"``) as flow samples.

    Sample ``i`` takes scene ``rng.integers(n)`` (a flow sample then swaps and transposes its
    frames at random, as above) and hands it to ``transform(sample, rng)`` (an
    :class:`~crossview.data.augment.Augmentor` that crops), all with a generator seeded by
    ``(seed, i)``. Without a transform, samples are whole scenes (different sizes).
    """

    def __init__(self, root: str | Path, length: int, *, seed: int = 0,
                 holdout: Sequence[str] = (), transform: Transform | None = None,
                 task: str = "stereo") -> None:
        if length < 0:
            raise ValueError(f"length must be non-negative, got {length=}")
        _check_task(task)
        self.task = task
        train, _, scenes = split_scenes(root, holdout)
        self.names = [scenes.names()[i] for i in train]
        self.scenes = [_tensors(scenes[i]) for i in train]
        self.length = length
        self.seed = seed
        self.transform = transform

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        if not 0 <= index < self.length:
            raise IndexError(f"index {index} out of range for a dataset of length {self.length}")
        rng = np.random.default_rng([_STREAM, self.seed, index])
        sample = dict(self.scenes[int(rng.integers(len(self.scenes)))])
        if self.task == "flow":
            sample = stereo_as_flow(sample)
            if rng.random() < SWAP_PROBABILITY:
                sample = swap_frames(sample)
            if rng.random() < TRANSPOSE_PROBABILITY:
                sample = transpose_pair(sample)
        return self.transform(sample, rng) if self.transform is not None else sample


class RealStereoValidation(Dataset):
    """The ``holdout`` scenes under ``root``, whole, each cropped to the largest multiple of 32
    in both sides (top-left anchored) so that a network runs on them without padding; with
    ``task="flow"`` as flow samples (:func:`stereo_as_flow`, left image first, no swap)."""

    def __init__(self, root: str | Path, holdout: Sequence[str], task: str = "stereo") -> None:
        _check_task(task)
        _, kept, scenes = split_scenes(root, holdout)
        self.names = [scenes.names()[i] for i in kept]
        self.scenes = []
        for i in kept:
            sample = _tensors(scenes[i])
            h, w = (sample["image0"].shape[-2] // 32 * 32, sample["image0"].shape[-1] // 32 * 32)
            sample = {key: value[..., :h, :w] for key, value in sample.items()}
            self.scenes.append(stereo_as_flow(sample) if task == "flow" else sample)

    def __len__(self) -> int:
        return len(self.scenes)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return dict(self.scenes[index])


class MixedStream(Dataset):
    """``first`` and ``second`` interleaved: of every index range, a ``fraction`` share
    (exactly, up to rounding) comes from ``second``.

    Index ``i`` is ``second``'s when ``floor((i + 1) * fraction) > floor(i * fraction)``; each
    part is read at its own running count, so both are read in order and none is repeated
    before its end (then it wraps). The length is ``first``'s."""

    def __init__(self, first: Dataset, second: Dataset, fraction: float) -> None:
        if not 0.0 <= fraction <= 1.0:
            raise ValueError(f"fraction must be in [0, 1], got {fraction=}")
        self.first, self.second, self.fraction = first, second, fraction

    def __len__(self) -> int:
        return len(self.first)  # type: ignore[arg-type]

    def __getitem__(self, index: int) -> Any:
        taken = int(np.floor(index * self.fraction))
        if int(np.floor((index + 1) * self.fraction)) > taken:
            return self.second[taken % len(self.second)]  # type: ignore[arg-type]
        return self.first[(index - taken) % len(self.first)]  # type: ignore[arg-type]
