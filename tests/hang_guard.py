"""The one limit on how long a test waits for a subprocess (distributed ranks, a run killed with
``kill -9``, a CLI call). It guards against a hang, it does not assert speed: under heavy load on
a shared machine these processes take several times their usual time, so it is generous."""

from __future__ import annotations

HANG_GUARD_SECONDS = 600
