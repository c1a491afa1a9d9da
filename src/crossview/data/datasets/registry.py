"""Dataset kinds by name and ``KIND[,OPTION=VALUE...]:PATH`` parsing.

>>> dataset, kind = open_dataset("kitti2015:/data/KITTI2015")          # doctest: +SKIP
>>> dataset, kind = open_dataset("sintel,pass=final:/data/MPI-Sintel")  # doctest: +SKIP

A :class:`DatasetKind` names a reader, its task ("stereo", "flow", ...), the metrics that the
benchmark itself reports and the reduction it uses over the dataset ("pooled" per pixel or
"image_mean" per image, see :mod:`crossview.metrics.score`). Kinds that need no path (the
synthetic held-out benchmarks) are opened by their bare name. One name may stand for a kind of
each task (``scenes``: folders of real stereo or flow scenes); the caller then says which task it
wants (``crossview eval`` passes its model's). Each reader module registers its own kinds, with
the metrics its benchmark reports, next to the reader (:func:`register_dataset`, at the end of
:mod:`.kitti` for example); the registry finds every module of this package on the first
lookup, so a new reader touches no other file.
"""

from __future__ import annotations

import inspect
import keyword
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from crossview.errors import UserError
from crossview.long_step import long_step
from crossview.metrics.score import REDUCTIONS, Reduction
from crossview.registry import Registry, import_modules


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


# (name, task) -> kind; every reader module of this package registers its kinds
DATASETS: Registry[tuple[str, str], DatasetKind] = Registry(
    "dataset kind", import_modules("crossview.data.datasets"))
SCAN_NOTE_AFTER = 3.0  # seconds: a scan still running then says what it does


def register_dataset(kind: DatasetKind) -> DatasetKind:
    """Add ``kind`` under its name and task (unique together)."""
    if kind.reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be one of {REDUCTIONS}, got {kind.reduction!r}")
    return DATASETS.register((kind.name, kind.task), kind)


def list_datasets() -> list[DatasetKind]:
    """All registered kinds, sorted by name and task."""
    return [kind for _, kind in DATASETS.items()]


def get_dataset_kind(name: str, task: str | None = None) -> DatasetKind:
    """The kind called ``name`` (of ``task`` when the name has kinds of several tasks; a name
    with one kind returns it whatever ``task`` is, so that the caller can name the mismatch).
    An unknown name is a :class:`UserError` listing known ones, and so is a name of several
    tasks without a ``task`` among them."""
    kinds = {kind.task: kind for (kind_name, _), kind in DATASETS.items() if kind_name == name}
    if not kinds:
        names = sorted({kind_name for (kind_name, _), _kind in DATASETS.items()})
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
    if not kind.needs_path:
        return kind.factory(**options), kind
    # a benchmark's folder tree: quick when small, minutes on a slow disk
    with long_step(f"scanning {path} for {name} samples", after=SCAN_NOTE_AFTER):
        return kind.factory(path, **options), kind
