"""SPair-71k (Min et al. 2019), in its release layout::

    SPair-71k/
      JPEGImages/<category>/<image>.jpg
      Layout/large/{trn,val,test}.txt       one pair per line: "<id>-<src>-<trg>:<category>"
      Layout/small/{trn,val,test}.txt
      PairAnnotation/{trn,val,test}/<id>-<src>-<trg>:<category>.json

A pair annotation holds ``src_imname``, ``trg_imname``, ``category``, ``src_kps`` and ``trg_kps``
(matching lists of ``[x, y]``, only keypoints visible in both images) and ``src_bndbox`` /
``trg_bndbox`` (``[x0, y0, x1, y1]``). PCK on SPair-71k uses the ``bbox`` threshold.
"""

from __future__ import annotations

import json
from pathlib import Path

from crossview.data import io
from crossview.data.datasets.base import Sample
from crossview.data.datasets.registry import DatasetKind, register_dataset
from crossview.data.datasets.semantic import SemanticDataset, bounding_box, keypoint_pair
from crossview.errors import UserError

SPLITS = {"train": "trn", "trn": "trn", "val": "val", "test": "test"}


class SPair71k(SemanticDataset):
    """SPair-71k pairs of ``split`` (``trn``/``val``/``test``) from the ``large`` or ``small``
    layout list."""

    LAYOUT = ("SPair-71k/ with JPEGImages/<category>/, Layout/large/<split>.txt and "
              "PairAnnotation/<split>/<pair>.json")

    def __init__(self, root: str | Path, *, split: str = "test", layout: str = "large") -> None:
        super().__init__(root)
        if split not in SPLITS:
            raise UserError(f"SPair-71k split must be one of trn, val, test, got {split!r}")
        if layout not in ("large", "small"):
            raise UserError(f"SPair-71k layout must be large or small, got {layout!r}")
        self.split = SPLITS[split]
        listing = self.root / "Layout" / layout / f"{self.split}.txt"
        if not listing.is_file():
            raise UserError(f"{listing}: not found; expected {self.LAYOUT}")
        names = [line.strip() for line in listing.read_text().splitlines() if line.strip()]
        self.set_entries(names)

    def load(self, entry: str) -> Sample:
        path = self.root / "PairAnnotation" / self.split / f"{entry}.json"
        if not path.is_file():
            raise UserError(f"{path}: pair annotation not found; expected {self.LAYOUT}")
        try:
            ann = json.loads(path.read_text())
            category = ann["category"]
            images = [io.read_image(self.root / "JPEGImages" / category / ann[key])
                      for key in ("src_imname", "trg_imname")]
            kp0, kp1, valid = keypoint_pair(ann["src_kps"], ann["trg_kps"], str(path))
            boxes = [bounding_box(ann[key], f"{path}: {key}") for key in ("src_bndbox",
                                                                            "trg_bndbox")]
        except (json.JSONDecodeError, KeyError, TypeError) as error:
            raise UserError(f"{path}: not a SPair-71k pair annotation ({error!r})") from None
        return {"name": entry, "category": category, "image0": images[0], "image1": images[1],
                "keypoints0": kp0, "keypoints1": kp1, "valid_keypoints": valid,
                "bbox0": boxes[0], "bbox1": boxes[1]}


# semantic correspondence: keypoint transfer, PCK per pair (crossview.metrics.keypoints)
register_dataset(DatasetKind(
    "spair71k", "semantic", SPair71k, tuple(f"pck@{alpha}_bbox" for alpha in (0.05, 0.1, 0.15)),
    "image_mean", "SPair-71k (options: split=trn|val|test, layout)"))
