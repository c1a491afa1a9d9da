"""The synthetic held-out benchmarks as dataset kinds (``--dataset synthetic-stereo``).

The benchmarks themselves live in :mod:`crossview.data.synthetic.heldout`; this module only
turns the ``KIND,OPTION=VALUE`` strings of the registry into its arguments:
``length=N`` (number of pairs) and ``size=HxW``. Other values than the defaults give a
different benchmark, which a report should say. Samples are torch tensors (images ``[3, H, W]``
float 0..255); :func:`crossview.eval.numpy_sample` turns them into the reader layout.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from crossview.data.datasets.registry import DatasetKind, register_dataset
from crossview.errors import UserError
from crossview.lazy import lazy_import

# the synthetic engine (~0.13 s to import): loaded when a held-out set is made
heldout = lazy_import("crossview.data.synthetic.heldout")


def _size(text: str) -> tuple[int, int]:
    height, sep, width = text.lower().partition("x")
    if not sep or not height.isdigit() or not width.isdigit():
        raise UserError(f"size must be HxW, e.g. 256x512; got {text!r}")
    return int(height), int(width)


def heldout_factory(name: str) -> Callable[..., Sequence[dict[str, Any]]]:
    """A registry factory ``(*, length=None, size=None) -> dataset`` for benchmark ``name``."""

    def make(*, length: str | None = None, size: str | None = None) -> Sequence[dict[str, Any]]:
        if length is not None and not str(length).isdigit():
            raise UserError(f"length must be a positive integer, got {length!r}")
        return heldout.get_heldout(name, length=None if length is None else int(length),
                                   size=None if size is None else _size(size))

    return make


register_dataset(DatasetKind(
    "synthetic-stereo", "stereo", heldout_factory("synthetic-stereo"),
    ("epe", "epe_noc", "bad1", "bad3", "d1_all"), "pooled",
    "held-out synthetic stereo, generated (options: length=N, size=HxW)", needs_path=False))
register_dataset(DatasetKind(
    "synthetic-flow", "flow", heldout_factory("synthetic-flow"),
    ("epe", "epe_noc", "1px", "3px", "5px", "fl_all"), "pooled",
    "held-out synthetic flow, generated (options: length=N, size=HxW)", needs_path=False))
