"""``crossview stereo LEFT RIGHT --rectify``: two photographs taken by hand, rectified from their
own matches (:func:`crossview.api.rectify_photographs`, what ``crossview rectify`` without
``--calib`` does) and then matched, in one command.

The rectified pair is written into ``-o DIR/NAME_rectified/`` (``left.png``, ``right.png``,
``rectification.json``; NAME = the left file's stem) and the disparity files are those of the
rectified left image, named after the photographs as usual. All or nothing: when matching
fails, the rectified pair is removed again.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

from crossview.errors import UserError
from crossview.lazy import lazy_import
from crossview.output import check_output_files

api = lazy_import("crossview.api")


def stereo_on_rectified(left: str, right: str, out_dir: Path,
                        run: Callable[[str, str], object]) -> Path:
    """Rectify the photographs ``left`` and ``right`` (two image files), write the rectified
    pair into ``out_dir / NAME_rectified``, then ``run(left, right)`` on the rectified images
    (saved under the photographs' file names in a temporary folder, so that the outputs keep
    their names). Returns the rectified pair's folder."""
    first, second = Path(left), Path(right)
    for given in (first, second):
        if not given.is_file():
            raise UserError(f"--rectify takes two image files (one pair of photographs), not "
                            f"{given}")
    folder = out_dir / f"{first.stem}_rectified"
    check_output_files([folder / name for name in api.UNCALIBRATED_FILES])
    pair = api.rectify_photographs(first, second)
    made = [directory for directory in (out_dir, folder) if not directory.exists()]
    written = [Path(path) for path in api.write_uncalibrated(pair, folder)]
    try:
        with tempfile.TemporaryDirectory() as scratch:
            inputs = []
            for side, source, image in (("l", first, pair.left), ("r", second, pair.right)):
                path = Path(scratch) / side / f"{source.stem}.png"
                path.parent.mkdir()
                api.write_image(path, image)
                inputs.append(str(path))
            run(*inputs)
    except BaseException:
        for path in written:
            path.unlink(missing_ok=True)
        for directory in reversed(made):  # the folders this run made, if nothing else is there
            if directory.is_dir() and not any(directory.iterdir()):
                directory.rmdir()
        raise
    return folder
