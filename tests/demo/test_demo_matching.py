"""The demo's matching tab without a browser: the example's points and a clicked point are
transferred as :func:`crossview.api.match_keypoints` transfers them; a bad upload is a page
error with crossview's message."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

gr = pytest.importorskip("gradio", reason='the demo needs gradio: pip install "crossview[demo]"')

from crossview import api  # noqa: E402
from crossview.demo import matching  # noqa: E402


def test_the_example_and_a_click_are_transferred_as_the_api_transfers_them() -> None:
    source, target, shown_target, marked, moved, lines, points, summary = matching.load_sample()
    assert len(points) == 16 and summary == "16 point(s) transferred."
    assert marked.shape == moved.shape == shown_target.shape == (300, 300, 3)
    assert lines.shape == (300, 600, 3)
    click = gr.SelectData(None, {"index": [150, 90], "value": None, "selected": True})
    marked, moved, _, points, summary = matching.add_point(source, target, points[:1], click)
    assert points == [[60.0, 60.0], [150.0, 90.0]] and summary == "2 point(s) transferred."
    expected = api.match_keypoints(source, target, np.array(points, np.float32))
    np.testing.assert_array_equal(moved, matching.draw_points(target,
                                                              expected.transferred.numpy()))
    np.testing.assert_array_equal(marked, matching.draw_points(source, np.array(points)))


def test_points_wait_for_both_images_and_clear() -> None:
    image = np.zeros((40, 50, 3), np.uint8)
    click = gr.SelectData(None, {"index": [10, 20], "value": None, "selected": True})
    _, moved, lines, points, summary = matching.add_point(image, None, [], click)
    assert (moved, lines, points, summary) == (None, None, [[10.0, 20.0]],
                                               "Upload a target image.")
    assert matching.clear_points(image, None)[3:] == ([], "Upload a target image.")
    assert matching.add_point(None, None, [], click)[3:] == (
        [], "Upload a source image, then click points on it.")


def test_a_bad_upload_is_a_page_error_with_crossviews_message(tmp_path: Path) -> None:
    (tmp_path / "cat.jpg").write_bytes(b"\xff\xd8\xff\xe0 truncated")
    with pytest.raises(gr.Error) as raised:
        matching.new_source(str(tmp_path / "cat.jpg"), None)
    assert raised.value.message.startswith("source image (cat.jpg): cannot read image (")
