"""The demo's flow tab without a browser: two frames or a video's first two give the picture
``crossview flow`` draws; a video of one frame is a page error with crossview's message."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

gr = pytest.importorskip("gradio", reason='the demo needs gradio: pip install "crossview[demo]"')

from crossview import api, viz  # noqa: E402
from crossview.defaults import DEFAULT_FLOW_MODEL  # noqa: E402
from crossview.demo import flow  # noqa: E402
from video_files import write_lossless_video  # noqa: E402  (tests/video_files.py)


def _frames() -> list[np.ndarray]:
    """A textured 144 x 160 frame moved 3 px right and 1 px down, and again."""
    rng = np.random.default_rng(0)
    first = rng.integers(0, 256, (72, 80, 3), dtype=np.uint8).repeat(2, 0).repeat(2, 1)
    return [np.roll(first, (k, 3 * k), axis=(0, 1)) for k in range(3)]


def test_two_frames_give_the_flow_picture_of_crossview_flow(tmp_path: Path) -> None:
    frames = _frames()
    paths = []
    for k in range(2):
        api.write_image(tmp_path / f"f{k}.png", frames[k])
        paths.append(str(tmp_path / f"f{k}.png"))
    picture, summary = flow.run_flow(*paths, None, DEFAULT_FLOW_MODEL)
    result = api.estimate_flow(*frames[:2])
    expected = viz.flow_to_colour(result.flow[0].permute(1, 2, 0).numpy(), key=True)
    np.testing.assert_array_equal(picture, expected)  # what crossview flow's pair_writers draw
    assert summary.startswith(f"{DEFAULT_FLOW_MODEL}: 160x144 px")


def test_a_video_gives_its_first_two_frames(tmp_path: Path) -> None:
    frames = _frames()
    write_lossless_video(tmp_path / "clip.avi", frames)
    first, second = flow.video_frames(tmp_path / "clip.avi")
    np.testing.assert_array_equal(first, frames[0])
    np.testing.assert_array_equal(second, frames[1])
    write_lossless_video(tmp_path / "still.avi", frames[:1])
    with pytest.raises(gr.Error) as raised:  # the video wins over the image fields
        flow.run_flow(None, None, str(tmp_path / "still.avi"), DEFAULT_FLOW_MODEL)
    assert raised.value.message == ("video (still.avi): the video holds only 1 frame(s), 2 "
                                    "needed (flow needs two frames)")


def test_the_sample_is_the_motorcycle_pair_as_two_frames() -> None:
    first, second, video = flow.load_sample()
    assert (Path(first).name, Path(second).name, video) == ("motorcycle_left.png",
                                                             "motorcycle_right.png", None)
