"""KITTI 2012 and 2015 stereo and optical flow (training sets, which have ground truth).

``root`` is the folder holding ``training/`` (or ``training/`` itself)::

    2015: training/image_2/000000_10.png, _11.png    left camera, frames t and t+1
          training/image_3/000000_10.png             right camera
          training/disp_occ_0/000000_10.png          disparity, all pixels with ground truth
          training/disp_noc_0/000000_10.png          disparity, non-occluded pixels only
          training/flow_occ/000000_10.png, flow_noc/ flow t -> t+1
    2012: training/colored_0/, colored_1/            left and right colour cameras
          training/disp_occ/, disp_noc/, flow_occ/, flow_noc/

Disparity maps are 16-bit PNGs (``d * 256``, 0 = unknown), flow maps 16-bit RGB PNGs (see
:mod:`crossview.data.io`). ``valid`` comes from the ``occ`` maps and ``valid_noc`` from the
``noc`` maps; the values are those of the ``occ`` map.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

from crossview.data import io
from crossview.data.datasets.base import BenchmarkDataset, Sample
from crossview.data.datasets.registry import DatasetKind, register_dataset
from crossview.errors import UserError

FOLDERS = {
    2012: {"left": "colored_0", "right": "colored_1", "disp_occ": "disp_occ",
           "disp_noc": "disp_noc"},
    2015: {"left": "image_2", "right": "image_3", "disp_occ": "disp_occ_0",
           "disp_noc": "disp_noc_0"},
}


class _KITTI(BenchmarkDataset):
    ground_truth = ""

    def __init__(self, root: str | Path, year: int | str) -> None:
        # ``year`` may come as text from a ``KIND,year=...`` dataset option
        year = int(year) if str(year).strip().isdigit() else year
        if year not in FOLDERS:
            raise UserError(f"KITTI year must be 2012 or 2015, got {year!r}")
        self.folders = {**FOLDERS[year], "flow_occ": "flow_occ", "flow_noc": "flow_noc"}
        self.LAYOUT = (f"the KITTI {year} folder with training/{self.folders['left']}/"
                       f"NNNNNN_10.png and training/{self.folders[self.ground_truth]}/"
                       "NNNNNN_10.png")
        super().__init__(root)
        self.training = self.root / "training" if (self.root / "training").is_dir() else self.root
        self.year = year
        gt_dir = self.training / self.folders[self.ground_truth]
        self.set_entries(sorted(path.name for path in gt_dir.glob("*_10.png")
                                if (self.training / self.folders["left"] / path.name).is_file()))

    def _path(self, folder: str, name: str) -> Path:
        return self.training / self.folders[folder] / name


class KITTIStereo(_KITTI):
    """KITTI stereo pairs (left = ``image0``) with ``disparity``, ``valid``, ``valid_noc``."""

    task = "stereo"
    ground_truth = "disp_occ"

    def __init__(self, root: str | Path, *, year: int | str = 2015) -> None:
        super().__init__(root, year)

    def load(self, entry: str) -> Sample:
        disparity, valid = io.read_kitti_disparity(self._path("disp_occ", entry))
        _, valid_noc = io.read_kitti_disparity(self._path("disp_noc", entry))
        return {
            "name": entry,
            "image0": io.read_image(self._path("left", entry)),
            "image1": io.read_image(self._path("right", entry)),
            "disparity": disparity, "valid": valid, "valid_noc": valid_noc & valid,
        }


class KITTIFlow(_KITTI):
    """KITTI flow pairs (left camera, frames 10 -> 11) with ``flow``, ``valid``,
    ``valid_noc``."""

    task = "flow"
    ground_truth = "flow_occ"

    def __init__(self, root: str | Path, *, year: int | str = 2015) -> None:
        super().__init__(root, year)

    def load(self, entry: str) -> Sample:
        flow, valid = io.read_kitti_flow(self._path("flow_occ", entry))
        _, valid_noc = io.read_kitti_flow(self._path("flow_noc", entry))
        return {
            "name": entry,
            "image0": io.read_image(self._path("left", entry)),
            "image1": io.read_image(self._path("left", entry.replace("_10.", "_11."))),
            "flow": flow, "valid": valid, "valid_noc": valid_noc & valid,
        }


# (kind, task, reader, year, the metrics the benchmark reports)
for _name, _task, _reader, _year, _metrics in (
        ("kitti2015", "stereo", KITTIStereo, 2015, ("d1_all", "d1_all_noc", "epe", "epe_noc")),
        ("kitti2012", "stereo", KITTIStereo, 2012, ("bad3_noc", "bad3", "epe_noc", "epe")),
        ("kitti2015-flow", "flow", KITTIFlow, 2015, ("fl_all", "fl_all_noc", "epe", "epe_noc")),
        ("kitti2012-flow", "flow", KITTIFlow, 2012, ("out3_noc", "out3", "epe_noc", "epe"))):
    register_dataset(DatasetKind(_name, _task, partial(_reader, year=_year), _metrics, "pooled",
                                 f"KITTI {_year} {_task} training"))
