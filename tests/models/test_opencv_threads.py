"""OpenCV's threads shared among the fusions' side-by-side matchers: SGBM, DIS and the
variational refinement give the same answers, bit for bit, whatever OpenCV's thread count (so
sharing the threads out changes nothing but the time), and the count is divided while a block
runs and restored after the last one."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import cv2
import numpy as np
import pytest
from PIL import Image

from crossview.models.dense.classical import (
    dis_flow,
    sgbm_disparity,
    sgbm_right_disparity,
    variational_refinement,
)
from crossview.models.dense.dis_fusion import FLOW_VARIATIONAL
from crossview.models.dense.opencv_threads import shared_opencv_threads

SAMPLES = Path(__file__).parents[2] / "samples"


@pytest.fixture
def opencv_threads() -> Iterator[None]:
    before = cv2.getNumThreads()
    yield
    cv2.setNumThreads(before)


def _pair() -> tuple[np.ndarray, np.ndarray]:
    """A real rectified pair: Middlebury's Motorcycle as the repository ships it (370x250)."""
    return tuple(np.asarray(Image.open(SAMPLES / f"motorcycle_{view}.png").convert("RGB"))
                 for view in ("left", "right"))


@pytest.mark.usefixtures("opencv_threads")
def test_the_matchers_answer_the_same_with_any_thread_count() -> None:
    left, right = _pair()
    answers = []
    for threads in (1, 2, 4, 8):
        cv2.setNumThreads(threads)
        flow = dis_flow(left, right)
        answers.append([sgbm_disparity(left, right, 64, pad=True),
                        sgbm_right_disparity(left, right, 64, pad=True), flow,
                        variational_refinement(flow, left, right, **FLOW_VARIATIONAL)])
    for other in answers[1:]:
        for got, want in zip(other, answers[0], strict=True):
            np.testing.assert_array_equal(got, want)


@pytest.mark.usefixtures("opencv_threads")
def test_the_threads_are_divided_inside_and_restored_after_the_last_block() -> None:
    cv2.setNumThreads(6)
    with shared_opencv_threads(2):
        assert cv2.getNumThreads() == 3
        with shared_opencv_threads(4):  # a second fusion at once keeps the first one's share
            assert cv2.getNumThreads() == 3
        assert cv2.getNumThreads() == 3
    assert cv2.getNumThreads() == 6
    with shared_opencv_threads(8):
        assert cv2.getNumThreads() == 1  # at least one
    assert cv2.getNumThreads() == 6
    inside, go_on = threading.Event(), threading.Event()

    def other_fusion() -> None:
        with shared_opencv_threads(2):
            inside.set()
            go_on.wait(30)

    thread = threading.Thread(target=other_fusion)
    thread.start()
    assert inside.wait(30)
    with shared_opencv_threads(2):
        pass
    assert cv2.getNumThreads() == 3  # the other block still runs
    go_on.set()
    thread.join(30)
    assert cv2.getNumThreads() == 6
    with pytest.raises(RuntimeError), shared_opencv_threads(2):
        raise RuntimeError("a failing matcher")
    assert cv2.getNumThreads() == 6
