"""PF-WILLOW (Ham et al. 2016), test pairs::

    PF-WILLOW/
      test_pairs.csv      header "imageA,imageB,XA1..XA10,YA1..YA10,XB1..XB10,YB1..YB10";
                          images are given as "PF-dataset/<class>/<image>.png"
      car(G)/ car(M)/ car(S)/ duck(S)/ motorbike(G)/ motorbike(M)/ motorbike(S)/
      winebottle(M)/ winebottle(wC)/ winebottle(woC)/      the images

Each pair has 10 keypoints. There are no boxes: PCK on PF-WILLOW uses the ``bbox-kp``
threshold (extent of the valid target keypoints).
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from crossview.data import io
from crossview.data.datasets.base import Sample
from crossview.data.datasets.registry import DatasetKind, register_dataset
from crossview.data.datasets.semantic import SemanticDataset, keypoint_pair
from crossview.errors import UserError

RELEASE_PREFIX = "PF-dataset/"


class PFWillow(SemanticDataset):
    """The 900 PF-WILLOW test pairs listed in ``test_pairs.csv``."""

    LAYOUT = "PF-WILLOW/ with test_pairs.csv and the <class>(<subset>)/ image folders"

    def __init__(self, root: str | Path) -> None:
        super().__init__(root)
        listing = self.root / "test_pairs.csv"
        if not listing.is_file():
            raise UserError(f"{listing}: not found; expected {self.LAYOUT}")
        entries = []
        with listing.open(newline="") as file:
            reader = csv.reader(file)
            header = next(reader, None)
            if header is None or len(header) != 42:
                raise UserError(f"{listing}: expected a header of 42 columns "
                                "(imageA, imageB, XA1..XA10, YA1..YA10, XB1..XB10, YB1..YB10)")
            for line, row in enumerate(reader, start=2):
                try:
                    coords = np.asarray(row[2:], np.float64).reshape(4, 10)
                except ValueError:
                    raise UserError(f"{listing}:{line}: expected 40 numbers after the two "
                                    "image names") from None
                entries.append((row[0], row[1], coords))
        self.set_entries(entries)

    def _image_path(self, name: str) -> Path:
        return self.root / name.removeprefix(RELEASE_PREFIX)

    def load(self, entry: tuple[str, str, np.ndarray]) -> Sample:
        src, tgt, coords = entry
        xa, ya, xb, yb = coords
        kp0, kp1, valid = keypoint_pair(np.stack((xa, ya), 1), np.stack((xb, yb), 1),
                                        f"{self.root}: {src} / {tgt}")
        category = Path(src).parent.name.split("(")[0]
        return {"name": f"{Path(src).stem}-{Path(tgt).stem}", "category": category,
                "image0": io.read_image(self._image_path(src)),
                "image1": io.read_image(self._image_path(tgt)),
                "keypoints0": kp0, "keypoints1": kp1, "valid_keypoints": valid}


# semantic correspondence: keypoint transfer, PCK per pair (crossview.metrics.keypoints)
register_dataset(DatasetKind(
    "pfwillow", "semantic", PFWillow, tuple(f"pck@{alpha}_bbox-kp" for alpha in (0.05, 0.1, 0.15)),
    "image_mean", "PF-WILLOW test pairs"))
