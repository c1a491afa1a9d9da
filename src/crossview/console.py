"""The rich consoles every command prints through: :data:`stdout` for results, :data:`stderr`
for progress bars, warnings and errors.

Markup highlighting is off (paths and numbers are printed as written); ``stderr`` soft-wraps
so that a long error stays one line that a script can read.
"""

from __future__ import annotations

from rich.console import Console

stdout = Console(highlight=False)
stderr = Console(stderr=True, highlight=False, soft_wrap=True)
