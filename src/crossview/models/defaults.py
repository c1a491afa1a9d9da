"""The models that run when the user names none (kept import-free so the CLI stays fast).

Stereo defaults to the weights bundled with the package (``matchstereo-mini``, trained on the
synthetic engine; see docs/training.md for what it reaches). No MatchFlow weights are bundled
yet, so flow defaults to ``matchflow-b``, which needs ``weights=`` (published checkpoint) to be
meaningful and warns otherwise.
"""

from __future__ import annotations

DEFAULT_STEREO_MODEL = "matchstereo-mini"
DEFAULT_FLOW_MODEL = "matchflow-b"
