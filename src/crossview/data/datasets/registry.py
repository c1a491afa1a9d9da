"""Dataset kinds by name, ``KIND[,OPTION=VALUE...]:PATH`` parsing, and each kind's metric set.

>>> dataset, kind = open_dataset("kitti2015:/data/KITTI2015")          # doctest: +SKIP
>>> dataset, kind = open_dataset("sintel,pass=final:/data/MPI-Sintel")  # doctest: +SKIP

A :class:`DatasetKind` names a reader, its task ("stereo", "flow", ...), the metrics that the
benchmark itself reports and the reduction it uses over the dataset ("pooled" per pixel or
"image_mean" per image, see :mod:`crossview.metrics.score`). Kinds that need no path (the
synthetic held-out benchmarks) are opened by their bare name. One name may stand for a kind of
each task (``scenes``: folders of real stereo or flow scenes); the caller then says which task it
wants (``crossview eval`` passes its model's). Other packages add kinds with
:func:`register_dataset`.
"""

from __future__ import annotations

import inspect
import keyword
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from crossview.errors import UserError
from crossview.metrics.score import REDUCTIONS, Reduction


@dataclass(frozen=True)
class DatasetKind:
    """A named dataset: ``factory(path, **options)`` (or ``factory(**options)`` when
    ``needs_path`` is false) returns a sequence of sample dicts. ``note`` says how the means
    differ from those the benchmark publishes, if they do (shown with every result).
    ``baseline``: ``crossview eval`` also scores the task's classical baseline (OpenCV SGBM or
    DIS, :mod:`crossview.baselines`) and shows it beside the model."""

    name: str
    task: str
    factory: Callable[..., Sequence[dict[str, Any]]]
    metrics: tuple[str, ...]
    reduction: Reduction
    description: str
    needs_path: bool = True
    note: str = ""
    baseline: bool = False


_KINDS: dict[tuple[str, str], DatasetKind] = {}  # (name, task) -> kind
MIDDEVAL3_NOTE = ("MiddEval3's online tables average the scenes with per-scene weights; these "
                  "are unweighted means over the images (the per-scene weights are not applied), "
                  "so they are not the tables' averages")


def register_dataset(kind: DatasetKind) -> DatasetKind:
    """Add ``kind`` under its name and task (unique together)."""
    if (kind.name, kind.task) in _KINDS:
        raise ValueError(f"dataset kind {kind.name!r} is already registered for {kind.task}")
    if kind.reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be one of {REDUCTIONS}, got {kind.reduction!r}")
    _KINDS[(kind.name, kind.task)] = kind
    return kind


def list_datasets() -> list[DatasetKind]:
    """All registered kinds, sorted by name and task."""
    return [_KINDS[key] for key in sorted(_KINDS)]


def get_dataset_kind(name: str, task: str | None = None) -> DatasetKind:
    """The kind called ``name`` (of ``task`` when the name has kinds of several tasks; a name
    with one kind returns it whatever ``task`` is, so that the caller can name the mismatch).
    An unknown name is a :class:`UserError` listing known ones, and so is a name of several
    tasks without a ``task`` among them."""
    kinds = {kind.task: kind for (kind_name, _), kind in _KINDS.items() if kind_name == name}
    if not kinds:
        names = sorted({kind_name for kind_name, _ in _KINDS})
        raise UserError(f"unknown dataset kind {name!r}; known: {', '.join(names)}")
    if len(kinds) == 1:
        return next(iter(kinds.values()))
    if task not in kinds:
        raise UserError(f"dataset kind {name!r} holds {' or '.join(sorted(kinds))} data; "
                        f"evaluate a model of one of these tasks"
                        + (f" (this one estimates {task})" if task else ""))
    return kinds[task]


def parse_dataset_spec(spec: str) -> tuple[str, dict[str, str], str | None]:
    """Split ``KIND[,OPTION=VALUE...][:PATH]`` into ``(kind, options, path or None)``.

    An option named like a Python keyword gets a trailing underscore (``pass`` -> ``pass_``).
    """
    head, sep, path = spec.partition(":")
    name, *pairs = head.split(",")
    options = {}
    for pair in pairs:
        key, eq, value = pair.partition("=")
        if not eq or not key:
            raise UserError(f"dataset option {pair!r} in {spec!r} is not KEY=VALUE")
        key = key.strip()
        options[f"{key}_" if keyword.iskeyword(key) else key] = value.strip()
    return name.strip(), options, (path if sep else None)


def _fixed(kind: DatasetKind) -> dict[str, Any]:
    """The options that the kind's name binds (``kitti2015`` is ``KITTIStereo`` with
    ``year=2015``)."""
    return dict(kind.factory.keywords) if isinstance(kind.factory, partial) else {}


def _check_fixed_options(kind: DatasetKind, options: dict[str, str]) -> dict[str, str]:
    """``options`` without those that repeat a value the kind's name binds; one that contradicts
    it (``kitti2015,year=2012``) is a :class:`UserError` naming the kind that has that value."""
    fixed = _fixed(kind)
    for key, value in options.items():
        if key not in fixed or value == str(fixed[key]):
            continue
        others = [other.name for other in list_datasets()
                  if isinstance(other.factory, partial) and other.factory.func is kind.factory.func
                  and str(other.factory.keywords.get(key)) == value and other.name != kind.name]
        hint = f": use --dataset {others[0]}" if others else ""
        option = key.rstrip("_")
        raise UserError(f"dataset kind {kind.name!r} is {option}={fixed[key]}, not "
                        f"{option}={value}{hint}")
    return {key: value for key, value in options.items() if key not in fixed}


def open_dataset(spec: str, task: str | None = None
                 ) -> tuple[Sequence[dict[str, Any]], DatasetKind]:
    """Open ``KIND[,OPTION=VALUE...]:PATH`` (or a path-less kind by name); return the dataset
    and its :class:`DatasetKind`; ``task`` picks the kind of a name that has several (see
    :func:`get_dataset_kind`). Unknown kinds or options and missing paths are
    :class:`UserError`\\ s."""
    name, options, path = parse_dataset_spec(spec)
    kind = get_dataset_kind(name, task)
    options = _check_fixed_options(kind, options)
    accepted = [
        parameter.name for parameter in inspect.signature(kind.factory).parameters.values()
        if parameter.kind == parameter.KEYWORD_ONLY and parameter.name not in _fixed(kind)
    ]
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise UserError(f"dataset kind {name!r} has no option {', '.join(unknown)}; "
                        f"options: {', '.join(a.rstrip('_') for a in accepted) or 'none'}")
    if kind.needs_path and not path:
        raise UserError(f"dataset kind {name!r} needs a path: use --dataset {name}:PATH")
    if not kind.needs_path and path:
        raise UserError(f"dataset kind {name!r} takes no path; use --dataset {name}")
    dataset = kind.factory(path, **options) if kind.needs_path else kind.factory(**options)
    return dataset, kind


def _register_builtins() -> None:
    from crossview.data.datasets.chairs import FlyingChairs
    from crossview.data.datasets.eth3d import ETH3D
    from crossview.data.datasets.kitti import KITTIFlow, KITTIStereo
    from crossview.data.datasets.middlebury import Middlebury
    from crossview.data.datasets.sceneflow import SceneFlowFlow, SceneFlowStereo
    from crossview.data.datasets.scenes import SceneFolders
    from crossview.data.datasets.sintel import SintelFlow, SintelStereo
    from crossview.data.datasets.synthetic import heldout_factory

    middlebury = ("avgerr", "bad0.5", "bad1", "bad2", "bad4")
    sceneflow = ("epe", "bad1", "bad3")
    for subset in ("flyingthings3d", "driving", "monkaa"):
        register_dataset(DatasetKind(
            subset, "stereo", partial(SceneFlowStereo, subset=subset), sceneflow, "image_mean",
            f"SceneFlow {subset} stereo (options: split=train|test, pass=clean|final)"))
        register_dataset(DatasetKind(
            f"{subset}-flow", "flow", partial(SceneFlowFlow, subset=subset),
            ("epe", "1px", "3px", "5px"), "image_mean",
            f"SceneFlow {subset} optical flow (options: split, pass, camera=left|right)"))
    register_dataset(DatasetKind(
        "middlebury", "stereo", Middlebury,
        middlebury + tuple(f"{name}_noc" for name in middlebury), "image_mean",
        "Middlebury MiddEval3 training (option: resolution=F|H|Q)",
        note=MIDDEVAL3_NOTE))
    register_dataset(DatasetKind(
        "middlebury2014", "stereo", Middlebury, middlebury, "image_mean",
        "Middlebury 2014 full-size scenes (no occlusion masks)"))
    register_dataset(DatasetKind(
        "eth3d", "stereo", ETH3D, ("bad1_noc", "bad1", "avgerr_noc", "avgerr"), "image_mean",
        "ETH3D two-view training"))
    register_dataset(DatasetKind(
        "kitti2015", "stereo", partial(KITTIStereo, year=2015),
        ("d1_all", "d1_all_noc", "epe", "epe_noc"), "pooled", "KITTI 2015 stereo training"))
    register_dataset(DatasetKind(
        "kitti2012", "stereo", partial(KITTIStereo, year=2012),
        ("bad3_noc", "bad3", "epe_noc", "epe"), "pooled", "KITTI 2012 stereo training"))
    register_dataset(DatasetKind(
        "kitti2015-flow", "flow", partial(KITTIFlow, year=2015),
        ("fl_all", "fl_all_noc", "epe", "epe_noc"), "pooled", "KITTI 2015 flow training"))
    register_dataset(DatasetKind(
        "kitti2012-flow", "flow", partial(KITTIFlow, year=2012),
        ("out3_noc", "out3", "epe_noc", "epe"), "pooled", "KITTI 2012 flow training"))
    register_dataset(DatasetKind(
        "sintel", "flow", SintelFlow, ("epe", "epe_noc", "1px", "3px", "5px"), "pooled",
        "MPI Sintel flow training (option: pass=clean|final)"))
    register_dataset(DatasetKind(
        "sintel-stereo", "stereo", SintelStereo, ("epe", "epe_noc", "bad1", "bad3"), "pooled",
        "MPI Sintel stereo training (option: pass=clean|final)"))
    register_dataset(DatasetKind(
        "chairs", "flow", FlyingChairs, ("epe", "1px", "3px", "5px"), "pooled",
        "FlyingChairs (option: split=train|val|all, default val)"))
    register_dataset(DatasetKind(
        "synthetic-stereo", "stereo", heldout_factory("synthetic-stereo"),
        ("epe", "epe_noc", "bad1", "bad3", "d1_all"), "pooled",
        "held-out synthetic stereo, generated (options: length=N, size=HxW)", needs_path=False))
    register_dataset(DatasetKind(
        "synthetic-flow", "flow", heldout_factory("synthetic-flow"),
        ("epe", "epe_noc", "1px", "3px", "5px", "fl_all"), "pooled",
        "held-out synthetic flow, generated (options: length=N, size=HxW)", needs_path=False))
    for task, metrics in (("stereo", ("bad1_holes", "bad2_holes", "bad3_holes", "epe_holes")),
                          ("flow", ("epe_holes", "fl_all_holes"))):
        register_dataset(DatasetKind(
            "scenes", task, partial(SceneFolders, task=task), metrics, "image_mean",
            f"real {task} scenes, a folder each (see crossview.data.datasets.scenes); scored "
            "beside OpenCV's " + ("SGBM" if task == "stereo" else "DIS"), baseline=True))
    _register_semantic()


def _register_semantic() -> None:
    """Semantic correspondence (keypoint transfer, PCK per pair; see metrics.keypoints)."""
    import crossview.metrics.keypoints  # noqa: F401  (registers the pck@... metrics)
    from crossview.data.datasets.pfpascal import PFPascal
    from crossview.data.datasets.pfwillow import PFWillow
    from crossview.data.datasets.spair import SPair71k

    for name, factory, kind, description in (
        ("spair71k", SPair71k, "bbox", "SPair-71k (options: split=trn|val|test, layout)"),
        ("pfpascal", PFPascal, "img", "PF-PASCAL (option: split=trn|val|test)"),
        ("pfwillow", PFWillow, "bbox-kp", "PF-WILLOW test pairs"),
    ):
        metrics = tuple(f"pck@{alpha}_{kind}" for alpha in (0.05, 0.1, 0.15))
        register_dataset(DatasetKind(name, "semantic", factory, metrics, "image_mean",
                                     description))


_register_builtins()
