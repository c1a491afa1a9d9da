"""PF-WILLOW (Ham et al. 2016): 900 test pairs of 100 images, 10 keypoints each, in either of
two layouts.

The release (the ``test_pairs.csv`` of the cnngeometric / Proposal Flow pages)::

    PF-WILLOW/
      test_pairs.csv      header "imageA,imageB,XA1..XA10,YA1..YA10,XB1..XB10,YB1..YB10";
                          images are given as "PF-dataset/<class>/<image>.png"
      car(G)/ car(M)/ car(S)/ duck(S)/ motorbike(G)/ motorbike(M)/ motorbike(S)/
      winebottle(M)/ winebottle(wC)/ winebottle(woC)/      the images

A folder rebuilt from the per-image annotations (``../shared/real-semantic``)::

    pairs.csv       src_image,trg_image,category,src_kps,trg_kps,subclass
    keypoints.csv   image,category,subclass,width,height,kps
    images/<subclass>/<name>.png        (brackets of the subclass replaced: car_G)

where ``kps`` is ``x1;y1;...;x10;y10`` and image paths are relative to the folder; the keypoints
of a pair must be those that ``keypoints.csv`` lists for its two images.

Both hold the annotation tool's 1-based MATLAB coordinates; samples carry 0-based pixel
coordinates (1 subtracted), the convention of :mod:`.semantic`.

PCK thresholds (:mod:`crossview.metrics.keypoints`): ``bbox-kp``, the extent of the target
keypoints (the PF-WILLOW convention), and ``bbox``: ``bbox1`` is the box from the padding point
to the largest target keypoint coordinates, ``(-2, -2, max x, max y)`` in 0-based pixels. That is
the "bbox" of the public evaluation code that TransforMatcher's table reports (it pads the
keypoint list with (-1, -1), 1-based, and takes the extent of the padded list); see
docs/results/pfwillow/README.md.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from crossview.data import io
from crossview.data.datasets.base import Sample
from crossview.data.datasets.registry import DatasetKind, register_dataset
from crossview.data.datasets.semantic import SemanticDataset, keypoint_pair
from crossview.errors import UserError

RELEASE_PREFIX = "PF-dataset/"
KEYPOINTS = 10
MATLAB_ORIGIN = 1.0  # annotations count pixels from 1
PAD_POINT = -1.0 - MATLAB_ORIGIN  # the padding point of the "bbox" convention, 0-based
KEYPOINT_MATCH = 1e-3  # px: pairs.csv and keypoints.csv hold the same 4-decimal numbers
FOLDER_PAIRS = ("src_image", "trg_image", "category", "src_kps", "trg_kps", "subclass")
FOLDER_IMAGES = ("image", "category", "subclass", "width", "height", "kps")


def _csv_rows(path: Path, columns: tuple[str, ...]) -> Iterator[tuple[int, dict[str, str]]]:
    """``(line number, row)`` of the CSV file ``path`` whose header must hold ``columns``; a
    row with another number of fields, or text that is not UTF-8, is a :class:`UserError`
    naming the file and line."""
    with path.open(newline="", encoding="utf-8") as file:
        reader = csv.reader(file)
        try:
            header = next(reader, None)
            if header is None or not set(columns) <= set(header):
                raise UserError(f"{path}: expected a header with the columns "
                                f"{','.join(columns)}")
            for fields in reader:
                if not fields:
                    continue
                if len(fields) != len(header):
                    raise UserError(f"{path}:{reader.line_num}: {len(fields)} fields, the "
                                    f"header has {len(header)}")
                yield reader.line_num, dict(zip(header, fields, strict=True))
        except UnicodeDecodeError:
            raise UserError(f"{path}:{reader.line_num + 1}: not UTF-8 text") from None


def _keypoints(text: str, where: str) -> np.ndarray:
    """``"x1;y1;...;x10;y10"`` -> ``[10, 2]`` float64 (as written)."""
    try:
        values = np.asarray([float(v) for v in text.split(";")], np.float64)
    except ValueError:
        values = np.empty(0)
    if values.shape != (2 * KEYPOINTS,) or not np.isfinite(values).all():
        raise UserError(f"{where}: expected {KEYPOINTS} keypoints as {2 * KEYPOINTS} finite "
                        f"numbers x1;y1;...;x{KEYPOINTS};y{KEYPOINTS}")
    return values.reshape(KEYPOINTS, 2)


def _size(row: dict[str, str], where: str) -> tuple[int, int]:
    """``(height, width)`` of a ``keypoints.csv`` row."""
    try:
        height, width = int(row["height"]), int(row["width"])
    except ValueError:
        raise UserError(f"{where}: width and height must be whole numbers, got "
                        f"{row['width']!r} and {row['height']!r}") from None
    if height < 1 or width < 1:
        raise UserError(f"{where}: width and height must be positive")
    return height, width


def _require_file(path: Path, where: str) -> None:
    if not path.is_file():
        raise UserError(f"{where}: image {path} not found")


class PFWillow(SemanticDataset):
    """The 900 PF-WILLOW test pairs, from ``test_pairs.csv`` (release) or ``pairs.csv`` and
    ``keypoints.csv`` (rebuilt folder). An entry is ``(source path, target path, subclass,
    keypoints [2, 10, 2] 0-based, target size (H, W) or None)``."""

    LAYOUT = ("PF-WILLOW/ with test_pairs.csv and the <class>(<subset>)/ image folders, or a "
              "folder with pairs.csv, keypoints.csv and images/<subclass>/")

    def __init__(self, root: str | Path) -> None:
        super().__init__(root)
        if (self.root / "test_pairs.csv").is_file():
            entries = self._release_entries(self.root / "test_pairs.csv")
        elif (self.root / "pairs.csv").is_file():
            entries = self._folder_entries(self.root / "pairs.csv",
                                           self.root / "keypoints.csv")
        else:
            raise UserError(f"{self.root}: neither test_pairs.csv nor pairs.csv found; expected "
                            f"{self.LAYOUT}")
        self.set_entries(entries)

    def _release_entries(self, listing: Path) -> list[tuple]:
        entries = []
        with listing.open(newline="", encoding="utf-8") as file:
            reader = csv.reader(file)
            try:
                header = next(reader, None)
                rows = list(reader)
            except UnicodeDecodeError:
                raise UserError(f"{listing}:{reader.line_num + 1}: not UTF-8 text") from None
        if header is None or len(header) != 2 + 4 * KEYPOINTS:
            raise UserError(f"{listing}: expected a header of 42 columns "
                            "(imageA, imageB, XA1..XA10, YA1..YA10, XB1..XB10, YB1..YB10)")
        for line, row in enumerate(rows, start=2):
            try:
                coords = np.asarray(row[2:], np.float64).reshape(4, KEYPOINTS)
            except ValueError:
                raise UserError(f"{listing}:{line}: expected 40 numbers after the two "
                                "image names") from None
            xa, ya, xb, yb = coords - MATLAB_ORIGIN
            src, tgt = (self.root / name.removeprefix(RELEASE_PREFIX) for name in row[:2])
            entries.append((src, tgt, src.parent.name,
                            np.stack((np.stack((xa, ya), 1), np.stack((xb, yb), 1))), None))
        return entries

    def _folder_entries(self, listing: Path, images: Path) -> list[tuple]:
        if not images.is_file():
            raise UserError(f"{images}: not found; expected {self.LAYOUT}")
        known: dict[str, tuple[str, str, tuple[int, int], np.ndarray]] = {}
        for line, row in _csv_rows(images, FOLDER_IMAGES):
            where = f"{images}:{line}"
            _require_file(self.root / row["image"], where)
            known[row["image"]] = (row["category"], row["subclass"], _size(row, where),
                                   _keypoints(row["kps"], where))
        entries = []
        for line, row in _csv_rows(listing, FOLDER_PAIRS):
            where = f"{listing}:{line}"
            points = []
            for image, column in ((row["src_image"], "src_kps"), (row["trg_image"], "trg_kps")):
                if image not in known:
                    raise UserError(f"{where}: image {image} is not listed in {images.name}")
                category, subclass, _, listed = known[image]
                kps = _keypoints(row[column], f"{where}: {column}")
                if (category, subclass) != (row["category"], row["subclass"]):
                    raise UserError(f"{where}: {image} is {category} / {subclass} in "
                                    f"{images.name}, not {row['category']} / {row['subclass']}")
                if np.abs(kps - listed).max() > KEYPOINT_MATCH:
                    raise UserError(f"{where}: {column} differ from the keypoints "
                                    f"{images.name} lists for {image}")
                points.append(listed - MATLAB_ORIGIN)
            entries.append((self.root / row["src_image"], self.root / row["trg_image"],
                            row["subclass"], np.stack(points), known[row["trg_image"]][2]))
        return entries

    def load(self, entry: tuple) -> Sample:
        src, tgt, subclass, points, tgt_size = entry
        kp0, kp1, valid = keypoint_pair(points[0], points[1], f"{src} / {tgt}")
        image0, image1 = io.read_image(src), io.read_image(tgt)
        if tgt_size is not None and image1.shape[:2] != tgt_size:
            raise UserError(f"{tgt}: image is {image1.shape[1]} x {image1.shape[0]} px, "
                            f"keypoints.csv says {tgt_size[1]} x {tgt_size[0]}")
        if not valid.any():
            raise UserError(f"{src} / {tgt}: no keypoint is annotated in both images")
        top = kp1[valid].max(axis=0)
        return {"name": f"{subclass}/{src.stem}-{tgt.stem}", "category": subclass.split("(")[0],
                "subclass": subclass, "image0": image0, "image1": image1,
                "keypoints0": kp0, "keypoints1": kp1, "valid_keypoints": valid,
                "bbox1": np.array([PAD_POINT, PAD_POINT, *top], np.float32)}


# semantic correspondence: keypoint transfer, PCK per pair (crossview.metrics.keypoints)
register_dataset(DatasetKind(
    "pfwillow", "semantic", PFWillow,
    tuple(f"pck@{alpha}_{kind}" for kind in ("bbox-kp", "bbox") for alpha in (0.05, 0.1, 0.15)),
    "image_mean", "PF-WILLOW test pairs", baseline=True))
