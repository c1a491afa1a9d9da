"""The matching tab: points clicked on a source image transferred onto a target image
(:func:`crossview.api.match_keypoints`, the bundled TransforMatcher, as ``crossview match``
runs it). Each click adds a point and transfers them all again; the source is shown with its
points, the target with the transferred ones (numbered, in matching colours), and both side by
side with a line per match (:func:`crossview.viz.match_lines`).

The clicked points live in the page's state (a list of ``[x, y]`` pixels of the source); the
source as uploaded is kept in the state too, since its field then shows the drawn points.
"""

from __future__ import annotations

import colorsys
from typing import Any

import gradio as gr
import numpy as np
from PIL import Image, ImageDraw

from crossview import api, viz
from crossview.defaults import DEFAULT_MATCH_MODEL
from crossview.demo import models
from crossview.demo.errors import in_page
from crossview.demo.samples import matching_sample
from crossview.demo.uploads import read_upload

MAX_POINTS = 64  # points on the source at once (each click adds one)
Points = list[list[float]]


def point_colour(i: int, n: int) -> tuple[int, int, int]:
    """The colour of point ``i`` of ``n`` (hues around the wheel)."""
    r, g, b = colorsys.hsv_to_rgb(i / max(n, 1), 0.9, 1.0)
    return round(255 * r), round(255 * g), round(255 * b)


def draw_points(image: np.ndarray, points: np.ndarray) -> np.ndarray:
    """``image [H, W, 3]`` uint8 with ``points [N, 2]`` (pixel ``(x, y)``) drawn as numbered
    dots in :func:`point_colour`."""
    canvas = Image.fromarray(image)
    draw = ImageDraw.Draw(canvas)
    radius = max(3, round(max(image.shape[:2]) / 100))
    for i, (x, y) in enumerate(points):
        draw.ellipse([x - radius, y - radius, x + radius, y + radius],
                     fill=point_colour(i, len(points)), outline=(0, 0, 0))
        draw.text((x + radius + 1, y - radius - 1), str(i + 1), fill=(255, 255, 255),
                  stroke_width=1, stroke_fill=(0, 0, 0))
    return np.asarray(canvas)


def transfer(source: np.ndarray, target: np.ndarray, points: Points
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The source with ``points``, the target with their transfers and the two side by side
    with lines (uint8 pictures)."""
    result = api.match_keypoints(source, target, np.asarray(points, np.float32),
                                 model=models.load("semantic", DEFAULT_MATCH_MODEL))
    moved = result.transferred.numpy()
    return (draw_points(source, result.points.numpy()), draw_points(target, moved),
            viz.match_lines(source, target, result.points.numpy(), moved))


def _answer(source: np.ndarray | None, target: np.ndarray | None, points: Points,
            progress: Any) -> tuple[Any, ...]:
    """The tab's outputs: source field, target-with-points, side by side, points, summary."""
    if source is None:
        return None, None, None, [], "Upload a source image, then click points on it."
    if not points or target is None:
        ask = "Click points on the source." if target is not None else "Upload a target image."
        return draw_points(source, np.zeros((0, 2))), None, None, points, ask
    progress(0.3, desc=f"transferring {len(points)} point(s)")
    marked, moved, lines = transfer(source, target, points)
    return marked, moved, lines, points, f"{len(points)} point(s) transferred."


@in_page
def new_source(path: str | None, target: np.ndarray | None,
               progress: gr.Progress = gr.Progress()  # noqa: B008
               ) -> tuple[Any, ...]:
    """A source uploaded (or cleared): kept in the state, its points forgotten."""
    source = None if path is None else read_upload(path, "source image")
    return (source, *_answer(source, target, [], progress))


@in_page
def new_target(path: str | None, source: np.ndarray | None, points: Points,
               progress: gr.Progress = gr.Progress()  # noqa: B008
               ) -> tuple[Any, ...]:
    """A target uploaded (or cleared): kept in the state, the points transferred onto it."""
    target = None if path is None else read_upload(path, "target image")
    return (target, *_answer(source, target, points, progress))


@in_page
def add_point(source: np.ndarray | None, target: np.ndarray | None, points: Points,
              event: gr.SelectData, progress: gr.Progress = gr.Progress()  # noqa: B008
              ) -> tuple[Any, ...]:
    """A click on the source at ``event.index`` (pixel ``[x, y]``) adds a point (the oldest
    goes beyond :data:`MAX_POINTS`) and transfers them all."""
    if source is None:
        return _answer(None, target, [], progress)
    x, y = (float(v) for v in event.index[:2])
    return _answer(source, target, [*points, [x, y]][-MAX_POINTS:], progress)


@in_page
def clear_points(source: np.ndarray | None, target: np.ndarray | None,
                 progress: gr.Progress = gr.Progress()  # noqa: B008
                 ) -> tuple[Any, ...]:
    """The clear button: no points."""
    return _answer(source, target, [], progress)


@in_page
def load_sample(progress: gr.Progress = gr.Progress()  # noqa: B008
                ) -> tuple[Any, ...]:
    """The sample button: TransforMatcher's example images with its 4 x 4 grid of points."""
    source_path, target_path, points = matching_sample()
    source, target = api.read_image(source_path), api.read_image(target_path)
    pictures = _answer(source, target, [list(p) for p in points], progress)
    return (source, target, target, *pictures)
