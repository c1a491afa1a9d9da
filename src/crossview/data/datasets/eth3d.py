"""ETH3D low-res two-view stereo (training set, which has ground truth).

``root`` holds the two archives extracted side by side::

    two_view_training/delivery_area_1l/im0.png, im1.png, calib.txt
    two_view_training_gt/delivery_area_1l/disp0GT.pfm, mask0nocc.png

(the ground-truth files may also sit in the scene folders of ``two_view_training``). The
disparity PFM holds inf where unknown; ``mask0nocc.png`` is 255 on non-occluded pixels.
"""

from __future__ import annotations

from pathlib import Path

from crossview.data import io
from crossview.data.datasets.base import BenchmarkDataset, Sample, finite_or_zero, first_existing
from crossview.data.datasets.middlebury import NONOCC
from crossview.data.datasets.registry import DatasetKind, register_dataset


class ETH3D(BenchmarkDataset):
    """ETH3D two-view pairs with ``disparity``, ``valid`` and ``valid_noc``."""

    task = "stereo"
    LAYOUT = ("an ETH3D folder with two_view_training/SCENE/{im0.png, im1.png} and "
              "two_view_training_gt/SCENE/{disp0GT.pfm, mask0nocc.png}")

    def __init__(self, root: str | Path) -> None:
        super().__init__(root)
        entries = []
        for scene in sorted((self.root / "two_view_training").glob("*/im0.png")):
            gt = self._ground_truth_dir(scene.parent)
            if gt is not None:
                entries.append((scene.parent, gt))
        self.set_entries(entries)

    def _ground_truth_dir(self, scene: Path) -> Path | None:
        candidates = [self.root / "two_view_training_gt" / scene.name, scene]
        found = first_existing(path / "disp0GT.pfm" for path in candidates)
        return found.parent if found is not None else None

    def load(self, entry: tuple[Path, Path]) -> Sample:
        scene, gt = entry
        disparity, valid = finite_or_zero(io.read_pfm(gt / "disp0GT.pfm"))
        sample: Sample = {
            "name": scene.name,
            "image0": io.read_image(scene / "im0.png"),
            "image1": io.read_image(scene / "im1.png"),
            "disparity": disparity, "valid": valid,
        }
        if (gt / "mask0nocc.png").is_file():
            sample["valid_noc"] = valid & (io.read_image(gt / "mask0nocc.png")[..., 0] == NONOCC)
        return sample


register_dataset(DatasetKind(
    "eth3d", "stereo", ETH3D, ("bad1_noc", "bad1", "avgerr_noc", "avgerr"), "image_mean",
    "ETH3D two-view training"))
