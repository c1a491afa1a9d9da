"""The ``crossview`` logger handed to a front end for the length of a block: what the runtime's
command or the demo's page shows of the library's log (a swapped pair, a lined-up offset)
while one request runs, without keeping a handler after it.

Example:
    >>> import logging
    >>> seen = []
    >>> class Keep(logging.Handler):
    ...     def emit(self, record):
    ...         seen.append(record.getMessage())
    >>> with library_log_to(Keep(logging.WARNING)):
    ...     logging.getLogger("crossview.models").warning("the pair looks swapped")
    >>> logging.getLogger("crossview.models").warning("not shown: the block has ended")
    >>> seen
    ['the pair looks swapped']
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def library_log_to(handler: logging.Handler) -> Iterator[None]:
    """Within: the ``crossview`` logger's records also go to ``handler`` (at its level)."""
    logger = logging.getLogger("crossview")
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
