"""Batch runs that survive: many pairs, each published on its own as soon as it is done.

:func:`run_batch` runs every job (one pair), each through the caller's ``run`` that publishes
that pair's files all together or not at all (:func:`crossview.output.staged_files`). A pair
that fails is reported on stderr (``error: ... (pair skipped)``) and the run goes on; a summary
ends the run. A progress bar shows the run on a terminal; off one (a log file, CI), each pair
is one line on stderr: ``pair 3/10: NAME (0.8 s)``, NAME being the pair's output stem
(``NAME already there`` / ``NAME failed`` for a pair skipped or failed). Exit code 0 when
every pair was written (or already there), 1 when some failed, 2 when none could be written
(every input bad). Ctrl-C and SIGTERM stop the run between files, and so does a full disk
(the runner's one ``error:`` line, exit code 2): the pairs finished so far stay, the one
running is discarded, and ``--skip-existing`` resumes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import typer

from crossview.console import stderr, stdout
from crossview.errors import UserError
from crossview.lazy import lazy_import
from crossview.output import Terminated, storage_full

shown = lazy_import("crossview.progress")  # its progress bar (rich.progress) loads when used

INTERRUPTED_EXIT = 130  # 128 + SIGINT, as shells report Ctrl-C


@dataclass(frozen=True)
class PairJob:
    """One pair of a run: ``name`` (its output stem), ``label`` (how messages name it) and
    ``load()`` giving its two decoded images (``[H, W, 3]`` uint8 each)."""

    name: str
    label: str
    load: Callable[[], tuple]


@dataclass
class BatchSummary:
    """What a run did: pairs ``written``, ``skipped`` (outputs already there) and the one-line
    reasons of those that ``failed``; ``stopped`` says why it ended early, if it did."""

    written: int = 0
    skipped: int = 0
    failed: list[str] = field(default_factory=list)
    stopped: str | None = None

    def exit_code(self) -> int:
        if self.failed and not self.written and not self.skipped:
            return 2
        return 1 if self.failed else 0

    def lines(self, out_dir: Path) -> list[str]:
        """The closing lines: what was written where, then what was skipped and failed."""
        done = f"wrote {self.written} pair(s) to {out_dir}"
        if self.skipped:
            done += f", skipped {self.skipped} already there"
        if self.stopped:
            done += f"; {self.stopped}: finished pairs kept, --skip-existing resumes"
        return [done, *([f"{len(self.failed)} pair(s) failed"] if self.failed else [])]


def _report(summary: BatchSummary, error: Exception, job: PairJob | None) -> None:
    if isinstance(error, UserError):
        message = str(error)
    else:  # not a user mistake: name the pair and what went wrong
        message = f"{job.label if job else 'input'}: {type(error).__name__}: {error}"
    summary.failed.append(message)
    stderr.print(f"error: {message} (pair skipped)", markup=False)


def _guarded(jobs: Iterable[PairJob], summary: BatchSummary) -> Iterator[PairJob]:
    """``jobs``, ending (with a reported failure) if producing the next one fails, e.g. a
    video that stops decoding halfway."""
    iterator = iter(jobs)
    while True:
        try:
            job = next(iterator)
        except StopIteration:
            return
        except Exception as error:
            _report(summary, error, None)
            return
        yield job


def run_batch(jobs: Iterable[PairJob], total: int | None, run: Callable[[PairJob], None],
              out_dir: Path, *, exists: Callable[[PairJob], bool] | None = None) -> None:
    """Run every job, each published by ``run(job)`` on its own; skip a job whose outputs
    ``exists(job)`` says are all there (``--skip-existing``). Prints the summary and exits
    with :meth:`BatchSummary.exit_code` (130 after Ctrl-C; SIGTERM's :class:`Terminated`
    passes on to the runner, exit 143)."""
    summary = BatchSummary()
    try:
        with shown.Progress(transient=True) as bar:
            task = bar.add_task("pair", total=total or None)
            for job in _guarded(jobs, summary):
                if exists is not None and exists(job):
                    summary.skipped += 1
                    note, timed = " already there", False
                else:
                    try:
                        run(job)
                    except Exception as error:
                        if storage_full(error) is not None:  # so would every later pair
                            raise
                        _report(summary, error, job)
                        note, timed = " failed", True
                    else:
                        summary.written += 1
                        note, timed = "", True
                bar.step(task, job.name + note, timed=timed)
    except KeyboardInterrupt:
        summary.stopped = "interrupted"
        _finish(summary, out_dir)
        raise typer.Exit(INTERRUPTED_EXIT) from None
    except Terminated:
        summary.stopped = "stopped by SIGTERM"
        _finish(summary, out_dir)
        raise
    except OSError as error:  # the storage is full: the runner says so (exit code 2)
        if storage_full(error) is None:
            raise
        summary.stopped = "stopped: the storage is full"
        _finish(summary, out_dir)
        raise
    _finish(summary, out_dir)
    if summary.exit_code():
        raise typer.Exit(summary.exit_code())


def _finish(summary: BatchSummary, out_dir: Path) -> None:
    first, *rest = summary.lines(out_dir)
    stdout.print(first, markup=False, soft_wrap=True)
    for line in rest:
        stderr.print(line, markup=False)
