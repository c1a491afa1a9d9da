"""SceneFlow (FlyingThings3D, Driving, Monkaa): stereo with disparity for both views, and
optical flow in both directions.

``root`` is one subset's folder holding the release's archives extracted side by side::

    frames_cleanpass/ (or frames_finalpass/)  SEQ/left/0006.png, SEQ/right/0006.png
    disparity/                                SEQ/left/0006.pfm, SEQ/right/0006.pfm
    optical_flow/                             SEQ/into_future/left/OpticalFlowIntoFuture_0006_L.pfm
                                              SEQ/into_past/left/OpticalFlowIntoPast_0006_L.pfm

where SEQ is ``TRAIN|TEST/A|B|C/0000`` for FlyingThings3D, ``15mm_focallength/scene_forwards/
fast`` for Driving and ``a_rain_of_stones_x2`` for Monkaa. Disparities are positive in both
views; the flow PFMs have three channels of which the first two are (u, v).
"""

from __future__ import annotations

import re
from functools import partial
from pathlib import Path

from crossview.data import io
from crossview.data.datasets.base import BenchmarkDataset, Sample, finite_or_zero, frame_number
from crossview.data.datasets.registry import DatasetKind, register_dataset
from crossview.errors import UserError

SEQUENCE_GLOBS = {
    "flyingthings3d": "{split}/*/*",
    "driving": "*/*/*",
    "monkaa": "*",
}
_LAYOUT = (
    "a SceneFlow {subset} folder with frames_{pass_}pass/{seq}/left/*.png, "
    "disparity/{seq}/left/*.pfm and optical_flow/{seq}/into_future/left/"
    "OpticalFlowIntoFuture_*_L.pfm"
)


FRAME = re.compile(r"(\d+)")


def _frames(camera: Path) -> dict[int, Path]:
    """The frames ``NNNN.png`` of one camera folder by number. Another ``.png`` file there is a
    :class:`UserError` naming it; other files and folders are not frames and are left alone."""
    return {frame_number(path, FRAME, "NNNN.png", "SceneFlow frames folder"): path
            for path in camera.glob("*.png") if path.is_file()}


def _check_options(subset: str, split: str, pass_: str, camera: str = "left") -> None:
    if subset not in SEQUENCE_GLOBS:
        raise UserError(f"unknown SceneFlow subset {subset!r}; known: {', '.join(SEQUENCE_GLOBS)}")
    if split not in ("train", "test"):
        raise UserError(f"SceneFlow split must be 'train' or 'test', got {split!r}")
    if pass_ not in ("clean", "final"):
        raise UserError(f"SceneFlow pass must be 'clean' or 'final', got {pass_!r}")
    if camera not in ("left", "right"):
        raise UserError(f"SceneFlow camera must be 'left' or 'right', got {camera!r}")


class _SceneFlow(BenchmarkDataset):
    def __init__(self, root: str | Path, subset: str, split: str, pass_: str) -> None:
        _check_options(subset, split, pass_)
        self.LAYOUT = _LAYOUT.format(subset=subset, pass_=pass_,
                                     seq=SEQUENCE_GLOBS[subset].format(split=split.upper()))
        super().__init__(root)
        self.frames = self.root / f"frames_{pass_}pass"
        pattern = SEQUENCE_GLOBS[subset].format(split=split.upper())
        self.sequences = sorted(p for p in self.frames.glob(pattern) if (p / "left").is_dir())


class SceneFlowStereo(_SceneFlow):
    """Left/right pairs with ``disparity``/``valid`` (left) and ``disparity1``/``valid1``
    (right). ``subset`` is flyingthings3d, driving or monkaa; ``split`` (train/test) only
    matters for FlyingThings3D; ``pass_`` is clean or final."""

    task = "stereo"

    def __init__(self, root: str | Path, *, subset: str = "flyingthings3d", split: str = "test",
                 pass_: str = "clean") -> None:
        super().__init__(root, subset, split, pass_)
        self.set_entries([image for sequence in self.sequences
                          for image in sorted(_frames(sequence / "left").values())])

    def load(self, entry: Path) -> Sample:
        relative = entry.relative_to(self.frames)
        disparity_left = self.root / "disparity" / relative.with_suffix(".pfm")
        disparity_right = disparity_left.parent.parent / "right" / disparity_left.name
        disparity, valid = finite_or_zero(io.read_pfm(disparity_left))
        disparity1, valid1 = finite_or_zero(io.read_pfm(disparity_right))
        return {
            "name": str(relative),
            "image0": io.read_image(entry),
            "image1": io.read_image(entry.parent.parent / "right" / entry.name),
            "disparity": disparity, "valid": valid,
            "disparity1": disparity1, "valid1": valid1,
        }


class SceneFlowFlow(_SceneFlow):
    """Consecutive frames ``t``, ``t+1`` of one camera with ``flow`` (into_future at ``t``)
    and ``flow_backward`` (into_past at ``t+1``)."""

    task = "flow"

    def __init__(self, root: str | Path, *, subset: str = "flyingthings3d", split: str = "test",
                 pass_: str = "clean", camera: str = "left") -> None:
        _check_options(subset, split, pass_, camera)
        super().__init__(root, subset, split, pass_)
        self.camera = camera
        entries = []
        for sequence in self.sequences:
            frames = _frames(sequence / camera)
            entries += [(frames[t], frames[t + 1]) for t in sorted(frames) if t + 1 in frames]
        self.set_entries(entries)

    def _flow(self, frame: Path, direction: str) -> Path:
        sequence = frame.parent.parent.relative_to(self.frames)
        side = "L" if self.camera == "left" else "R"
        word = "Future" if direction == "future" else "Past"
        name = f"OpticalFlowInto{word}_{frame.stem}_{side}.pfm"
        return self.root / "optical_flow" / sequence / f"into_{direction}" / self.camera / name

    def load(self, entry: tuple[Path, Path]) -> Sample:
        first, second = entry
        flow, valid = finite_or_zero(io.read_pfm(self._flow(first, "future"))[..., :2])
        backward, valid1 = finite_or_zero(io.read_pfm(self._flow(second, "past"))[..., :2])
        return {
            "name": str(first.relative_to(self.frames)),
            "image0": io.read_image(first),
            "image1": io.read_image(second),
            "flow": flow, "valid": valid,
            "flow_backward": backward, "valid1": valid1,
        }


for _subset in ("flyingthings3d", "driving", "monkaa"):
    register_dataset(DatasetKind(
        _subset, "stereo", partial(SceneFlowStereo, subset=_subset), ("epe", "bad1", "bad3"),
        "image_mean", f"SceneFlow {_subset} stereo (options: split=train|test, pass=clean|final)"))
    register_dataset(DatasetKind(
        f"{_subset}-flow", "flow", partial(SceneFlowFlow, subset=_subset),
        ("epe", "1px", "3px", "5px"), "image_mean",
        f"SceneFlow {_subset} optical flow (options: split, pass, camera=left|right)"))
