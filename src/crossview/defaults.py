"""The models that run when the user names none (on the ground floor and import-free: the
command line shows them in its help without loading the api).

Both defaults are weights bundled with the package, trained by crossview on its synthetic
engine: ``matchstereo-hybrid`` and ``matchflow-hybrid``, the small ``matchstereo-mini`` /
``matchflow-mini`` networks with adapted frozen ImageNet features, which generalise better to
real photographs (recipe and measured accuracy in docs/training.md and docs/real-eval.md). The
published architectures (``matchstereo-t/-s/-b``, ``matchflow-b``) need ``weights=`` (a
published checkpoint) and warn otherwise. Semantic matching runs ``transformatcher`` with its
bundled weights.
"""

from __future__ import annotations

DEFAULT_STEREO_MODEL = "matchstereo-hybrid"
DEFAULT_FLOW_MODEL = "matchflow-hybrid"
DEFAULT_MATCH_MODEL = "transformatcher"

# the command that runs each default when given no --model
DEFAULT_MODELS = {"stereo": DEFAULT_STEREO_MODEL, "flow": DEFAULT_FLOW_MODEL,
                  "match": DEFAULT_MATCH_MODEL}
