"""OpenCV's threads shared out among matchers that run side by side.

The fusions run one classical matcher per view at once (SGBM, DIS: OpenCV releases the GIL),
and OpenCV gives each call its whole thread pool: two calls on two cores then run four threads
on two cores. With the pool divided between them, two SGBM views of a 480x640 pair took 0.072 s
side by side against 0.093-0.100 s (2 cores). SGBM's and DIS's answers do not depend on the
number of threads (tests/models/test_opencv_threads.py checks them bit for bit).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from crossview.models.dense.classical import require_cv2

_lock = threading.Lock()
_users = 0  # the blocks inside shared_opencv_threads now (fusions in several threads)
_before = 0  # OpenCV's thread count before the first of them


@contextlib.contextmanager
def shared_opencv_threads(workers: int) -> Iterator[None]:
    """Inside the block OpenCV runs ``max(1, n // workers)`` threads per call, ``n`` being its
    thread count before (:func:`cv2.getNumThreads`: the machine's cores unless the program set
    it), for ``workers`` calls that run at once; restored when the last such block ends."""
    global _users, _before
    opencv = require_cv2("the classical matchers")
    with _lock:
        if _users == 0:
            _before = opencv.getNumThreads()
            opencv.setNumThreads(max(1, _before // max(1, workers)))
        _users += 1
    try:
        yield
    finally:
        with _lock:
            _users -= 1
            if _users == 0:
                opencv.setNumThreads(_before)
