"""The models that run when the user names none (kept import-free so the CLI stays fast).

Both defaults are weights bundled with the package, trained by crossview on its synthetic
engine (``matchstereo-mini``, ``matchflow-mini``; recipe and measured accuracy in
docs/training.md). The published architectures (``matchstereo-t/-s/-b``, ``matchflow-b``) need
``weights=`` (a published checkpoint) and warn otherwise.
"""

from __future__ import annotations

DEFAULT_STEREO_MODEL = "matchstereo-hybrid"
DEFAULT_FLOW_MODEL = "matchflow-mini"
