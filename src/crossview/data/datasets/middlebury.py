"""Middlebury stereo: MiddEval3 (v3 benchmark) and the 2014 full-size scenes.

MiddEval3 (``root`` is the ``MiddEval3`` folder, or one of its ``training?`` folders)::

    trainingF/Adirondack/im0.png, im1.png, disp0GT.pfm, mask0nocc.png, calib.txt
    trainingH/..., trainingQ/...     (half and quarter resolution)

2014 scenes (``root`` holds the scene folders)::

    Adirondack-perfect/im0.png, im1.png, disp0.pfm, disp1.pfm, calib.txt

Ground truth is a PFM with inf where unknown; ``mask0nocc.png`` is 255 on non-occluded pixels
(128 occluded, 0 unknown). ``calib.txt`` holds ``key=value`` lines, among them ``ndisp`` (a
conservative bound on the disparity range, which a method may use): a file without it is an
error, since no default would be correct.
"""

from __future__ import annotations

from pathlib import Path

from crossview.data import io
from crossview.data.calibration import read_key_values
from crossview.data.datasets.base import BenchmarkDataset, Sample, finite_or_zero, first_existing
from crossview.data.datasets.registry import DatasetKind, register_dataset
from crossview.errors import UserError

RESOLUTIONS = ("F", "H", "Q")
NONOCC = 255


def _ndisp(path: Path) -> int:
    """The ``ndisp`` of a ``calib.txt``: the release's conservative bound on the disparity
    range. It has no safe default (0 would claim an empty range), so a file without it is an
    error naming the file."""
    calib = read_key_values(path)
    if "ndisp" not in calib:
        raise UserError(f"{path}: no ndisp= line (every Middlebury calib.txt gives the "
                        "disparity search range)")
    value = calib["ndisp"]
    try:
        return int(value)
    except ValueError:
        raise UserError(f"{path}: ndisp={value!r} is not an integer") from None


class Middlebury(BenchmarkDataset):
    """Middlebury scenes with ``disparity``/``valid``, ``valid_noc`` (when ``mask0nocc.png``
    exists), ``disparity1``/``valid1`` (when the right-view ground truth exists) and ``ndisp``.

    ``resolution`` (F, H or Q) picks the ``training?`` folder of a MiddEval3 root.
    """

    task = "stereo"
    LAYOUT = ("a MiddEval3 folder with trainingF|H|Q/SCENE/{im0.png, im1.png, disp0GT.pfm, "
              "mask0nocc.png, calib.txt}, or a folder of 2014 scenes SCENE/{im0.png, im1.png, "
              "disp0.pfm, calib.txt}")

    def __init__(self, root: str | Path, *, resolution: str = "F") -> None:
        super().__init__(root)
        if resolution not in RESOLUTIONS:
            raise UserError(f"Middlebury resolution must be one of F, H, Q; got {resolution!r}")
        scenes_dir = first_existing([self.root / f"training{resolution}",
                                     self.root / "MiddEval3" / f"training{resolution}"])
        scenes_dir = scenes_dir or self.root
        self.set_entries([
            scene for scene in sorted(scenes_dir.iterdir())
            if (scene / "im0.png").is_file()
            and first_existing([scene / "disp0GT.pfm", scene / "disp0.pfm"]) is not None
        ])

    def load(self, entry: Path) -> Sample:
        sample: Sample = {
            "name": entry.name,
            "image0": io.read_image(entry / "im0.png"),
            "image1": io.read_image(entry / "im1.png"),
            "ndisp": _ndisp(entry / "calib.txt"),
        }
        disparity_path = first_existing([entry / "disp0GT.pfm", entry / "disp0.pfm"])
        sample["disparity"], sample["valid"] = finite_or_zero(io.read_pfm(disparity_path))
        mask_path = entry / "mask0nocc.png"
        if mask_path.is_file():
            mask = io.read_image(mask_path)[..., 0]
            sample["valid_noc"] = sample["valid"] & (mask == NONOCC)
        right = first_existing([entry / "disp1GT.pfm", entry / "disp1.pfm"])
        if right is not None:
            sample["disparity1"], sample["valid1"] = finite_or_zero(io.read_pfm(right))
        return sample


MIDDEVAL3_NOTE = ("MiddEval3's online tables average the scenes with per-scene weights; these "
                  "are unweighted means over the images (the per-scene weights are not applied), "
                  "so they are not the tables' averages")
METRICS = ("avgerr", "bad0.5", "bad1", "bad2", "bad4")
register_dataset(DatasetKind(
    "middlebury", "stereo", Middlebury, METRICS + tuple(f"{name}_noc" for name in METRICS),
    "image_mean", "Middlebury MiddEval3 training (option: resolution=F|H|Q)",
    note=MIDDEVAL3_NOTE))
register_dataset(DatasetKind(
    "middlebury2014", "stereo", Middlebury, METRICS, "image_mean",
    "Middlebury 2014 full-size scenes (no occlusion masks)"))
