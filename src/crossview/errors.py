"""The one exception type for user mistakes.

A :class:`UserError` carries a message that a user can act on (a missing file, a wrong size, a
bad option). The CLI prints it as one line on stderr and exits with code 2, without a traceback.
Library functions may raise it directly, or raise ``ValueError``/``TypeError`` for programming
errors (wrong tensor shapes), which the CLI does not hide.
"""

from __future__ import annotations


class UserError(Exception):
    """A mistake in what the user gave (paths, options, file contents); shown as one line."""
