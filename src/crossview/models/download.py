"""Fetch one file over HTTP(S) into place: whole and checked, or not at all.

The body is streamed into a temporary file beside the destination
(:func:`crossview.output.atomic_output`: the partial download carries the owner's host and
process id, so a later run removes what a killed one left) and renamed onto the destination
only when every byte the server announced has arrived and the caller's check has passed. Its
SHA-256 is computed on the way. Once the server's answer starts like the file, a note says
that the download runs, and a rich progress bar shows the transfer on a terminal.

Failures are :class:`~crossview.errors.UserError` lines: :class:`Unreachable` when no answer
came (no network, a refused connection, a time-out), :class:`DownloadError` for an answer that
is not the file (an HTTP error status, a web page, a cut transfer, a refused check).
"""

from __future__ import annotations

import hashlib
import http.client
import logging
import os
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

from crossview import __version__
from crossview.console import stderr
from crossview.errors import UserError
from crossview.output import atomic_output

log = logging.getLogger(__name__)

CHUNK_BYTES = 1 << 20
TIMEOUT_SECONDS = 30.0
HEAD_BYTES = 4  # what the caller's ``head_ok`` gets to judge the start of the body
USER_AGENT = f"crossview/{__version__}"

# ``check(complete_temporary_file, sha256_hex)`` raises to refuse the file before it is renamed
FileCheck = Callable[[Path, str], None]


class DownloadError(UserError):
    """The server answered, but not with the file (the message says what came instead)."""


class Unreachable(DownloadError):
    """No answer: no network, a refused connection, a name that does not resolve, a time-out."""


def fetch(url: str, path: str | os.PathLike[str], *, head_ok: Callable[[bytes], bool],
          what: str, check: FileCheck | None = None, progress: bool = True) -> str:
    """Download ``url`` to ``path`` (whose directory must exist) and return its SHA-256 (hex).

    Args:
        head_ok: judges the first :data:`HEAD_BYTES` bytes of the body; a body it refuses, or
            one served as ``text/html`` (a login page, an error page), is a
            :class:`DownloadError` naming ``what`` was expected.
        check: ``check(temporary_path, sha256)`` on the complete file, before it is renamed
            onto ``path``; whatever it raises is raised and nothing is kept.
        progress: show a progress bar on stderr (only when stderr is a terminal).

    ``path`` is left untouched unless the whole download succeeds.
    """
    path = Path(path)
    response = _open(url)
    with response, atomic_output(path) as partial:
        if response.headers.get_content_type() == "text/html":
            raise DownloadError(f"{url} answered with a web page (text/html), not {what}; "
                                "nothing written")
        total = response.length  # None when the server announces no length
        digest, received = hashlib.sha256(), 0
        with partial.open("wb") as out, Progress(
                TextColumn(path.name), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                TimeRemainingColumn(), console=stderr, transient=True,
                disable=not (progress and stderr.is_terminal)) as bar:
            task = bar.add_task("download", total=total)
            while chunk := _read(response, url, received, total):
                if received == 0 and not head_ok(chunk[:HEAD_BYTES]):
                    raise DownloadError(f"{url} did not send {what} (it starts with "
                                        f"{chunk[:HEAD_BYTES]!r}); nothing written")
                if received == 0:  # the server sends the file: say so before the transfer
                    log.info(f"downloading {url} to {path}")
                out.write(chunk)
                digest.update(chunk)
                received += len(chunk)
                bar.update(task, completed=received)
        if received == 0:
            raise DownloadError(f"{url} sent an empty answer, not {what}; nothing written")
        if total is not None and received != total:
            raise _interrupted(url, received, total)
        if check is not None:
            check(partial, digest.hexdigest())
    return digest.hexdigest()


def _open(url: str) -> http.client.HTTPResponse:
    """The response to a GET of ``url`` (redirects followed); HTTP errors and the lack of any
    answer become :class:`DownloadError` / :class:`Unreachable`."""
    request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT})
    try:
        return urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS)
    except urllib.error.HTTPError as error:
        error.close()
        raise DownloadError(f"{url}: the server answered HTTP {error.code} {error.reason}; "
                            "nothing written") from None
    except (urllib.error.URLError, OSError, http.client.HTTPException) as error:
        reason = getattr(error, "reason", None) or error
        raise Unreachable(f"cannot reach {urlsplit(url).netloc} ({reason})") from None


def _read(response: http.client.HTTPResponse, url: str, received: int,
          total: int | None) -> bytes:
    """The next chunk of the body (``b""`` at its end); a connection lost mid-way is a
    :class:`DownloadError`."""
    try:
        return response.read(CHUNK_BYTES)
    except http.client.IncompleteRead as error:
        raise _interrupted(url, received + len(error.partial), total) from None
    except (OSError, http.client.HTTPException) as error:
        raise DownloadError(f"the download of {url} broke off after {received} bytes "
                            f"({error}); nothing kept, run it again") from None


def _interrupted(url: str, received: int, total: int | None) -> DownloadError:
    of = f" of {total}" if total is not None else ""
    return DownloadError(f"the download of {url} was interrupted after {received}{of} bytes; "
                         "nothing kept, run it again")
