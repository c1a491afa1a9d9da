"""MPI Sintel optical flow and Sintel stereo (training sets, which have ground truth).

Flow (``root`` is the ``MPI-Sintel-complete`` folder, holding ``training/``)::

    training/clean/alley_1/frame_0001.png   (or final/)
    training/flow/alley_1/frame_0001.flo    flow frame_0001 -> frame_0002
    training/occlusions/alley_1/frame_0001.png, training/invalid/alley_1/frame_0001.png

Stereo (``root`` is the ``MPI-Sintel-stereo-training`` folder, holding ``training/``)::

    training/clean_left/alley_1/frame_0001.png, clean_right/ (or final_left/, final_right/)
    training/disparities/alley_1/frame_0001.png     disparity = R * 4 + G / 2**6 + B / 2**14
    training/occlusions/alley_1/frame_0001.png      set where the pixel is hidden in the right view
    training/outofframe/alley_1/frame_0001.png      set where it leaves the right frame

Masks are single-channel PNGs, non-zero where set. Flow: ``valid`` excludes ``invalid``
pixels and ``valid_noc`` also the occluded ones. Stereo: ``valid`` excludes out-of-frame
pixels (which Sintel does not evaluate) and ``valid_noc`` also the occluded ones.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from crossview.data import io
from crossview.data.datasets.base import BenchmarkDataset, Sample, frame_number
from crossview.data.datasets.registry import DatasetKind, register_dataset
from crossview.errors import UserError

PASSES = ("clean", "final")
FRAME = re.compile(r"frame_(\d+)")


def _check_pass(pass_: str) -> None:
    if pass_ not in PASSES:
        raise UserError(f"Sintel pass must be 'clean' or 'final', got {pass_!r}")


def _mask(path: Path, shape: tuple[int, ...]) -> np.ndarray:
    """A Sintel mask as bool ``[H, W]``; an absent file means nothing is set."""
    if not path.is_file():
        return np.zeros(shape, bool)
    return io.read_image(path)[..., 0] > 0


def decode_disparity(image: np.ndarray) -> np.ndarray:
    """Sintel stereo disparity from its 8-bit RGB encoding ``[H, W, 3]``: ``R * 4 + G / 2**6 +
    B / 2**14`` (the release's SDK), as float32 ``[H, W]`` (exact: 24 significant bits)."""
    rgb = image.astype(np.float64)
    return (rgb[..., 0] * 4 + rgb[..., 1] / 2**6 + rgb[..., 2] / 2**14).astype(np.float32)


def _training(root: Path) -> Path:
    return root / "training" if (root / "training").is_dir() else root


class SintelFlow(BenchmarkDataset):
    """Sintel flow pairs (``frame_i`` -> ``frame_i+1``) with ``flow``, ``valid``,
    ``valid_noc``; ``pass_`` is clean or final."""

    task = "flow"
    LAYOUT = ("an MPI-Sintel folder with training/{clean,final}/SCENE/frame_NNNN.png and "
              "training/flow/SCENE/frame_NNNN.flo")

    def __init__(self, root: str | Path, *, pass_: str = "clean") -> None:
        _check_pass(pass_)
        super().__init__(root)
        self.training = _training(self.root)
        self.images = self.training / pass_
        entries = []
        for flow in sorted(self.training.glob("flow/*/frame_*.flo")):
            first = self.images / flow.parent.name / flow.with_suffix(".png").name
            number = frame_number(flow, FRAME, "frame_NNNN.flo", "Sintel flow folder")
            second = first.with_name(f"frame_{number + 1:04d}.png")
            if first.is_file() and second.is_file():
                entries.append((flow, first, second))
        self.set_entries(entries)

    def load(self, entry: tuple[Path, Path, Path]) -> Sample:
        flow_path, first, second = entry
        flow = io.read_flo(flow_path)
        scene, name = flow_path.parent.name, first.name
        shape = flow.shape[:2]
        valid = ~_mask(self.training / "invalid" / scene / name, shape)
        occluded = _mask(self.training / "occlusions" / scene / name, shape)
        return {
            "name": f"{scene}/{name}",
            "image0": io.read_image(first),
            "image1": io.read_image(second),
            "flow": flow, "valid": valid, "valid_noc": valid & ~occluded,
        }


class SintelStereo(BenchmarkDataset):
    """Sintel stereo pairs with ``disparity``, ``valid``, ``valid_noc``; ``pass_`` is clean or
    final."""

    task = "stereo"
    LAYOUT = ("an MPI-Sintel-stereo folder with training/{clean,final}_left/SCENE/"
              "frame_NNNN.png, ..._right/ and training/disparities/SCENE/frame_NNNN.png")

    def __init__(self, root: str | Path, *, pass_: str = "clean") -> None:
        _check_pass(pass_)
        super().__init__(root)
        self.training = _training(self.root)
        self.pass_ = pass_
        disparities = sorted(self.training.glob("disparities/*/frame_*.png"))
        for path in disparities:
            frame_number(path, FRAME, "frame_NNNN.png", "Sintel disparities folder")
        self.set_entries([
            path.relative_to(self.training / "disparities") for path in disparities
            if (self.training / f"{pass_}_left" / path.relative_to(
                self.training / "disparities")).is_file()
        ])

    def load(self, entry: Path) -> Sample:
        disparity = decode_disparity(io.read_image(self.training / "disparities" / entry))
        shape = disparity.shape
        valid = ~_mask(self.training / "outofframe" / entry, shape)
        occluded = _mask(self.training / "occlusions" / entry, shape)
        return {
            "name": str(entry),
            "image0": io.read_image(self.training / f"{self.pass_}_left" / entry),
            "image1": io.read_image(self.training / f"{self.pass_}_right" / entry),
            "disparity": disparity, "valid": valid, "valid_noc": valid & ~occluded,
        }


register_dataset(DatasetKind(
    "sintel", "flow", SintelFlow, ("epe", "epe_noc", "1px", "3px", "5px"), "pooled",
    "MPI Sintel flow training (option: pass=clean|final)"))
register_dataset(DatasetKind(
    "sintel-stereo", "stereo", SintelStereo, ("epe", "epe_noc", "bad1", "bad3"), "pooled",
    "MPI Sintel stereo training (option: pass=clean|final)"))
