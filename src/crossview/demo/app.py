"""The page of ``crossview demo``: its three tabs laid out with Gradio, each wired to its
handlers (:mod:`crossview.demo.stereo`, :mod:`~crossview.demo.flow`,
:mod:`~crossview.demo.matching`), and :func:`serve`, which runs it on a local port.

Every output picture is sent to the browser as PNG (Gradio's default, WebP, would change its
pixels). The page needs nothing from the network: its fonts and scripts come with Gradio, the
models with crossview, and Gradio's usage statistics are off (:mod:`crossview.demo`).
"""

from __future__ import annotations

import gradio as gr

from crossview.demo import flow, matching, models, speed, stereo
from crossview.demo.uploads import MAX_MEGAPIXELS, MAX_UPLOAD, image_field

TITLE = "crossview demo"
MODELS = "models"  # the queue every model run waits in: one at a time, the CPU is the limit
INTRO = (f"# {TITLE}\nStereo, optical flow and semantic matching with the models bundled with "
         "crossview, on this computer (nothing leaves it). Images up to "
         f"{MAX_MEGAPIXELS:g} MP; a run on a CPU takes seconds.")


def _picture(label: str, elem_id: str, **options: object) -> gr.Image:
    """An output picture, sent as PNG."""
    return gr.Image(label=label, elem_id=elem_id, format="png", interactive=False, **options)


def _upload(label: str, elem_id: str) -> gr.Image:
    return image_field(label=label, elem_id=elem_id, format="png",
                       sources=["upload", "clipboard"])


def _stereo_tab() -> None:
    gr.Markdown("A rectified pair (left camera first), or two photographs taken side by side "
                "with *rectify* on. A focal length and a baseline add the metric depth and a "
                "3D point cloud.")
    with gr.Row():
        left = _upload("Left image", "stereo-left")
        right = _upload("Right image", "stereo-right")
    with gr.Row():
        model = gr.Dropdown(models.choices("stereo"), label="Model", elem_id="stereo-model")
        rectify = gr.Checkbox(label="Rectify (photographs taken by hand)",
                              elem_id="stereo-rectify")
        preset = speed.field(model, "stereo-speed")
    with gr.Row():
        focal = gr.Number(label="Focal length (px)", elem_id="stereo-focal")
        baseline = gr.Number(label="Baseline (m)", elem_id="stereo-baseline")
        doffs = gr.Number(label="doffs (px, Middlebury)", value=0, elem_id="stereo-doffs")
        cx = gr.Number(label="cx (px; empty or 0: centre)", elem_id="stereo-cx")
        cy = gr.Number(label="cy (px; empty or 0: centre)", elem_id="stereo-cy")
    with gr.Row():
        sample = gr.Button("Load the sample pair", elem_id="stereo-sample")
        run = gr.Button("Estimate disparity", variant="primary", elem_id="stereo-run")
    summary = gr.Markdown(elem_id="stereo-summary")
    with gr.Row():
        disparity = _picture("Disparity (px)", "stereo-disparity")
        confidence = _picture("Confidence (white: 1)", "stereo-confidence")
    with gr.Row():
        depth = _picture("Depth (m; black: none)", "stereo-depth")
        # seen from 20 degrees to the right of the camera and 10 above: the depth shows
        cloud = gr.Model3D(label="Point cloud (drag to turn)", display_mode="point_cloud",
                           clear_color=(1.0, 1.0, 1.0, 1.0), camera_position=(110, 80, None),
                           elem_id="stereo-cloud")
    sample.click(stereo.load_sample, None, [left, right, rectify, focal, baseline, doffs, cx, cy])
    run.click(stereo.run_stereo,
              [left, right, model, rectify, focal, baseline, doffs, cx, cy, preset],
              [disparity, confidence, depth, cloud, summary], concurrency_id=MODELS)


def _flow_tab() -> None:
    gr.Markdown("Two frames, or a short video (its first two frames; needs "
                "`pip install \"crossview[video]\"`). The key on the right of the picture: "
                "the direction by colour, the labelled magnitude at full colour.")
    with gr.Row():
        first = _upload("First frame", "flow-first")
        second = _upload("Second frame", "flow-second")
        video = gr.File(label="or a video", file_types=["video"], type="filepath",
                        elem_id="flow-video")
    with gr.Row():
        model = gr.Dropdown(models.choices("flow"), label="Model", elem_id="flow-model")
        preset = speed.field(model, "flow-speed")
    with gr.Row():
        sample = gr.Button("Load the sample pair", elem_id="flow-sample")
        run = gr.Button("Estimate flow", variant="primary", elem_id="flow-run")
    summary = gr.Markdown(elem_id="flow-summary")
    picture = _picture("Flow", "flow-picture")
    sample.click(flow.load_sample, None, [first, second, video])
    run.click(flow.run_flow, [first, second, video, model, preset], [picture, summary],
              concurrency_id=MODELS)


def _matching_tab() -> None:
    gr.Markdown("Semantic correspondence (two instances of one kind of object): click points "
                "on the source, see where they land on the target.")
    source_image, target_image = gr.State(None), gr.State(None)
    points = gr.State([])
    with gr.Row():
        source = _upload("Source: click points on it", "match-source")
        target = _upload("Target", "match-target")
    with gr.Row():
        sample = gr.Button("Load the example", elem_id="match-sample")
        clear = gr.Button("Clear the points", elem_id="match-clear")
    summary = gr.Markdown(elem_id="match-summary")
    with gr.Row():
        transferred = _picture("Transferred points", "match-transferred")
        lines = _picture("Matches side by side", "match-lines")
    shown = [source, transferred, lines, points, summary]
    for event in (source.upload, source.clear):
        event(matching.new_source, [source, target_image], [source_image, *shown],
              concurrency_id=MODELS)
    for event in (target.upload, target.clear):
        event(matching.new_target, [target, source_image, points], [target_image, *shown],
              concurrency_id=MODELS)
    source.select(matching.add_point, [source_image, target_image, points], shown,
                  concurrency_id=MODELS)
    clear.click(matching.clear_points, [source_image, target_image], shown,
                concurrency_id=MODELS)
    sample.click(matching.load_sample, None, [source_image, target_image, target, *shown],
                 concurrency_id=MODELS)


def build() -> gr.Blocks:
    """The page (not yet served)."""
    with gr.Blocks(title=TITLE, analytics_enabled=False) as page:
        gr.Markdown(INTRO)
        with gr.Tab("Stereo", elem_id="tab-stereo"):
            _stereo_tab()
        with gr.Tab("Flow", elem_id="tab-flow"):
            _flow_tab()
        with gr.Tab("Matching", elem_id="tab-matching"):
            _matching_tab()
    return page


def serve(host: str = "127.0.0.1", port: int = 7860, share: bool = False) -> gr.Blocks:
    """Serve the page on ``host:port`` (``share``: also through a public Gradio link, which
    needs the network) in Gradio's server threads; returns the running page
    (``page.local_url``, ``page.share_url``; ``page.block_thread()`` waits for Ctrl-C,
    ``page.close()`` stops it)."""
    page = build()
    page.queue(default_concurrency_limit=1)  # one run per queue (MODELS: every model run)
    page.launch(server_name=host, server_port=port, share=share, inbrowser=False,
                show_error=False, max_file_size=MAX_UPLOAD, prevent_thread_lock=True,
                quiet=True, run_history=False)
    return page
