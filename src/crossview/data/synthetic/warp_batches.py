"""Square synthetic warps with keypoints, and their batches, as TransforMatcher trains and is
scored on them (:mod:`crossview.data.synthetic.warps` makes each sample).

A batch is a dict of ``src``, ``tgt`` ``[B, 3, S, S]`` (float 0..255), pixel keypoints
``kp_src``, ``kp_tgt`` ``[B, N, 2]`` (x, y), the exact pixel ``flow [B, 2, S, S]``
(``src`` -> ``tgt``) and its ``valid [B, S, S]`` mask.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from crossview.data.synthetic.warps import SyntheticWarps, WarpConfig


def warp_dataset(split: str, size: int, length: int, seed: int, keypoints: int,
                 shift: float = 0.0) -> SyntheticWarps:
    """Square warps of ``size`` pixels with ``keypoints`` pairs per sample (``shift``: see
    :class:`WarpConfig`; the held-out evaluation always uses 0)."""
    return SyntheticWarps(length, seed=seed, split=split,
                          config=WarpConfig(size=(size, size), num_keypoints=keypoints,
                                            shift=shift))


def stack_warps(samples: Sequence[Mapping[str, Any]]) -> dict[str, torch.Tensor]:
    """Stack warp samples: ``src``, ``tgt`` ``[B, 3, S, S]`` (0..255), pixel keypoints
    ``kp_src``, ``kp_tgt`` ``[B, N, 2]``, the exact pixel ``flow [B, 2, S, S]`` and its
    ``valid [B, S, S]`` mask."""
    return {"src": torch.stack([s["image0"] for s in samples]),
            "tgt": torch.stack([s["image1"] for s in samples]),
            "kp_src": torch.stack([s["keypoints0"] for s in samples]),
            "kp_tgt": torch.stack([s["keypoints1"] for s in samples]),
            "flow": torch.stack([s["flow"] for s in samples]),
            "valid": torch.stack([torch.as_tensor(s["valid"]) for s in samples])}


def warp_batch(dataset: SyntheticWarps, indices: list[int]) -> dict[str, torch.Tensor]:
    """:func:`stack_warps` of the samples ``indices`` of ``dataset``."""
    return stack_warps([dataset[i] for i in indices])
