"""``crossview stereo LEFT RIGHT --rectify``: two photographs taken by hand, rectified from their
own matches (:func:`crossview.api.rectify_photographs`, what ``crossview rectify`` without
``--calib`` does) and then matched, in one command.

The rectified pair is written into ``-o DIR/NAME_rectified/`` (``left.png``, ``right.png``,
``rectification.json``; NAME = the left file's stem) and the disparity files are those of the
rectified left image, named after the photographs as usual. All or nothing: the rectified pair
is one more output of the pair (:class:`RectifiedPairOutput`), published with the disparity
files when the whole command succeeds, so a failed or interrupted run (a rerun into the same
folder included) leaves every earlier file as it was.
"""

from __future__ import annotations

import contextlib
import logging
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crossview.errors import UserError
from crossview.lazy import lazy_import
from crossview.output import check_output_files

if TYPE_CHECKING:
    from crossview.api import UncalibratedRectification
    from crossview.cli.dense import ExtraOutput, Pair

api = lazy_import("crossview.api")


class RectifiedPairOutput:
    """The rectified pair as an extra output of ``crossview stereo``
    (:class:`crossview.cli.dense.ExtraOutput`): ``FOLDER/left.png``, ``right.png`` and
    ``rectification.json`` (FOLDER relative to the output directory)."""

    def __init__(self, folder: str, pair: UncalibratedRectification) -> None:
        self.folder = folder
        self.pair = pair

    def check(self, images: list[Pair]) -> None:
        """Nothing to check: the images are the rectified pair itself."""

    def file_names(self, name: str) -> list[str]:
        return [f"{self.folder}/{file}" for file in api.UNCALIBRATED_FILES]

    def writers(self, images: Pair, result: Any) -> list[Callable[[Path], None]]:
        return api.uncalibrated_writers(self.pair)


def stereo_on_rectified(left: str, right: str, out_dir: Path,
                        run: Callable[[str, str, Sequence[ExtraOutput]], object]) -> Path:
    """Rectify the photographs ``left`` and ``right`` (two image files), then
    ``run(left, right, extras)`` on the rectified images (saved under the photographs' file
    names in a temporary folder, so that the outputs keep their names) with the rectified pair
    as the one extra output, written into ``out_dir / NAME_rectified``. Returns that folder."""
    first, second = Path(left), Path(right)
    for given in (first, second):
        if not given.is_file():
            raise UserError(f"--rectify takes two image files (one pair of photographs), not "
                            f"{given}")
    folder = f"{first.stem}_rectified"
    check_output_files([out_dir / folder / name for name in api.UNCALIBRATED_FILES])
    with _order_warned_once(), tempfile.TemporaryDirectory() as scratch:
        pair = api.rectify_photographs(first, second)
        inputs = []
        for side, source, image in (("l", first, pair.left), ("r", second, pair.right)):
            path = Path(scratch) / side / f"{source.stem}.png"
            path.parent.mkdir()
            api.write_image(path, image)
            inputs.append(str(path))
        run(*inputs, [RectifiedPairOutput(folder, pair)])
    return out_dir / folder


@contextlib.contextmanager
def _order_warned_once() -> Iterator[None]:
    """Inside the block, a swapped pair is warned about once: the rectification's matches
    find it, then the stereo run on the rectified pair would again
    (:func:`crossview.geometry.pair_order.warn_if_swapped`)."""
    order = logging.getLogger("crossview.geometry.pair_order")
    said: list[logging.LogRecord] = []

    def first_only(record: logging.LogRecord) -> bool:
        said.append(record)
        return len(said) == 1

    order.addFilter(first_only)
    try:
        yield
    finally:
        order.removeFilter(first_only)
