"""The stereo tab: disparity of a pair (:func:`crossview.api.estimate_disparity`, the model's
defaults or the chosen speed preset, as ``crossview stereo [--preset]`` runs it), drawn as
``crossview stereo`` draws ``NAME_disp_color.png`` (:func:`crossview.viz.disparity_to_colour`,
with its colour bar), and its confidence in grey (255 = 1, as ``--save-confidence``'s PNG).
With a focal length and a baseline, the metric depth (:func:`crossview.api.metric_depth`, the
filters of ``crossview stereo --focal --baseline``) in colour and the kept pixels as a point
cloud for the 3D viewer (:mod:`crossview.demo.point_cloud`). With ``rectify``, two photographs
taken by hand are first rectified from their own matches
(:func:`crossview.api.rectify_photographs`, ``crossview stereo --rectify``), and the disparity
is the rectified left image's; that gives no metric depth (the calibration is unknown), so
depth is then skipped with a warning.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import gradio as gr
import numpy as np

from crossview import api, viz
from crossview.demo import models, speed
from crossview.demo.errors import in_page
from crossview.demo.point_cloud import viewer_ply
from crossview.demo.samples import stereo_sample
from crossview.demo.uploads import read_pair
from crossview.errors import UserError

FIELDS = ("left image", "right image")
EDGE_RATIO = 0.05  # crossview stereo's default --edge-ratio: flying pixels at depth edges dropped


@dataclass(frozen=True)
class StereoAnswer:
    """What the tab shows: the disparity ``[H, W + bar, 3]`` and confidence ``[H, W]``
    pictures (uint8), the depth picture and the point cloud file (``None`` without a
    calibration), and a one-paragraph summary (Markdown); and the disparity itself ``[H, W]``
    float32 (px)."""

    raw: np.ndarray
    disparity: np.ndarray
    confidence: np.ndarray
    depth: np.ndarray | None
    point_cloud: Path | None
    summary: str

    def outputs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, str | None, str]:
        """In the order of the tab's output fields."""
        return (self.disparity, self.confidence, self.depth,
                None if self.point_cloud is None else str(self.point_cloud), self.summary)


def calibration(focal: float | None, baseline: float | None, doffs: float | None,
                cx: float | None, cy: float | None) -> api.StereoCalibration | None:
    """The calibration the number fields give: ``None`` when the focal length and the baseline
    are both empty (the page sends an empty number field as 0, never a focal length or a
    baseline; an empty ``cx``, ``cy`` is the image centre); a :class:`UserError` when only one
    of the two is given or a number is wrong."""
    if not focal and not baseline:
        return None
    if not focal or not baseline:
        missing = "focal length (px)" if not focal else "baseline (m)"
        raise UserError(f"depth needs the focal length and the baseline: give the {missing} "
                        "too, or clear both")
    return api.StereoCalibration(float(focal), float(baseline), float(doffs or 0.0),
                                 float(cx) if cx else None, float(cy) if cy else None)


def confidence_picture(confidence: np.ndarray) -> np.ndarray:
    """``[H, W]`` in [0, 1] -> uint8 grey ``[H, W]`` (``round(255 c)``)."""
    return np.round(np.clip(confidence, 0, 1) * 255).astype(np.uint8)


def estimate(left: np.ndarray, right: np.ndarray, model: str,
             cal: api.StereoCalibration | None = None, rectify: bool = False,
             preset: str | None = None, progress: gr.Progress | None = None) -> StereoAnswer:
    """The tab's answer for the pair ``left``, ``right`` (``[H, W, 3]`` uint8) with the model
    named ``model`` and the speed ``preset`` (``None``: the model's own settings; see the
    module docstring)."""
    report = progress or (lambda *args, **kwargs: None)
    notes = []
    if rectify:
        report(0.05, desc="rectifying the photographs from their matches")
        pair = api.rectify_photographs(left, right)
        left, right = pair.left, pair.right
        notes.append("already rectified, kept as it is" if pair.focal is None else
                     f"rectified from {pair.matches} matches (rows agree to "
                     f"{pair.row_error:.2f} px)")
        if cal is not None:
            gr.Warning("rectifying photographs gives no metric depth (their calibration is "
                       "unknown): the focal length and baseline are not used")
            cal = None
    report(0.2, desc=f"loading {model}")
    network = models.load("stereo", model)
    report(0.3, desc=f"estimating the disparity of {left.shape[1]}x{left.shape[0]} px")
    start = time.perf_counter()
    result = api.estimate_disparity(left, right, model=network, preset=preset)
    seconds = time.perf_counter() - start
    report(0.85, desc="drawing")
    disparity, valid = result.disparity[0].cpu(), result.valid[0].cpu()
    raw = disparity.numpy()
    notes.insert(0, f"{speed.titled(model, preset)}: {raw.shape[1]}x{raw.shape[0]} px in "
                 f"{seconds:.1f} s; disparity {np.nanmin(raw):.1f} to {np.nanmax(raw):.1f} px, "
                 f"{100 * float(valid.float().mean()):.0f} % left-right consistent")
    depth_picture = cloud = None
    if cal is not None:
        metric = api.metric_depth(disparity, valid, cal, max_depth=None, edge_ratio=EDGE_RATIO)
        keep = metric.keep.numpy()
        if not keep.any():
            raise UserError("no pixel has a depth with this calibration (check the focal "
                            "length, baseline and doffs)")
        depth = metric.depth.numpy()
        depth_picture = viz.depth_to_colour(depth, keep)
        report(0.9, desc="writing the point cloud")
        cloud = viewer_ply(metric.points.numpy(), left[keep])
        notes.append(f"depth {np.nanmin(depth):.2f} to {np.nanmax(depth):.2f} m, "
                     f"{int(keep.sum())} points")
    return StereoAnswer(raw, viz.disparity_to_colour(raw),
                        confidence_picture(result.confidence[0].cpu().numpy()),
                        depth_picture, cloud, "; ".join(notes) + ".")


@in_page
def run_stereo(left: str | None, right: str | None, model: str, rectify: bool,
               focal: float | None, baseline: float | None, doffs: float | None,
               cx: float | None, cy: float | None, speed_choice: str = speed.DEFAULT,
               progress: gr.Progress = gr.Progress()  # noqa: B008
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, str | None, str]:
    """The Run button: the uploads' paths and the fields (``speed_choice``: the speed field,
    :mod:`crossview.demo.speed`) -> the tab's outputs (:meth:`StereoAnswer.outputs`)."""
    progress(0.0, desc="reading the pair")
    cal = calibration(focal, baseline, doffs, cx, cy)
    images = read_pair(left, right, FIELDS)
    return estimate(*images, model, cal, rectify, speed.preset(speed_choice),
                    progress).outputs()


@in_page
def load_sample() -> tuple[str, str, bool, float, float, float, float | None, float | None]:
    """The sample button: the Motorcycle pair into the two image fields, rectification off,
    its calibration into the number fields (focal, baseline, doffs, cx, cy)."""
    sample = stereo_sample()
    cal = sample.calibration
    return (str(sample.left), str(sample.right), False, cal.focal, cal.baseline, cal.doffs,
            cal.cx, cal.cy)
