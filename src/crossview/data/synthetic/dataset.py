"""The base torch Dataset of the synthetic generators: sample ``i`` is a pure function of
``(kind, split, seed, i)``.

Each sample draws all its randomness from ``numpy.random.default_rng([split_code, kind_code,
seed, i])``. Training data (``split="train"``) and held-out benchmarks (``split="heldout"``)
use different split codes, so no training seed can ever reproduce a held-out sample, and
different generators (stereo, flow, ...) with the same seed give unrelated streams. A
``transform(sample, rng)`` (e.g. an augmentor) receives a generator derived from the same key,
so augmented samples are deterministic too: training runs resume exactly and shard by rank.

Samples are dicts of torch tensors: images ``float32 [3, H, W]`` in 0..255 (the project's
float-image convention), dense labels ``float32``, masks ``bool``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset

from crossview.data.synthetic.textures import SPLITS

KINDS = ("stereo", "flow", "warp", "multiview")
Sample = dict[str, Any]
Transform = Callable[[dict[str, torch.Tensor], np.random.Generator], dict[str, torch.Tensor]]


def sample_generator(kind: str, split: str, seed: int, index: int,
                     stream: int = 0) -> np.random.Generator:
    """The generator of sample ``index`` (``stream`` 1 is the one handed to transforms)."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    if seed < 0 or index < 0:
        raise ValueError(f"seed and index must be non-negative, got {seed=}, {index=}")
    return np.random.default_rng([SPLITS.index(split), KINDS.index(kind), seed, index, stream])


def to_tensors(sample: Sample) -> dict[str, torch.Tensor]:
    """numpy sample -> torch: ``[H, W, C]`` float arrays become ``[C, H, W]`` float32 tensors,
    ``[V, H, W, 3]`` image stacks ``[V, 3, H, W]``; other arrays keep their layout."""
    out: dict[str, torch.Tensor] = {}
    for key, value in sample.items():
        array = np.asarray(value)
        if array.dtype == np.bool_:
            out[key] = torch.from_numpy(np.ascontiguousarray(array))
            continue
        array = array.astype(np.float32)
        if key.startswith("image") and array.ndim >= 3:
            array = np.moveaxis(array, -1, -3)
        elif key.startswith("flow") and array.ndim == 3:
            array = np.moveaxis(array, -1, 0)
        out[key] = torch.from_numpy(np.ascontiguousarray(array))
    return out


class SyntheticDataset(Dataset):
    """A finite window ``[0, length)`` of an unlimited, seeded stream of synthetic samples.

    Subclasses set ``kind`` and ``config_type`` (``config=None`` means its defaults) and
    implement ``generate(rng) -> numpy sample``.
    """

    kind: str = ""
    config_type: type = object

    def __init__(self, length: int, *, seed: int = 0, config: Any = None, split: str = "train",
                 transform: Transform | None = None) -> None:
        if length < 0:
            raise ValueError(f"length must be non-negative, got {length=}")
        sample_generator(self.kind, split, seed, 0)  # validates kind, split and seed
        if config is not None and not isinstance(config, self.config_type):
            raise TypeError(f"config must be a {self.config_type.__name__}, got "
                            f"{type(config).__name__}")
        self.length = length
        self.seed = seed
        self.config = config if config is not None else self.config_type()
        self.split = split
        self.transform = transform

    def __len__(self) -> int:
        return self.length

    def generate(self, rng: np.random.Generator) -> Sample:
        raise NotImplementedError

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        if not 0 <= index < self.length:
            raise IndexError(f"index {index} out of range for a dataset of length {self.length}")
        sample = to_tensors(self.generate(
            sample_generator(self.kind, self.split, self.seed, index)))
        if self.transform is not None:
            sample = self.transform(
                sample, sample_generator(self.kind, self.split, self.seed, index, stream=1))
        return sample
