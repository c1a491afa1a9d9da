"""crossview: cross-view matching with attention.

Three published systems in one library:

- MatchAttention and its models MatchStereo / MatchFlow (stereo disparity, optical flow);
- camera-conditioned attention (PRoPE, GTA, CaPE, raymaps) for multi-view transformers;
- TransforMatcher (match-to-match attention) for semantic correspondence.

The user-facing functions (``load_model``, ``build_model``, ``list_models``,
``estimate_disparity``, ``estimate_flow``, ``match_keypoints``, ``adapt_to_pair``,
``rectify_stereo``, ``rectify_photographs``) live in
:mod:`crossview.api`, ``stereo_stream`` (disparity of a stream of frames, warm-started) in
:mod:`crossview.streams`, ``disparity_to_depth`` and ``depth_to_points`` in
:mod:`crossview.geometry.depth`; they are re-exported here lazily, so ``import crossview``
stays cheap, and ``dir(crossview)`` lists them.

Messages that are not a command's own output (a removed stale file, a build waited for, a
download) go to the standard ``logging`` logger ``crossview`` (and its children, one per
module); the library adds only a ``NullHandler``, so a program that uses crossview decides what
is shown. The ``crossview`` command shows them on stderr as ``warning: ...`` / ``note: ...``
lines (:mod:`crossview.cli.log_handler`).
"""

from __future__ import annotations

import logging
from importlib import import_module
from typing import Any

__version__ = "0.1.0"

logging.getLogger(__name__).addHandler(logging.NullHandler())

_API_NAMES = ("load_model", "build_model", "list_models", "estimate_disparity", "estimate_flow",
              "match_keypoints", "adapt_to_pair", "rectify_stereo",
              "rectify_photographs")
_GEOMETRY_NAMES = ("disparity_to_depth", "depth_to_points")
_STREAM_NAMES = ("stereo_stream",)


def __getattr__(name: str) -> Any:
    if name in _API_NAMES:
        return getattr(import_module("crossview.api"), name)
    if name in _GEOMETRY_NAMES:
        return getattr(import_module("crossview.geometry.depth"), name)
    if name in _STREAM_NAMES:
        return getattr(import_module("crossview.streams"), name)
    raise AttributeError(f"module 'crossview' has no attribute {name!r}")


def __dir__() -> list[str]:
    # the lazy names are no module globals until first used: listed here, or dir() hides them
    return sorted({*globals(), *_API_NAMES, *_GEOMETRY_NAMES, *_STREAM_NAMES})


__all__ = ["__version__", *_API_NAMES, *_GEOMETRY_NAMES, *_STREAM_NAMES]
