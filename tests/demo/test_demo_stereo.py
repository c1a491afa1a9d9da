"""The demo's stereo tab without a browser: the sample pair gives what ``crossview stereo``
writes, depth and the point cloud follow the calibration, rectification, the speed choice
reaches the estimate, and every bad input is a ``gr.Error`` carrying crossview's message."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

gr = pytest.importorskip("gradio", reason='the demo needs gradio: pip install "crossview[demo]"')

from crossview import api  # noqa: E402
from crossview.defaults import DEFAULT_STEREO_MODEL  # noqa: E402
from crossview.demo import stereo, uploads  # noqa: E402

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
LEFT, RIGHT = str(SAMPLES / "motorcycle_left.png"), str(SAMPLES / "motorcycle_right.png")
NO_CALIBRATION = (None, None, 0, None, None)


def test_the_sample_pair_gives_the_disparity_of_crossview_stereo(
        stereo_command_outputs: dict[str, np.ndarray]) -> None:
    disparity, confidence, depth, cloud, summary = stereo.run_stereo(
        LEFT, RIGHT, DEFAULT_STEREO_MODEL, False, *NO_CALIBRATION)
    np.testing.assert_array_equal(disparity, stereo_command_outputs["colour"])
    assert confidence.shape == (250, 370) and confidence.dtype == np.uint8
    assert depth is None and cloud is None
    assert summary.startswith(f"{DEFAULT_STEREO_MODEL}: 370x250 px")
    answer = stereo.estimate(api.read_image(LEFT), api.read_image(RIGHT), DEFAULT_STEREO_MODEL)
    np.testing.assert_array_equal(answer.raw, stereo_command_outputs["disparity"])


def test_the_sample_calibration_gives_depth_and_an_upright_point_cloud() -> None:
    plyfile = pytest.importorskip("plyfile")
    sample = stereo.load_sample()
    assert sample[:3] == (LEFT, RIGHT, False)
    cal = api.read_stereo_calibration(SAMPLES / "motorcycle_calib.txt")
    assert sample[3:] == (cal.focal, cal.baseline, cal.doffs, cal.cx, cal.cy)
    _, _, depth, cloud, summary = stereo.run_stereo(*sample[:2], DEFAULT_STEREO_MODEL,
                                                    *sample[2:])
    assert depth.shape[0] == 250 and depth.shape[1] > 370  # its colour bar on the right
    vertices = plyfile.PlyData.read(cloud)["vertex"]
    points = np.stack([vertices[axis] for axis in "xyz"], 1)
    assert "; depth 2.1" in summary and summary.endswith(f" m, {len(points)} points.")
    # the viewer's frame: y up, z towards the camera; the scene lies 2-5 m in front of it
    assert np.all(points[:, 2] < 0) and np.median(-points[:, 2]) == pytest.approx(3.5, abs=1)
    assert Path(cloud).suffix == ".ply" and len(points) > 0.5 * 370 * 250


def test_rectify_keeps_a_rectified_pair_and_warns_that_it_gives_no_depth() -> None:
    with pytest.warns(UserWarning, match="gives no metric depth"):
        answer = stereo.estimate(api.read_image(LEFT), api.read_image(RIGHT),
                                 DEFAULT_STEREO_MODEL, stereo.calibration(500, 0.2, 0, 0, 0),
                                 rectify=True)
    assert answer.depth is None and answer.point_cloud is None
    assert "already rectified, kept as it is" in answer.summary


def test_the_speed_choice_is_the_preset_of_the_estimate(monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    presets = []
    estimate_disparity = api.estimate_disparity

    def recorded(*args: object, preset: str | None = None, **kwargs: object) -> object:
        presets.append(preset)
        return estimate_disparity(*args, preset=preset, **kwargs)

    monkeypatch.setattr(api, "estimate_disparity", recorded)
    *_, summary = stereo.run_stereo(LEFT, RIGHT, DEFAULT_STEREO_MODEL, False, *NO_CALIBRATION,
                                    "fast")
    assert presets == ["fast"]
    assert summary.startswith(f"{DEFAULT_STEREO_MODEL} (fast): 370x250 px")


def test_a_preset_for_a_model_that_does_not_fuse_is_a_page_error() -> None:
    with pytest.raises(gr.Error) as raised:
        stereo.run_stereo(LEFT, RIGHT, "matchstereo-mini", False, *NO_CALIBRATION, "best")
    assert raised.value.message.startswith("a preset is for models that fuse with a classical "
                                           "matcher")
    assert "'matchstereo-mini' does not" in raised.value.message
    assert raised.value.print_exception is False


def _broken(tmp_path: Path) -> str:
    (tmp_path / "broken.png").write_text("not an image")
    return str(tmp_path / "broken.png")


def _half(tmp_path: Path) -> str:
    api.write_image(tmp_path / "half.png", api.read_image(RIGHT)[::2, ::2])
    return str(tmp_path / "half.png")


@pytest.mark.parametrize(("inputs", "message"), [
    (lambda tmp: (_broken(tmp), RIGHT, *NO_CALIBRATION),
     "left image (broken.png): cannot read image (cannot identify image file 'broken.png')"),
    (lambda tmp: (LEFT, _half(tmp), *NO_CALIBRATION),
     "the left image is 370x250 px but the right image is 185x125 (W x H); a pair needs one "
     "size"),
    (lambda tmp: (LEFT, None, *NO_CALIBRATION), "no right image: upload one"),
    (lambda tmp: (LEFT, RIGHT, 500.0, None, 0, None, None),
     "depth needs the focal length and the baseline: give the baseline (m) too, or clear "
     "both"),
    (lambda tmp: (LEFT, RIGHT, -500.0, 0.2, 0, None, None),
     "the focal must be a positive number, got -500"),
], ids=["not-an-image", "sizes-differ", "missing", "baseline-missing", "negative-focal"])
def test_a_bad_input_is_a_page_error_with_crossviews_message(tmp_path: Path, inputs, message
                                                             ) -> None:
    left, right, *numbers = inputs(tmp_path)
    with pytest.raises(gr.Error) as raised:
        stereo.run_stereo(left, right, DEFAULT_STEREO_MODEL, False, *numbers)
    assert raised.value.message == message
    assert raised.value.print_exception is False  # the user's mistake: no traceback anywhere


def test_an_image_too_large_is_refused_before_it_is_decoded(monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    monkeypatch.setattr(uploads, "MAX_MEGAPIXELS", 0.05)
    monkeypatch.setattr(api, "read_image", lambda path: pytest.fail("decoded"))
    with pytest.raises(gr.Error) as raised:
        stereo.run_stereo(LEFT, RIGHT, DEFAULT_STEREO_MODEL, False, *NO_CALIBRATION)
    assert raised.value.message == ("left image (motorcycle_left.png) is 370x250 px (0.0925 "
                                    "MP); the demo takes images up to 0.05 MP: make it smaller")
