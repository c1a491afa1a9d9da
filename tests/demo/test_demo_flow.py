"""The demo's flow tab without a browser: two frames or a video's first two give the picture
``crossview flow`` draws; the speed choice reaches the estimate; a video of one frame, or a
preset for a model that does not fuse, is a page error with crossview's message."""

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


def _frame_files(tmp_path: Path) -> list[str]:
    """The first two of :func:`_frames` written as PNG files; their paths."""
    paths = []
    for k, frame in enumerate(_frames()[:2]):
        api.write_image(tmp_path / f"f{k}.png", frame)
        paths.append(str(tmp_path / f"f{k}.png"))
    return paths


def test_two_frames_give_the_flow_picture_of_crossview_flow(tmp_path: Path) -> None:
    picture, summary = flow.run_flow(*_frame_files(tmp_path), None, DEFAULT_FLOW_MODEL)
    result = api.estimate_flow(*_frames()[:2])
    expected = viz.flow_to_colour(result.flow[0].permute(1, 2, 0).numpy(), key=True)
    np.testing.assert_array_equal(picture, expected)  # what crossview flow's pair_writers draw
    assert summary.startswith(f"{DEFAULT_FLOW_MODEL}: 160x144 px")


def test_the_speed_choice_is_the_preset_of_the_estimate(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    paths = _frame_files(tmp_path)
    presets = []
    estimate_flow = api.estimate_flow

    def recorded(*args: object, preset: str | None = None, **kwargs: object) -> object:
        presets.append(preset)
        return estimate_flow(*args, preset=preset, **kwargs)

    monkeypatch.setattr(api, "estimate_flow", recorded)
    _, summary = flow.run_flow(*paths, None, DEFAULT_FLOW_MODEL, "fast")
    assert presets == ["fast"]
    assert summary.startswith(f"{DEFAULT_FLOW_MODEL} (fast): 160x144 px")


def test_a_preset_for_a_model_that_does_not_fuse_is_a_page_error(tmp_path: Path) -> None:
    with pytest.raises(gr.Error) as raised:
        flow.run_flow(*_frame_files(tmp_path), None, "matchflow-mini", "best")
    assert raised.value.message.startswith("a preset is for models that fuse with a classical "
                                           "matcher")
    assert "'matchflow-mini' does not" in raised.value.message


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
