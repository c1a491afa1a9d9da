"""TensorBoard event files of a training run, beside its ``log.jsonl``: ``RUN_DIR/tensorboard/``.

``tensorboard --logdir RUN_DIR`` then shows the run's curves: every record of ``log.jsonl`` as
scalars tagged ``<kind>/<key>`` (``train/loss``, ``train/lr``, ``val/epe`` ...) at the record's
step, and at each validation the pictures the recipe draws of its first validation samples
(:meth:`crossview.train.recipe.Recipe.preview`: prediction beside ground truth), tagged
``val/prediction_<i>``. Rank 0 alone writes, as it alone writes the log.

The writer is :class:`torch.utils.tensorboard.SummaryWriter`, from the optional package
``tensorboard`` (in ``crossview[train]``): without it, :func:`open_board` says once (INFO) how
to install it and the run writes no events. ``train.tensorboard: false`` switches the events off.

A resumed run purges the events logged after its checkpoint's step (``purge_step``; readers
hide the older events of the steps it logs again), as
:func:`crossview.train.runlog.cut_after` cuts ``log.jsonl``: each curve holds one point per
step.
"""

from __future__ import annotations

import importlib
import logging
import time
from collections.abc import Mapping, Sequence
from numbers import Real
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

BOARD_DIR = "tensorboard"  # under the run directory
PREVIEWS = 2  # pictures of the first validation samples at each validation
FLUSH_SECONDS = 30  # how stale the curves of a live run may be
_EVENTS = "events.out.tfevents."
_MAX_WAIT_SECONDS = 2.0


def summary_writer_type() -> type | None:
    """:class:`torch.utils.tensorboard.SummaryWriter`, or None when the package ``tensorboard``
    is not installed (or cannot be imported)."""
    try:
        importlib.import_module("tensorboard")  # torch's wrapper may be imported already
        return importlib.import_module("torch.utils.tensorboard").SummaryWriter
    except ImportError:
        return None


def _after_older_event_files(board_dir: Path) -> None:
    """Wait (at most :data:`_MAX_WAIT_SECONDS`) until the clock's second is later than that in
    the name of every event file of ``board_dir``: readers take the files in name order, and a
    new file's name starts with the second it was made in, so a run resumed within the second
    its previous part began in would otherwise be read before it."""
    seconds = []
    for path in board_dir.glob(_EVENTS + "*"):
        stamp = path.name[len(_EVENTS):].split(".", 1)[0]
        if stamp.isdigit():
            seconds.append(int(stamp))
    if not seconds:
        return
    deadline = time.monotonic() + _MAX_WAIT_SECONDS
    while int(time.time()) <= max(seconds) and time.monotonic() < deadline:
        time.sleep(0.05)


class TensorBoardLog:
    """The event files of one run (rank 0): :meth:`record` takes the records of ``log.jsonl``,
    :meth:`images` the validation pictures; :meth:`close` flushes them.

    The directory and its file are made at the first write (a resumed run that trains nothing
    leaves none).

    Args:
        run_dir: the run directory (``train.out_dir``); events go to ``run_dir/tensorboard``.
        writer_type: :class:`torch.utils.tensorboard.SummaryWriter` (see
            :func:`summary_writer_type`).
        resumed_step: the step a resumed run continues from: events of later steps are purged;
            None for a new run.
    """

    def __init__(self, run_dir: str | Path, writer_type: type, *,
                 resumed_step: int | None = None) -> None:
        self.board_dir = Path(run_dir) / BOARD_DIR
        self._writer_type = writer_type
        self._purge_step = None if resumed_step is None else resumed_step + 1
        self._writer: Any = None

    def _open(self) -> Any:
        if self._writer is None:
            self.board_dir.mkdir(parents=True, exist_ok=True)
            _after_older_event_files(self.board_dir)
            self._writer = self._writer_type(str(self.board_dir), purge_step=self._purge_step,
                                             flush_secs=FLUSH_SECONDS)
        return self._writer

    def record(self, record: Mapping[str, Any]) -> None:
        """One ``log.jsonl`` record (``kind``, ``step`` and values): each number as the scalar
        ``<kind>/<key>`` at ``step`` (stored as float32, as TensorBoard stores scalars);
        values that are no numbers are skipped."""
        kind, step = record.get("kind", "train"), int(record["step"])
        writer = self._open()
        for key, value in record.items():
            if key in ("kind", "step") or isinstance(value, bool) or not isinstance(value, Real):
                continue
            writer.add_scalar(f"{kind}/{key}", float(value), step)

    def images(self, pictures: Sequence[np.ndarray], step: int, prefix: str = "val") -> None:
        """``pictures`` (``[H, W, 3]`` uint8 RGB each) as the images
        ``<prefix>/prediction_<i>`` at ``step``; written at once (a validation is rare)."""
        if not pictures:
            return
        writer = self._open()
        for i, picture in enumerate(pictures):
            writer.add_image(f"{prefix}/prediction_{i}", np.asarray(picture, np.uint8), step,
                             dataformats="HWC")
        writer.flush()

    def close(self) -> None:
        """Flush and close the event file (no-op when none was opened)."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None


def open_board(run_dir: str | Path, *, enabled: bool, resumed_step: int | None = None
               ) -> TensorBoardLog | None:
    """The :class:`TensorBoardLog` of a run, or None: when ``enabled`` is false (another rank
    than 0, or ``train.tensorboard: false``), or when ``tensorboard`` is not installed; then an
    INFO note says what installs it."""
    if not enabled:
        return None
    writer_type = summary_writer_type()
    if writer_type is None:
        log.info("TensorBoard is not installed: `pip install tensorboard` (part of "
                 "crossview[train]) to watch this run's curves with `tensorboard --logdir "
                 f"{run_dir}` (train.tensorboard: false turns this off)")
        return None
    return TensorBoardLog(run_dir, writer_type, resumed_step=resumed_step)


__all__ = ["BOARD_DIR", "PREVIEWS", "TensorBoardLog", "open_board", "summary_writer_type"]
