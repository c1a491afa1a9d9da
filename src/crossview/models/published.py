"""Published checkpoints by name: where their authors publish them, the local cache that holds
them, and the SHA-256 that guards each file.

A model whose :class:`~crossview.models.registry.ModelSpec` carries :class:`PublishedWeights`
(MatchStereo-T/S/B and MatchFlow-B: the files of the MatchAttention authors) can be loaded
with ``weights="published"``, its default. The file lives in the cache,
``$CROSSVIEW_HOME/weights/FILE`` (default ``$CROSSVIEW_HOME``: the user cache directory of
the platform, ``~/.cache/crossview`` on Linux).

crossview touches the network only when asked (``crossview weights download NAME``,
``--download``, ``load_model(..., download=True)``); otherwise a missing file is one
:class:`~crossview.errors.UserError` line naming the URL to fetch by hand and the path to put
it at. With ``CROSSVIEW_OFFLINE=1`` (or without a network) a requested download is the same
line. The authors publish no digest: the SHA-256 of a file is recorded on its first download
(or first use, for a file put in place by hand) in ``FILE.sha256`` beside it (the format of
``sha256sum``, so ``sha256sum -c`` checks it too) and checked on every later load; a file that
no longer matches is removed, with one error saying so.

Example (a temporary cache; nothing downloaded):
    >>> import os, tempfile
    >>> os.environ["CROSSVIEW_HOME"] = tempfile.mkdtemp()
    >>> spec = PublishedWeights("matchstereo_tiny_fsd.pth", "https://example.org/x.pth")
    >>> cached_path(spec).relative_to(os.environ["CROSSVIEW_HOME"]).as_posix()
    'weights/matchstereo_tiny_fsd.pth'
    >>> del os.environ["CROSSVIEW_HOME"]
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import platformdirs

from crossview.errors import UserError
from crossview.models.download import Unreachable, fetch
from crossview.models.weights import starts_like_torch_save
from crossview.output import atomic_output, remove_stale_temporaries

NAME = "published"  # the weights name that load_model takes
HOME_VARIABLE = "CROSSVIEW_HOME"
OFFLINE_VARIABLE = "CROSSVIEW_OFFLINE"
DIGEST_SUFFIX = ".sha256"
_HASH_CHUNK = 1 << 22

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PublishedWeights:
    """A checkpoint its authors publish.

    Attributes:
        file: its file name (also its name in the cache), e.g. ``matchstereo_base_fsd.pth``.
        url: where it is downloaded from.
    """

    file: str
    url: str


def home() -> Path:
    """``$CROSSVIEW_HOME``, else the platform's user cache directory for crossview."""
    return Path(os.environ.get(HOME_VARIABLE) or platformdirs.user_cache_dir("crossview"))


def cached_path(published: PublishedWeights) -> Path:
    """Where the cache keeps ``published`` (whether or not it is there)."""
    return home() / "weights" / published.file


def offline() -> bool:
    """Whether ``CROSSVIEW_OFFLINE`` forbids downloads (set to anything but ``""``/``0``)."""
    return os.environ.get(OFFLINE_VARIABLE, "") not in ("", "0")


def sha256_of(path: Path) -> str:
    """The SHA-256 (hex) of the file ``path``."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_HASH_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def digest_file(path: Path) -> Path:
    """The record of the SHA-256 of ``path``: ``path`` + ``.sha256``."""
    return path.with_name(path.name + DIGEST_SUFFIX)


def recorded_digest(path: Path) -> str | None:
    """The SHA-256 recorded for ``path``, or ``None`` if none (or an unreadable record)."""
    try:
        fields = digest_file(path).read_text().split()
    except OSError:
        return None
    return fields[0].lower() if fields and len(fields[0]) == 64 else None


def record_digest(path: Path, digest: str) -> None:
    """Write ``digest`` for ``path`` in ``sha256sum`` format (atomically)."""
    with atomic_output(digest_file(path)) as tmp:
        tmp.write_text(f"{digest}  {path.name}\n")


def by_hand(published: PublishedWeights) -> str:
    """How to get the file without crossview downloading it."""
    return f"download {published.url} by hand and put it at {cached_path(published)}"


def verify(name: str, published: PublishedWeights) -> Path:
    """The cached file of ``published`` (the weights of model ``name``), after checking its
    SHA-256 against the recorded one (recording it if none is: a file put in place by hand).

    Raises :class:`UserError` if the file is missing, or if it does not match the record: the
    file is then removed (the record stays, to check the next download).
    """
    path = cached_path(published)
    if not path.is_file():
        raise UserError(f"{name}: the published weights {published.file} are not downloaded "
                        f"(crossview downloads only when asked): run `crossview weights download "
                        f"{name}` (or pass --download), or {by_hand(published)}")
    actual, recorded = sha256_of(path), recorded_digest(path)
    if recorded is None:
        record_digest(path, actual)
        log.info(f"recorded SHA-256 {actual} of {path} in {digest_file(path)}")
    elif actual != recorded:
        path.unlink(missing_ok=True)
        raise UserError(f"{path}: SHA-256 {actual} differs from {recorded}, recorded when it "
                        f"was first downloaded: the file is damaged and was removed; download "
                        f"it again with `crossview weights download {name}`")
    return path


def download(name: str, published: PublishedWeights, *,
             check: Callable[[Path], None] | None = None, progress: bool = True) -> Path:
    """Download ``published`` (the weights of model ``name``) into the cache and return its
    path; an existing file that matches its record is kept as it is.

    The file must start like a PyTorch checkpoint, match the SHA-256 recorded by an earlier
    download (if any) and pass ``check(path)`` (the caller loads it into the model) before it
    takes its place; its SHA-256 is then recorded. Raises :class:`UserError` (one line) when
    ``CROSSVIEW_OFFLINE`` is set or the host cannot be reached (saying what to fetch by hand
    and where to put it) and for every bad answer (nothing is written then).
    """
    path = cached_path(published)
    if path.is_file():
        return verify(name, published)
    if offline():
        raise UserError(f"{name}: {OFFLINE_VARIABLE} is set, so crossview does not download "
                        f"{published.file}; {by_hand(published)}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UserError(f"{path.parent}: cannot create the weights cache ({error.strerror}); "
                        f"set {HOME_VARIABLE} to a writable directory") from None
    remove_stale_temporaries(path.parent)  # partial downloads of killed runs
    recorded = recorded_digest(path)

    def accept(partial: Path, digest: str) -> None:
        if recorded is not None and digest != recorded:
            raise UserError(f"{published.url}: the downloaded file's SHA-256 {digest} differs "
                            f"from {recorded}, recorded at its first download; nothing kept "
                            f"(if the authors replaced the file, delete {digest_file(path)})")
        if check is not None:
            check(partial)

    try:
        digest = fetch(published.url, path, head_ok=starts_like_torch_save,
                       what="a PyTorch checkpoint", check=accept, progress=progress)
    except Unreachable as error:
        raise UserError(f"{name}: {error}; {by_hand(published)}") from None
    if recorded is None:
        record_digest(path, digest)
    log.info(f"downloaded {published.url} to {path} (SHA-256 {digest})")
    return path
