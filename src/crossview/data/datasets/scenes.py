"""Real scenes, one folder each: a stereo or an optical-flow pair with ground truth, any source.

``root`` holds one folder per scene, or is itself one scene folder::

    SCENE/left.png, right.png, gt.npy           stereo: disparity of the left image (positive:
                                                left (x, y) matches right (x - d, y))
          sgbm.npy                              optional: cached OpenCV SGBM output
    SCENE/frame0.png, frame1.png, flow.npy      flow: (u, v) px, frame0 (x, y) moves to
                                                (x + u, y + v) in frame1
          dis_medium.npy                        optional: cached OpenCV DIS output

The task of a folder follows from its files (``left.*``/``right.*``: stereo, ``frame0.*``/
``frame1.*``: flow); a root may mix both, and :class:`SceneFolders` keeps the scenes of the
``task`` it is asked for. Images may be any file :func:`crossview.data.io.read_image` reads.
Ground truth, by suffix (every reader is :mod:`crossview.data.io`'s):

=========  ==============================================  =====================================
suffix     stereo ``gt.*``                                 flow ``flow.*``
=========  ==============================================  =====================================
``.npy``   float ``[H, W]``, NaN (or inf) = unknown        float ``[H, W, 2]``, NaN/inf = unknown
``.pfm``   ``Pf`` ``[H, W]``, inf = unknown (Middlebury)   ``PF`` ``[H, W, 3]`` (u, v, 0), inf =
                                                           unknown (SceneFlow)
``.png``   KITTI 16-bit disparity (``d * 256``, 0 =        KITTI 16-bit flow with its valid bit
           unknown)
``.flo``   (not a disparity format)                        Middlebury ``.flo``, ``> 1e9`` unknown
=========  ==============================================  =====================================

An 8-bit disparity PNG (Middlebury 2001-2006 ``disp2.png``) is refused: its scale (4 at quarter
size, 1 at full size) is not in the file; convert it to ``.npy`` or ``.pfm``. A missing file, a
ground truth of another size than the images, of the wrong dtype or number of channels, without
any known pixel, or with negative known disparities, and a cached baseline of the wrong layout
are :class:`~crossview.errors.UserError`\\ s naming the file.

Samples carry the keys of :mod:`.base` (``name`` is the folder's name; ``valid`` marks known
ground truth) and, when the folder has a cached baseline, ``baseline``: the cached prediction in
the task's layout (disparity ``[H, W]`` or flow ``[H, W, 2]`` float32, NaN where the method left
a hole; an SGBM file holds OpenCV's raw int16 ``disparity * 16``, negative = hole).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np

from crossview.data import io
from crossview.data.datasets.base import BenchmarkDataset, Sample, finite_or_zero
from crossview.data.datasets.registry import DatasetKind, register_dataset
from crossview.data.sgbm_raw import SGBM_SCALE, disparity_from_sgbm
from crossview.errors import UserError

TASKS = ("stereo", "flow")
# task -> (first image, second image, ground truth, cached baseline)
FILES = {"stereo": ("left", "right", "gt", "sgbm.npy"),
         "flow": ("frame0", "frame1", "flow", "dis_medium.npy")}
GROUND_TRUTH_SUFFIXES = {"stereo": (".npy", ".pfm", ".png"),
                         "flow": (".npy", ".pfm", ".png", ".flo")}


@dataclass(frozen=True)
class Scene:
    """One scene folder: its task, its two images, ground truth and cached baseline (or
    None)."""

    folder: Path
    task: str
    image0: Path
    image1: Path
    ground_truth: Path
    cached: Path | None

    @property
    def name(self) -> str:
        """The folder's name (also when the root, given as ``.``, is the scene)."""
        return self.folder.resolve().name


def _task_of(folder: Path, names: set[str]) -> str | None:
    """The task a folder's file stems point to (None: no image of either task)."""
    tasks = [task for task in TASKS if names & set(FILES[task][:2])]
    if len(tasks) > 1:
        raise UserError(f"{folder}: holds both stereo (left/right) and flow (frame0/frame1) "
                        "images; put each scene in its own folder")
    return tasks[0] if tasks else None


def _one_file(folder: Path, stem: str, suffixes: tuple[str, ...], task: str) -> Path:
    """The file ``stem.*`` of ``folder`` (exactly one, with one of ``suffixes``)."""
    found = sorted(path for path in folder.iterdir() if path.is_file() and path.stem == stem)
    first, second, truth, _ = FILES[task]
    needs = f"a {task} scene needs {first}.*, {second}.* and {truth}.*"
    if not found:
        raise UserError(f"{folder / stem}.*: missing ({needs})")
    if len(found) > 1:
        raise UserError(f"{folder}: several {stem}.* files ({', '.join(p.name for p in found)}); "
                        "keep one")
    if found[0].suffix.lower() not in suffixes:
        raise UserError(f"{found[0]}: unsupported file type (expected {stem} with one of "
                        f"{', '.join(suffixes)})")
    return found[0]


def _scene(folder: Path) -> Scene | None:
    """The scene in ``folder``, or None if it holds no scene image at all."""
    names = {path.stem for path in folder.iterdir() if path.is_file()}
    task = _task_of(folder, names)
    if task is None:
        return None
    first, second, truth, cached = FILES[task]
    images = tuple(s.lower() for s in io.IMAGE_SUFFIXES)
    return Scene(folder, task, _one_file(folder, first, images, task),
                 _one_file(folder, second, images, task),
                 _one_file(folder, truth, GROUND_TRUTH_SUFFIXES[task], task),
                 folder / cached if (folder / cached).is_file() else None)


def _float_array(path: Path, shape: str, ndim: int, channels: int | None) -> np.ndarray:
    """A ``.npy`` array of ``ndim`` dims (last one ``channels`` long) and a float dtype."""
    array = io.read_npy(path)
    if array.ndim != ndim or (channels is not None and array.shape[-1] != channels):
        raise UserError(f"{path}: expected {shape}, got shape {array.shape}")
    if not np.issubdtype(array.dtype, np.floating):
        raise UserError(f"{path}: expected float values (NaN = unknown), got {array.dtype}")
    return array


def read_disparity(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Stereo ground truth ``gt.*``: ``(disparity [H, W] float32, 0 where unknown; valid
    [H, W] bool)``."""
    suffix = path.suffix.lower()
    if suffix == ".png":
        return io.read_kitti_disparity(path)
    values = io.read_pfm(path) if suffix == ".pfm" else _float_array(path, "[H, W]", 2, None)
    if values.ndim != 2:
        raise UserError(f"{path}: a disparity PFM has one channel ('Pf'), got {values.shape}")
    return finite_or_zero(values)


def read_flow(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Flow ground truth ``flow.*``: ``(flow [H, W, 2] float32, 0 where unknown; valid
    [H, W] bool)``."""
    suffix = path.suffix.lower()
    if suffix == ".png":
        return io.read_kitti_flow(path)
    if suffix == ".flo":
        flow = io.read_flo(path)
        return finite_or_zero(np.where(np.abs(flow) > io.FLO_UNKNOWN, np.nan, flow))
    if suffix == ".npy":
        return finite_or_zero(_float_array(path, "[H, W, 2]", 3, 2))
    values = io.read_pfm(path)
    if values.ndim != 3:
        raise UserError(f"{path}: a flow PFM has three channels ('PF': u, v, 0), got "
                        f"{values.shape}")
    return finite_or_zero(values[..., :2])


def _read_cached(path: Path, task: str) -> np.ndarray:
    """A cached baseline output in the task's prediction layout, NaN at holes."""
    if task == "flow":
        return _float_array(path, "DIS flow [H, W, 2]", 3, 2).astype(np.float32)
    raw = io.read_npy(path)
    if raw.dtype != np.int16 or raw.ndim != 2:
        raise UserError(f"{path}: expected OpenCV SGBM's raw int16 [H, W] output (disparity x "
                        f"{SGBM_SCALE}, negative = hole), got {raw.dtype} {raw.shape}")
    return disparity_from_sgbm(raw)


def _check_size(path: Path, array: np.ndarray, reference: Path, size: tuple[int, ...]) -> None:
    if array.shape[:2] != size:
        raise UserError(f"{path}: {array.shape[0]}x{array.shape[1]} pixels, but {reference.name} "
                        f"is {size[0]}x{size[1]}")


class SceneFolders(BenchmarkDataset):
    """The scenes of ``task`` ("stereo" or "flow") under ``root`` (or ``root`` itself)."""

    LAYOUT = ("a folder of scene folders (or one scene folder): SCENE/{left, right, gt}.* for "
              "stereo, SCENE/{frame0, frame1, flow}.* for flow")

    def __init__(self, root: str | Path, *, task: str) -> None:
        if task not in TASKS:
            raise UserError(f"scene task must be one of {', '.join(TASKS)}; got {task!r}")
        self.task = task
        super().__init__(root)
        scene = _scene(self.root)
        scenes = [scene] if scene is not None else self._list(self.root)
        if not scenes:
            raise UserError(f"{self.root}: found no scenes; expected {self.LAYOUT}")
        chosen = [scene for scene in scenes if scene.task == task]
        if not chosen:
            raise UserError(f"{self.root}: holds no {task} scene ({len(scenes)} "
                            f"{scenes[0].task} scene{'s' if len(scenes) > 1 else ''}); "
                            f"evaluate a {scenes[0].task} model on it")
        self.set_entries(chosen)

    @staticmethod
    def _list(root: Path) -> list[Scene]:
        scenes = []
        for folder in sorted(path for path in root.iterdir()
                             if path.is_dir() and not path.name.startswith(".")):
            scene = _scene(folder)
            if scene is None:  # skipping it would silently change the number of scenes
                raise UserError(f"{folder}: not a scene folder (no left.*/right.* or "
                                "frame0.*/frame1.*); move it out of the root")
            scenes.append(scene)
        return scenes

    def cached_baseline(self, index: int) -> Path | None:
        """The cached baseline file of scene ``index``, if its folder has one."""
        return self.entries[index].cached

    def names(self) -> list[str]:
        """The scene names, in order (without reading any file)."""
        return [entry.name for entry in self.entries]

    def load(self, entry: Scene) -> Sample:
        image0 = io.read_image(entry.image0)
        size = image0.shape[:2]
        image1 = io.read_image(entry.image1)
        _check_size(entry.image1, image1, entry.image0, size)
        read = read_disparity if entry.task == "stereo" else read_flow
        truth, valid = read(entry.ground_truth)
        _check_size(entry.ground_truth, truth, entry.image0, size)
        if not valid.any():
            raise UserError(f"{entry.ground_truth}: no pixel has known ground truth")
        if entry.task == "stereo" and (truth[valid] < 0).any():
            raise UserError(f"{entry.ground_truth}: negative disparities (min "
                            f"{truth[valid].min():g}); expected the left image's positive "
                            "disparity")
        sample: Sample = {"name": entry.name, "image0": image0, "image1": image1,
                          "disparity" if entry.task == "stereo" else "flow": truth,
                          "valid": valid}
        if entry.cached is not None:
            sample["baseline"] = _read_cached(entry.cached, entry.task)
            _check_size(entry.cached, sample["baseline"], entry.image0, size)
        return sample


for _task, _metrics in (("stereo", ("bad1_holes", "bad2_holes", "bad3_holes", "epe_holes")),
                        ("flow", ("epe_holes", "fl_all_holes"))):
    register_dataset(DatasetKind(
        "scenes", _task, partial(SceneFolders, task=_task), _metrics, "image_mean",
        f"real {_task} scenes, a folder each (see crossview.data.datasets.scenes); scored "
        "beside OpenCV's " + ("SGBM" if _task == "stereo" else "DIS"), baseline=True))
