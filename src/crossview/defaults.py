"""The models that run when the user names none (on the ground floor and import-free: the
command line shows them in its help without loading the api).

Both defaults are weights bundled with the package and trained by crossview:
``matchstereo-hybrid`` and ``matchflow-hybrid``, the small ``matchstereo-mini`` /
``matchflow-mini`` networks with adapted frozen ImageNet features. Both were trained first on
the synthetic engine, then fine-tuned on real photographs: the stereo network on synthetic pairs
mixed with 23 real Middlebury scenes with ground truth
(``configs/matchstereo-hybrid-real.yaml``, ``-real2.yaml``), the flow network with a
self-supervised term on unlabelled real video (``configs/matchflow-hybrid-real.yaml`` ..
``-real4.yaml``) and then on those 23 scenes read as flow pairs
(``configs/matchflow-hybrid-realstereo.yaml``, ``-realstereo2.yaml``); the Middlebury data, and
so these weights, are for research use with citation. At inference each is fused with an
OpenCV matcher (SGBM, DIS). Recipe and measured accuracy: docs/training.md, docs/real-eval.md
and docs/results/real-stereo/README.md. The published architectures (``matchstereo-t/-s/-b``,
``matchflow-b``) need ``weights=`` (a published checkpoint) and warn otherwise. Semantic
matching runs ``transformatcher`` with its bundled weights.
"""

from __future__ import annotations

DEFAULT_STEREO_MODEL = "matchstereo-hybrid"
DEFAULT_FLOW_MODEL = "matchflow-hybrid"
DEFAULT_MATCH_MODEL = "transformatcher"

# the command that runs each default when given no --model
DEFAULT_MODELS = {"stereo": DEFAULT_STEREO_MODEL, "flow": DEFAULT_FLOW_MODEL,
                  "match": DEFAULT_MATCH_MODEL}

# the speed presets of the fused defaults, fastest first (crossview.models.dense.presets)
PRESET_NAMES = ("fast", "balanced", "best")
