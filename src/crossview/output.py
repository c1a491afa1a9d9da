"""Output locations checked before any work starts, and outputs published all together or not
at all.

:func:`check_writable` proves (by creating and removing a probe file) that a directory can hold
new files, creating missing parents only for the probe; :func:`check_output_files` does the
same for the directories of a command's output files and refuses a name taken by a directory.
:func:`staged_files` is the one way a command publishes its outputs: they are written into a
hidden staging directory beside their destinations and moved into place only when the whole
command succeeded, so a failed or interrupted command leaves the file system as it was;
:func:`atomic_output` does it for one file written by library code (weights, checkpoints).

Every temporary name crossview creates in a user's directory records its owner, host and
process id (``.crossview-staging-HOST-PID-XXXXXXXX`` directories,
``.crossview-tmp-HOST-PID-XXXXXXXX.SUFFIX`` files), so a later command removes what a killed
command (``kill -9``) left behind once that owner is gone (:func:`remove_stale_temporaries`).
A permission check (``os.access``) would not do for writability: it says yes to root even on
read-only file systems such as ``/proc``.

What is published is checked first: :func:`check_finite` refuses values that would be written
as NaN or infinity where a reader trusts them (a depth map, a point cloud, a field).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
import shutil
import signal
import socket
import tempfile
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crossview.errors import UserError
from crossview.lazy import lazy_import

if TYPE_CHECKING:
    import numpy as np
else:  # the command line checks its output names before anything else loads
    np = lazy_import("numpy")

STAGING_PREFIX = ".crossview-staging-"
TEMPORARY_PREFIX = ".crossview-tmp-"
# prefix + host + "-" + pid + "-" + tempfile's random part (a-z, 0-9, _) + a file's suffix
_OWNED_NAME = re.compile(r"\.crossview-(?:staging|tmp)-(?P<host>.+)-(?P<pid>\d+)-[a-z0-9_]+"
                         r"(?:\.[^.]*)?")


log = logging.getLogger(__name__)

# errno -> what a command says when the storage cannot take its outputs
STORAGE_FULL = {errno.ENOSPC: "no space left on the device",
                errno.EDQUOT: "the disk quota is exceeded",
                errno.EFBIG: "a file grew past the file-size limit (ulimit -f) or the file "
                             "system's largest file"}


class Terminated(BaseException):
    """SIGTERM arrived while :func:`terminate_raises` was in force (a ``BaseException``, like
    ``KeyboardInterrupt``, so that only clean-up code sees it on its way out)."""

    def __str__(self) -> str:
        return "stopped by SIGTERM; outputs not yet published were discarded"


def check_finite(values: np.ndarray, what: str, where: np.ndarray | None = None) -> None:
    """A :class:`UserError` ``"{what} (N of M values)"`` unless every value of ``values`` (those
    of the bool mask ``where``, broadcast against it, when given) is finite as float32, the
    type outputs are written in. Compared before any cast, so a value beyond float32's range
    is refused instead of becoming infinity with a numpy overflow warning."""
    values = np.asarray(values)
    if where is not None:
        values = values[np.broadcast_to(where, values.shape)]
    bad = int(np.count_nonzero(~(np.abs(values) <= np.finfo(np.float32).max)))  # NaN: False
    if bad:
        raise UserError(f"{what} ({bad} of {values.size} values)")


def storage_full(error: BaseException) -> str | None:
    """One line for an ``OSError`` that says the storage is full (:data:`STORAGE_FULL`),
    naming where it was writing (the destination directory, not a staging name), or ``None``
    for any other error."""
    if not isinstance(error, OSError) or error.errno not in STORAGE_FULL:
        return None
    where = ""
    if error.filename:
        directory = Path(os.fsdecode(error.filename)).parent
        if directory.name.startswith(STAGING_PREFIX):
            directory = directory.parent
        where = f" writing into {directory}"
    return (f"{STORAGE_FULL[error.errno]}{where}; the outputs being written were discarded "
            "(free some space, or write elsewhere)")


def owned_prefix(kind: str) -> str:
    """The start of a temporary name of this process: ``.crossview-KIND-HOST-PID-``; ``kind``
    is ``staging`` (directories) or ``tmp`` (files)."""
    return f".crossview-{kind}-{socket.gethostname()}-{os.getpid()}-"


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; rename it onto ``path`` if the block succeeds.

    On an exception the temporary file is removed and ``path`` is left untouched. The
    temporary name keeps the suffix of ``path`` so that writers that infer formats still work,
    and records its owner, so that one left by a killed process can be told and removed
    (:func:`remove_stale_temporaries`).
    """
    path = Path(path)
    if not path.parent.is_dir():
        raise UserError(f"{path}: directory {path.parent} does not exist")
    handle, name = tempfile.mkstemp(prefix=owned_prefix("tmp"), suffix=path.suffix,
                                    dir=path.parent)
    os.close(handle)
    tmp = Path(name)
    try:
        yield tmp
        # mkstemp creates 0600 files; give the result the mode a plain open() would have.
        tmp.chmod(0o666 & ~_umask())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _missing(directory: Path) -> list[Path]:
    """``directory`` and its parents that do not exist yet, deepest first."""
    return [p for p in (directory, *directory.parents) if not p.exists() and not p.is_symlink()]


def remove_empty(directories: list[Path]) -> None:
    """Remove those of ``directories`` (as :func:`make_directory` returns them) that are
    empty."""
    for path in directories:  # deepest first, so a parent is empty once its child is gone
        with contextlib.suppress(OSError):
            path.rmdir()


def _make_and_probe(directory: Path) -> None:
    nearest = next((p for p in (directory, *directory.parents) if p.exists()), None)
    if nearest is not None and not nearest.is_dir():
        raise UserError(f"{nearest}: exists and is not a directory")
    try:
        directory.mkdir(parents=True, exist_ok=True)
        handle, probe = tempfile.mkstemp(prefix=owned_prefix("tmp"), dir=directory)
        os.close(handle)
        os.unlink(probe)
    except OSError as error:
        raise UserError(f"{directory}: cannot write to this output directory "
                        f"({error.strerror or error})") from None


def make_directory(directory: str | os.PathLike[str]) -> list[Path]:
    """Create ``directory`` and its missing parents, and prove that it can hold files (a
    :class:`UserError` naming it otherwise, leaving nothing created); return the directories
    created, deepest first, for :func:`remove_empty` to take back."""
    directory = Path(directory)
    created = _missing(directory)
    try:
        _make_and_probe(directory)
    except BaseException:
        remove_empty(created)
        raise
    return created


def check_writable(directory: str | os.PathLike[str]) -> None:
    """Raise :class:`UserError` unless files can be created in ``directory`` (which may not
    exist yet); leaves the file system as it was."""
    remove_empty(make_directory(directory))


def _refuse_names(paths: list[Path]) -> None:
    """A :class:`UserError` for the first output file named twice or taken by a directory."""
    twice = next((p for i, p in enumerate(paths) if p in paths[:i]), None)
    if twice is not None:  # e.g. two options naming one file
        raise UserError(f"{twice}: given twice as an output file")
    taken = next((path for path in paths if path.is_dir()), None)
    if taken is not None:
        raise UserError(f"{taken}: is a directory; cannot write an output file of that name")


def check_output_files(paths: Iterable[str | os.PathLike[str]]) -> None:
    """Raise :class:`UserError` naming the first of ``paths`` that cannot be written as a file
    (named twice, a directory of that name, an unwritable or impossible directory); leaves the
    file system as it was. Commands call it before their work for every file they will
    publish."""
    paths = [Path(p) for p in paths]
    _refuse_names(paths)
    for directory in dict.fromkeys(p.parent for p in paths):
        check_writable(directory)


# the suffixes of files a command reads or writes: an output directory named with one is a
# file name given where a directory is asked for (``-o depth.png``)
FILE_SUFFIXES = frozenset({".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".webp", ".exr",
                           ".pfm", ".flo", ".npy", ".npz", ".ply", ".json", ".csv", ".txt",
                           ".mp4", ".avi", ".mov", ".gif", ".onnx", ".safetensors", ".pth"})


def check_output_directory(path: str | os.PathLike[str], option: str) -> None:
    """Raise :class:`UserError` (naming ``option``) where ``path``, an output directory that
    does not exist yet, is named like a file (a suffix of :data:`FILE_SUFFIXES`): the command
    would make a directory of that name. An existing directory of any name is taken as given;
    what cannot be made a directory is :func:`check_writable`'s to say.

    >>> check_output_directory("stereo-out", "--out")
    >>> try:
    ...     check_output_directory("depth.png", "--out")
    ... except UserError as error:
    ...     print(str(error).split("; ")[-1])
    give a directory, e.g. --out depth
    """
    path = Path(path)
    if not path.exists() and path.suffix.lower() in FILE_SUFFIXES:
        raise UserError(f"{option} {path}: names the directory the outputs are written into, "
                        f"and {path.name!r} looks like a file name; give a directory, e.g. "
                        f"{option} {path.with_suffix('')}")


def check_output_file(path: str | os.PathLike[str], option: str) -> None:
    """Raise :class:`UserError` (naming ``option``) unless ``path`` can be written as a file."""
    path = Path(path)
    if path.is_dir():
        raise UserError(f"{option} {path}: is a directory; give a file name")
    check_output_files([path])


@contextlib.contextmanager
def _output_directory(directory: Path) -> Iterator[Path]:
    """Create ``directory`` (and parents); if the block raises, remove the directories this
    created that are still empty, so a failed command leaves nothing."""
    created = make_directory(directory)
    try:
        yield directory
    except BaseException:
        remove_empty(created)
        raise


def _process_gone(pid: int) -> bool:
    """Whether no process ``pid`` exists on this machine (False when unsure)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except (OSError, OverflowError):  # PermissionError: it exists, owned by someone else
        return False
    return False


def _remove_left_behind(path: Path, pid: int) -> None:
    """Remove ``path`` (a file or a directory tree), a temporary of crossview process ``pid``
    that ended before it could clean up, with one logged warning naming it."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            path.unlink()
    if not path.exists() and not path.is_symlink():
        log.warning(f"removed {path}, left behind by crossview process {pid}, which ended "
                    "before it finished (killed?)")


def remove_stale_temporaries(directory: str | os.PathLike[str],
                             older_names: re.Pattern[str] | None = None) -> None:
    """Remove the staging directories and temporary files in ``directory`` whose owner, a
    process of this host, is gone (a command killed before it could clean up), with one logged
    warning naming each.

    Those of live processes, of other hosts (whose processes cannot be checked from here) and
    of older crossview versions (which did not record their owner) are kept, except names that
    match ``older_names``: temporaries that an older version named with its process id (a
    ``pid`` group) but no host, taken for this host's (for a directory only crossview writes
    in, such as a training run's).
    """
    directory = Path(directory)
    if not directory.is_dir():
        return
    host = socket.gethostname()
    for path in sorted(directory.glob(".*")):
        match = _OWNED_NAME.fullmatch(path.name)
        if match is None or match["host"] != host:
            match = older_names.fullmatch(path.name) if older_names is not None else None
        if match is not None and _process_gone(int(match["pid"])):
            _remove_left_behind(path, int(match["pid"]))


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _raise_terminated(signum: int, frame: Any) -> None:
    raise Terminated


@contextlib.contextmanager
def terminate_raises() -> Iterator[None]:
    """While the block runs, SIGTERM raises :class:`Terminated` (when SIGTERM has its default
    action, which would end the process without running any clean-up), so a staging directory
    goes as it does on Ctrl-C. A handler installed by someone else is left alone."""
    if not _in_main_thread() or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return
    signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


class _SignalsDeferred:
    """From :meth:`start` to the end of the ``with`` block, SIGINT and SIGTERM wait (while a
    command's outputs are published: all of them or none), then reach their handlers as if
    they had just arrived."""

    def __enter__(self) -> _SignalsDeferred:
        self._pending: list[int] = []
        self._previous: dict[int, Any] = {}
        return self

    def start(self) -> None:
        if _in_main_thread() and not self._previous:
            self._previous = {sig: signal.signal(sig, self._record)
                              for sig in (signal.SIGINT, signal.SIGTERM)}

    def _record(self, signum: int, frame: Any) -> None:
        self._pending.append(signum)

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        for sig in dict.fromkeys(self._pending):
            signal.raise_signal(sig)


@contextlib.contextmanager
def staged_files(destinations: Iterable[str | os.PathLike[str]]) -> Iterator[list[Path]]:
    """Yield, for each of ``destinations`` (output files of one command), the path to write it
    to: inside a hidden staging directory in the destination's directory (created, with its
    parents, as needed).

    If the block succeeds, every destination must have been written; they are then moved into
    place together (SIGINT and SIGTERM wait meanwhile) and the staging directories removed. If
    the block raises (or SIGTERM arrives, see :func:`terminate_raises`), the staging
    directories go, and so do the directories this created: the file system is left exactly
    as it was, so a command that fails on its tenth input leaves neither the outputs of the
    first nine nor half-replaced older results. Staging directories and temporary files that
    killed commands left in those directories are removed first
    (:func:`remove_stale_temporaries`).

    A destination named twice or taken by a directory, or a directory that cannot hold files,
    is a :class:`UserError` naming it, before the block runs (and again before publishing).
    """
    targets = [Path(d) for d in destinations]
    _refuse_names(targets)
    with contextlib.ExitStack() as stack:
        stack.enter_context(terminate_raises())
        deferred = stack.enter_context(_SignalsDeferred())  # exits after the clean-up below
        staging: dict[Path, Path] = {}
        try:
            for directory in dict.fromkeys(t.parent for t in targets):
                stack.enter_context(_output_directory(directory))
                remove_stale_temporaries(directory)
                staging[directory] = Path(tempfile.mkdtemp(prefix=owned_prefix("staging"),
                                                           dir=directory))
                stack.callback(shutil.rmtree, staging[directory], ignore_errors=True)
            staged = [staging[t.parent] / t.name for t in targets]
            yield staged
            unwritten = [t for t, s in zip(targets, staged, strict=True) if not s.is_file()]
            if unwritten:
                raise RuntimeError(f"{unwritten[0]} was staged but never written")
            _refuse_names(targets)  # a directory made since the start?
        except BaseException:
            deferred.start()  # clean up entirely, even when a second signal comes
            raise
        deferred.start()
        for source, target in zip(staged, targets, strict=True):
            os.replace(source, target)
