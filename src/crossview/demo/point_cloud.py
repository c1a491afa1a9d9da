"""The stereo tab's point cloud for the page's 3D viewer (``gr.Model3D``): a binary PLY
(:func:`crossview.api.write_ply`, coloured by the left image) in the viewer's frame, x right,
y up and z towards the camera (the camera frame of ``crossview stereo``'s ``NAME_depth.ply``,
x right, y down, z forward, turned half a turn about x, so the scene stands upright), thinned
to at most :data:`MAX_POINTS` points so that the browser stays responsive.

The files go to one temporary folder per process, of which the newest :data:`KEPT` are kept
(Gradio serves a copy of each from its own cache).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

from crossview import api

MAX_POINTS = 400_000
KEPT = 8
_folder: Path | None = None


def _scratch() -> Path:
    global _folder
    if _folder is None:
        _folder = Path(tempfile.mkdtemp(prefix="crossview-demo-"))
    return _folder


def viewer_ply(points: np.ndarray, colours: np.ndarray) -> Path:
    """Write the camera-frame ``points [N, 3]`` (metres; x right, y down, z forward) coloured
    ``colours [N, 3]`` uint8 as a PLY in the viewer's frame (see the module docstring); return
    its path."""
    step = max(1, -(-len(points) // MAX_POINTS))
    turned = points[::step] * np.array([1.0, -1.0, -1.0])
    with tempfile.NamedTemporaryFile(suffix=".ply", prefix="points-", dir=_scratch(),
                                     delete=False) as handle:
        path = Path(handle.name)
    api.write_ply(path, turned.astype(np.float32), np.ascontiguousarray(colours[::step]))
    for old in sorted(_scratch().glob("points-*.ply"), key=lambda p: p.stat().st_mtime)[:-KEPT]:
        old.unlink(missing_ok=True)
    return path
