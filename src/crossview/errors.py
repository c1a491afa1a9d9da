"""The one exception type for user mistakes, and how its messages show what the user gave.

A :class:`UserError` carries a message that a user can act on (a missing file, a wrong size, a
bad option). The CLI prints it as one line on stderr and exits with code 2, without a traceback.
Library functions may raise it directly, or raise ``ValueError``/``TypeError`` for programming
errors (wrong tensor shapes), which the CLI does not hide. A value quoted in a message goes
through :func:`shown`, which keeps it short whatever its size.
"""

from __future__ import annotations

import reprlib

SHOWN_CHARS = 80  # the longest value a message quotes
_BIG_INT_BITS = 256  # about 77 digits; repr() of more than 4300 digits even raises ValueError


class UserError(Exception):
    """A mistake in what the user gave (paths, options, file contents); shown as one line."""


class _ShortRepr(reprlib.Repr):
    """reprlib's abbreviations (a few items of a container, the start of a long string), so a
    value of a million items is never turned into text in full; huge integers by their size."""

    def __init__(self) -> None:
        super().__init__()
        self.maxstring = self.maxother = self.maxlong = SHOWN_CHARS

    def repr_int(self, x: int, level: int) -> str:
        if x.bit_length() > _BIG_INT_BITS:
            return f"<an integer of about {int(x.bit_length() * 0.30103) + 1} digits>"
        return super().repr_int(x, level)


_REPR = _ShortRepr()


def shown(value: object) -> str:
    """``repr(value)`` for a message, at most :data:`SHOWN_CHARS` characters (cut with
    ``...``): a value a user gave may be a 10 MB list or a 5000-digit number.

    >>> shown(list(range(10**6)))
    '[0, 1, 2, 3, 4, 5, ...]'
    >>> shown(10**5000)
    '<an integer of about 5001 digits>'
    """
    text = _REPR.repr(value)
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS - 3] + "..."
