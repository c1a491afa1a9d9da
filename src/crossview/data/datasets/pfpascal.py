"""PF-PASCAL (Ham et al. 2017) with the split lists used by semantic-matching papers::

    PF-PASCAL/
      JPEGImages/<image>.jpg
      Annotations/<category>/<image>.mat    MATLAB file: 'kps' [K, 2] (x, y; NaN = absent),
                                            'bbox' [1, 4] (x0, y0, x1, y1)
      trn_pairs.csv, val_pairs.csv, test_pairs.csv
          header "source_image,target_image,class[,flip]"; the images are given as
          "JPEGImages/<image>.jpg", class is the 1-based PASCAL VOC category index.

Keypoints of a pair are the rows of the two ``kps`` arrays; a row is valid when it is annotated
in both images. PCK on PF-PASCAL uses the ``img`` threshold (alpha 0.05 / 0.1 / 0.15).
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import scipy.io

from crossview.data import io
from crossview.data.datasets.base import Sample
from crossview.data.datasets.registry import DatasetKind, register_dataset
from crossview.data.datasets.semantic import SemanticDataset, bounding_box, keypoint_pair
from crossview.errors import UserError

CATEGORIES = ("aeroplane", "bicycle", "bird", "boat", "bottle", "bus", "car", "cat", "chair",
              "cow", "diningtable", "dog", "horse", "motorbike", "person", "pottedplant",
              "sheep", "sofa", "train", "tvmonitor")
SPLITS = {"train": "trn", "trn": "trn", "val": "val", "test": "test"}


def _read_annotation(path: Path) -> tuple[np.ndarray, np.ndarray | None]:
    if not path.is_file():
        raise UserError(f"{path}: annotation not found; expected {PFPascal.LAYOUT}")
    try:
        mat = scipy.io.loadmat(str(path))
        kps = np.asarray(mat["kps"], np.float64).reshape(-1, 2)
    except (ValueError, KeyError, OSError) as error:
        raise UserError(f"{path}: not a PF-PASCAL annotation ({error!r})") from None
    return kps, bounding_box(mat["bbox"], str(path)) if "bbox" in mat else None


class PFPascal(SemanticDataset):
    """PF-PASCAL pairs of ``split`` (``trn``/``val``/``test``)."""

    LAYOUT = ("PF-PASCAL/ with JPEGImages/, Annotations/<category>/<image>.mat and "
              "<split>_pairs.csv")

    def __init__(self, root: str | Path, *, split: str = "test") -> None:
        super().__init__(root)
        if split not in SPLITS:
            raise UserError(f"PF-PASCAL split must be one of trn, val, test, got {split!r}")
        listing = self.root / f"{SPLITS[split]}_pairs.csv"
        if not listing.is_file():
            raise UserError(f"{listing}: not found; expected {self.LAYOUT}")
        entries = []
        with listing.open(newline="") as file:
            for row in csv.DictReader(file):
                try:
                    category = CATEGORIES[int(row["class"]) - 1]
                    entries.append((row["source_image"], row["target_image"], category))
                except (KeyError, ValueError, IndexError, TypeError):
                    raise UserError(f"{listing}: bad row {row}; expected columns "
                                    "source_image,target_image,class (1..20)") from None
        self.set_entries(entries)

    def load(self, entry: tuple[str, str, str]) -> Sample:
        src, tgt, category = entry
        images, keypoints, boxes = [], [], []
        for name in (src, tgt):
            images.append(io.read_image(self.root / name))
            kps, bbox = _read_annotation(self.root / "Annotations" / category /
                                         (Path(name).stem + ".mat"))
            keypoints.append(kps)
            boxes.append(bbox)
        kp0, kp1, valid = keypoint_pair(*keypoints, f"{self.root}: {src} / {tgt}")
        sample: Sample = {"name": f"{Path(src).stem}-{Path(tgt).stem}", "category": category,
                          "image0": images[0], "image1": images[1], "keypoints0": kp0,
                          "keypoints1": kp1, "valid_keypoints": valid}
        if boxes[0] is not None and boxes[1] is not None:
            sample["bbox0"], sample["bbox1"] = boxes
        return sample


# semantic correspondence: keypoint transfer, PCK per pair (crossview.metrics.keypoints)
register_dataset(DatasetKind(
    "pfpascal", "semantic", PFPascal, tuple(f"pck@{alpha}_img" for alpha in (0.05, 0.1, 0.15)),
    "image_mean", "PF-PASCAL (option: split=trn|val|test)"))
