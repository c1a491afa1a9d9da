"""FlyingChairs optical flow.

``root`` is the ``FlyingChairs_release`` folder::

    data/00001_img1.ppm, data/00001_img2.ppm, data/00001_flow.flo, ...
    FlyingChairs_train_val.txt     one line per pair: 1 = training, 2 = validation

The split file ships separately from the images (with FlowNet 2.0); it is needed for
``split="train"`` or ``"val"`` but not for ``split="all"``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from crossview.data import io
from crossview.data.datasets.base import BenchmarkDataset, Sample
from crossview.data.datasets.registry import DatasetKind, register_dataset
from crossview.errors import UserError

SPLIT_FILE = "FlyingChairs_train_val.txt"
SPLIT_CODES = {"train": 1, "val": 2}


class FlyingChairs(BenchmarkDataset):
    """FlyingChairs pairs with ``flow`` and ``valid`` (all true: the ground truth is dense)."""

    task = "flow"
    LAYOUT = ("a FlyingChairs_release folder with data/NNNNN_img1.ppm, data/NNNNN_img2.ppm, "
              f"data/NNNNN_flow.flo and {SPLIT_FILE}")

    def __init__(self, root: str | Path, *, split: str = "val") -> None:
        super().__init__(root)
        if split not in ("train", "val", "all"):
            raise UserError(f"FlyingChairs split must be train, val or all; got {split!r}")
        flows = sorted((self.root / "data").glob("*_flow.flo"))
        if split != "all" and flows:
            codes = self._split_codes(len(flows))
            flows = [flow for flow, code in zip(flows, codes, strict=True)
                     if code == SPLIT_CODES[split]]
        self.set_entries(flows)

    def _split_codes(self, count: int) -> list[int]:
        path = self.root / SPLIT_FILE
        if not path.is_file():
            raise UserError(f"{path}: no such file; it defines the train/val split "
                            "(or use split=all)")
        codes = path.read_text().split()
        if len(codes) != count or not set(codes) <= {"1", "2"}:
            raise UserError(f"{path}: expected {count} lines of 1 or 2 (one per flow file), "
                            f"got {len(codes)}")
        return [int(code) for code in codes]

    def load(self, entry: Path) -> Sample:
        stem = entry.name.removesuffix("_flow.flo")
        flow = io.read_flo(entry)
        return {
            "name": stem,
            "image0": io.read_image(entry.with_name(f"{stem}_img1.ppm")),
            "image1": io.read_image(entry.with_name(f"{stem}_img2.ppm")),
            "flow": flow, "valid": np.ones(flow.shape[:2], bool),
        }


register_dataset(DatasetKind(
    "chairs", "flow", FlyingChairs, ("epe", "1px", "3px", "5px"), "pooled",
    "FlyingChairs (option: split=train|val|all, default val)"))
