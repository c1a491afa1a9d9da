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
no longer matches is removed, with one error saying so. Only a file that loaded as the model's
checkpoint (keys and shapes fit) is recorded, and a damaged record is an error naming it, never
rewritten: a record is the one thing that tells a damaged file from an intact one.

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
import string
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

# ``check(path)`` loads the file as the model's checkpoint; it raises UserError if it does not
LoadCheck = Callable[[Path], object]

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


def recorded_digest(path: Path, name: str) -> str | None:
    """The SHA-256 recorded for ``path`` (the published weights of model ``name``), or ``None``
    when there is no record.

    A record that cannot be read or is not ``sha256sum``'s line for ``path`` (a damaged file, a
    directory) is a :class:`UserError` naming it and what to do: rewriting it from the file
    would trust a file that may be damaged too.
    """
    record = digest_file(path)
    if not record.exists():
        return None
    try:
        fields = record.read_bytes().decode("ascii").split()
    except IsADirectoryError:
        why = "it is a directory"
    except OSError as error:
        why = error.strerror or type(error).__name__
    except UnicodeDecodeError:
        why = "it holds bytes that are not text"
    else:
        if (len(fields) == 2 and len(fields[0]) == 64
                and all(c in string.hexdigits for c in fields[0])
                and fields[1].removeprefix("*") == path.name):  # "*": sha256sum's binary mode
            return fields[0].lower()
        why = f"expected the line 'SHA256  {path.name}' that sha256sum writes"
    raise UserError(f"{record}: not a SHA-256 record of {path.name} ({why}); crossview does not "
                    f"rewrite it: delete it and {path.name}, then run `crossview weights "
                    f"download {name}` (or delete only the record if you trust {path})")


def record_digest(path: Path, digest: str) -> None:
    """Write ``digest`` for ``path`` in ``sha256sum`` format (atomically)."""
    with atomic_output(digest_file(path)) as tmp:
        tmp.write_text(f"{digest}  {path.name}\n")


def by_hand(published: PublishedWeights) -> str:
    """How to get the file without crossview downloading it."""
    return f"download {published.url} by hand and put it at {cached_path(published)}"


def verify(name: str, published: PublishedWeights, check: LoadCheck, *,
           load: bool = False) -> Path:
    """The cached file of ``published`` (the weights of model ``name``), after checking it.

    Its SHA-256 must match the recorded one. A file without a record (put in place by hand) is
    trusted on first use only once it loads: ``check(path)`` (the caller loads it as the
    model's checkpoint) must pass before its SHA-256 is recorded. ``load=True`` runs ``check``
    on a recorded file too (``crossview weights verify``).

    Raises :class:`UserError` if the file is missing, if its record is damaged
    (:func:`recorded_digest`), if it does not match the record (the file is then removed; the
    record stays, to check the next download) or if it does not load (nothing is recorded).
    """
    path = cached_path(published)
    if not path.is_file():
        raise UserError(f"{name}: the published weights {published.file} are not downloaded "
                        f"(crossview downloads only when asked): run `crossview weights download "
                        f"{name}` (or pass --download), or {by_hand(published)}")
    recorded = recorded_digest(path, name)
    actual = sha256_of(path)
    if recorded is not None and actual != recorded:
        path.unlink(missing_ok=True)
        raise UserError(f"{path}: SHA-256 {actual} differs from {recorded}, recorded when it "
                        f"was first downloaded: the file is damaged and was removed; download "
                        f"it again with `crossview weights download {name}`")
    if recorded is None or load:
        try:
            check(path)
        except UserError as error:
            kept = ("nothing recorded" if recorded is None else
                    f"it matches {digest_file(path).name}, so it is the file recorded then")
            raise UserError(f"{name}: {path.name} in the cache is not its checkpoint ({error}); "
                            f"{kept}: delete it and run `crossview weights download {name}`, or "
                            f"{by_hand(published)}") from None
    if recorded is None:
        record_digest(path, actual)
        log.info(f"recorded SHA-256 {actual} of {path} in {digest_file(path)}")
    return path


def download(name: str, published: PublishedWeights, check: LoadCheck, *,
             progress: bool = True) -> Path:
    """Download ``published`` (the weights of model ``name``) into the cache and return its
    path; an existing file is kept as it is if it passes :func:`verify`.

    The file must start like a PyTorch checkpoint, match the SHA-256 recorded by an earlier
    download (if any) and pass ``check(path)`` (the caller loads it into the model) before it
    takes its place; its SHA-256 is then recorded. Raises :class:`UserError` (one line) when
    ``CROSSVIEW_OFFLINE`` is set or the host cannot be reached (saying what to fetch by hand
    and where to put it) and for every bad answer (nothing is written then).
    """
    path = cached_path(published)
    if path.is_file():
        return verify(name, published, check)
    if offline():
        raise UserError(f"{name}: {OFFLINE_VARIABLE} is set, so crossview does not download "
                        f"{published.file}; {by_hand(published)}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UserError(f"{path.parent}: cannot create the weights cache ({error.strerror}); "
                        f"set {HOME_VARIABLE} to a writable directory") from None
    remove_stale_temporaries(path.parent)  # partial downloads of killed runs
    recorded = recorded_digest(path, name)

    def accept(partial: Path, digest: str) -> None:
        if recorded is not None and digest != recorded:
            raise UserError(f"{published.url}: the downloaded file's SHA-256 {digest} differs "
                            f"from {recorded}, recorded at its first download; nothing kept "
                            f"(if the authors replaced the file, delete {digest_file(path)})")
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
