"""Kept only for ``crossview.train.semantic``, which imports :func:`write_json` from here:
delete this file once that import is gone (issue 19, item 3; the helpers live in
:mod:`crossview.report` and :mod:`crossview.bench.measure`)."""

from __future__ import annotations

from crossview.report import write_json as write_json
