"""The common shape of the benchmark readers: a torch ``Dataset`` of numpy sample dicts.

Every reader lists its samples when it is built (so a wrong path or layout fails at once, with
a message that shows the layout it expected) and reads the files of sample ``i`` on
``dataset[i]``. Samples are dicts with these keys (absent when the release has no such data):

================  ==========================  ================================================
key               value                       meaning
================  ==========================  ================================================
``name``          str                         the sample's path relative to the dataset root
``image0``        uint8 ``[H, W, 3]``         reference view (left image / first frame)
``image1``        uint8 ``[H, W, 3]``         other view (right image / second frame)
``disparity``     float32 ``[H, W]``          stereo: disparity of ``image0``, positive px
``disparity1``    float32 ``[H, W]``          stereo: disparity of ``image1`` (positive)
``flow``          float32 ``[H, W, 2]``       flow: (u, v) px from ``image0`` to ``image1``
``flow_backward`` float32 ``[H, W, 2]``       flow: (u, v) px from ``image1`` to ``image0``
``valid``         bool ``[H, W]``             ground truth known ("all" pixels)
``valid_noc``     bool ``[H, W]``             ground truth known and not occluded
``valid1``        bool ``[H, W]``             ``disparity1`` / ``flow_backward`` known
``ndisp``         int                         Middlebury: the disparity search range
``baseline``      float32 ``[H, W]``/``[H,    real scenes: a cached classical prediction
                  W, 2]``                     (SGBM / DIS), NaN at its holes
================  ==========================  ================================================

Ground truth at pixels that are not ``valid`` is set to 0, so the arrays are always finite.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
from torch.utils.data import Dataset

from crossview.errors import UserError

Sample = dict[str, Any]


def require_dir(path: str | Path, layout: str) -> Path:
    """``path`` as a :class:`Path` if it is a directory, else a :class:`UserError` showing
    ``layout``."""
    path = Path(path)
    if not path.is_dir():
        raise UserError(f"{path}: no such directory; expected {layout}")
    return path


def first_existing(paths: Iterable[Path]) -> Path | None:
    """The first of ``paths`` that exists, or None."""
    return next((path for path in paths if path.exists()), None)


def frame_number(path: Path, pattern: re.Pattern[str], expected: str, folder: str) -> int:
    """The frame number in ``path``'s name: group 1 of ``pattern`` matched against the whole
    stem. A name it cannot number is a :class:`UserError` naming the file and the ``expected``
    form (skipping it would silently change the number of evaluated samples); ``folder`` says
    where such files belong."""
    match = pattern.fullmatch(path.stem)
    if match is None:
        raise UserError(f"{path}: the name is not {expected} (a stray file in the {folder}? "
                        "move it away)")
    return int(match.group(1))


def finite_or_zero(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(values with non-finite entries set to 0 as float32, finite mask [H, W])``; for a
    ``[H, W, C]`` array a pixel is finite when all its channels are."""
    finite = np.isfinite(values)
    if values.ndim == 3:
        finite = finite.all(axis=2)
        return np.where(finite[..., None], values, 0).astype(np.float32), finite
    return np.where(finite, values, 0).astype(np.float32), finite


class BenchmarkDataset(Dataset):
    """A list of entries (one per sample) and a ``load(entry) -> Sample`` for them.

    Subclasses set ``task`` ("stereo" or "flow"), ``LAYOUT`` (shown in errors), fill
    ``self.entries`` in ``__init__`` through :meth:`set_entries`, implement :meth:`load` and may
    override :meth:`check`.
    """

    task: str = ""
    LAYOUT: str = ""

    def __init__(self, root: str | Path) -> None:
        self.root = require_dir(root, self.LAYOUT)
        self.entries: list[Any] = []

    def set_entries(self, entries: list[Any]) -> None:
        """Keep ``entries``; none at all means the layout is wrong."""
        if not entries:
            raise UserError(f"{self.root}: found no samples; expected {self.LAYOUT}")
        self.entries = entries

    def __len__(self) -> int:
        return len(self.entries)

    def __getitem__(self, index: int) -> Sample:
        if not 0 <= index < len(self.entries):
            raise IndexError(f"index {index} out of range for {len(self.entries)} samples")
        sample = self.load(self.entries[index])
        self.check(sample)
        return sample

    def load(self, entry: Any) -> Sample:
        raise NotImplementedError

    def check(self, sample: Sample) -> None:
        """Raise :class:`UserError` if the files of ``sample`` disagree; by default every array
        must be as large as ``image0`` (dense two-view samples). Override for other tasks."""
        size = sample["image0"].shape[:2]
        for key, value in sample.items():
            if isinstance(value, np.ndarray) and value.shape[:2] != size:
                raise UserError(f"{self.root}: sample {sample['name']}: {key} is "
                                f"{value.shape[:2]}, image0 is {size}")
