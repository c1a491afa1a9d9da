"""The flow tab: optical flow from the first frame to the second
(:func:`crossview.api.estimate_flow`, the model's defaults or the chosen speed preset, as
``crossview flow [--preset]`` runs it), drawn as ``crossview flow`` draws
``NAME_flow_color.png`` (:func:`crossview.viz.flow_to_colour` with its colour-wheel key on the
right). The frames are two uploaded images or the first two frames of an uploaded video (PyAV,
``pip install "crossview[video]"``; a video wins over the image fields).
"""

from __future__ import annotations

import itertools
import time
from pathlib import Path

import gradio as gr
import numpy as np

from crossview import api, viz
from crossview.demo import models, speed
from crossview.demo.errors import in_page
from crossview.demo.samples import STEREO, sample_file
from crossview.demo.uploads import MAX_MEGAPIXELS, read_pair, renamed
from crossview.errors import UserError

FIELDS = ("first frame", "second frame")


def video_frames(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """The first two frames of the video ``path`` (a :class:`UserError` naming the video when
    it holds fewer, does not decode, or PyAV is missing)."""
    path = Path(path)
    shown = f"video ({path.name})"
    try:
        info = api.open_video(path, min_frames=2, purpose="flow needs two frames")
        height, width = info.size
        if width * height > MAX_MEGAPIXELS * 1e6:
            raise UserError(f"{path} has frames of {width}x{height} px; the demo takes images "
                            f"up to {MAX_MEGAPIXELS:g} MP")
        first, second = itertools.islice(api.video_frames(path), 2)
    except UserError as error:
        raise UserError(renamed(str(error), path, shown)) from None
    return first, second


def estimate(first: np.ndarray, second: np.ndarray, model: str, preset: str | None = None,
             progress: gr.Progress | None = None) -> tuple[np.ndarray, str]:
    """The flow picture ``[H, W + key, 3]`` uint8 of the frames ``first``, ``second``
    (``[H, W, 3]`` uint8) with the model named ``model`` and the speed ``preset`` (``None``:
    the model's own settings), and a summary (Markdown)."""
    report = progress or (lambda *args, **kwargs: None)
    report(0.2, desc=f"loading {model}")
    network = models.load("flow", model)
    report(0.3, desc=f"estimating the flow of {first.shape[1]}x{first.shape[0]} px")
    start = time.perf_counter()
    result = api.estimate_flow(first, second, model=network, preset=preset)
    seconds = time.perf_counter() - start
    report(0.9, desc="drawing")
    flow = result.flow[0].permute(1, 2, 0).cpu().numpy()
    magnitude = np.hypot(flow[..., 0], flow[..., 1])
    summary = (f"{speed.titled(model, preset)}: {flow.shape[1]}x{flow.shape[0]} px in "
               f"{seconds:.1f} s; motion up to {np.nanmax(magnitude):.1f} px (median "
               f"{np.nanmedian(magnitude):.1f}), "
               f"{100 * float(result.valid[0].float().mean()):.0f} % forward-backward "
               "consistent.")
    return viz.flow_to_colour(flow, key=True), summary


@in_page
def run_flow(first: str | None, second: str | None, video: str | None, model: str,
             speed_choice: str = speed.DEFAULT, progress: gr.Progress = gr.Progress()  # noqa: B008
             ) -> tuple[np.ndarray, str]:
    """The Run button: the uploads (two frames, or a video), the model and the speed field
    (:mod:`crossview.demo.speed`) -> the flow picture and the summary."""
    progress(0.0, desc="reading the frames")
    frames = video_frames(video) if video else read_pair(first, second, FIELDS)
    return estimate(*frames, model, speed.preset(speed_choice), progress)


@in_page
def load_sample() -> tuple[str, str, None]:
    """The sample button: the Motorcycle pair as two frames (a horizontal motion), no video."""
    first, second = map(sample_file, STEREO)
    return str(first), str(second), None
