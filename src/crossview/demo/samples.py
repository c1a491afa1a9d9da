"""The example inputs the page offers, from the source tree (``samples/`` and ``docs/images/``;
a package installed from a wheel has none, and the page says so): the Motorcycle stereo pair
with its calibration (``samples/README.md``), used as two frames by the flow tab too, and
TransforMatcher's example source and target images with their 4 x 4 grid of points."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from crossview import api
from crossview.errors import UserError

SOURCE_TREE = Path(__file__).resolve().parents[3]  # src/crossview/demo -> the repository
STEREO = ("samples/motorcycle_left.png", "samples/motorcycle_right.png")
CALIBRATION = "samples/motorcycle_calib.txt"
MATCHING = ("docs/images/transformatcher_src.png", "docs/images/transformatcher_tgt.png")
MATCHING_POINTS = "docs/images/transformatcher_points.txt"


def sample_file(name: str) -> Path:
    """The example file ``name`` (relative to the source tree; also looked for in the current
    directory); a :class:`UserError` when neither has it."""
    for root in (SOURCE_TREE, Path.cwd()):
        if (root / name).is_file():
            return root / name
    raise UserError(f"the example {name} is not here: it ships with crossview's source tree "
                    "(run `crossview demo` from a clone), not with the installed package")


@dataclass(frozen=True)
class StereoSample:
    """The sample pair: its two files and its calibration (focal length and ``doffs`` in px,
    baseline in metres, principal point in px)."""

    left: Path
    right: Path
    calibration: api.StereoCalibration


def stereo_sample() -> StereoSample:
    """The Motorcycle pair (370 x 250 px) and its calibration."""
    left, right = map(sample_file, STEREO)
    return StereoSample(left, right, api.read_stereo_calibration(sample_file(CALIBRATION)))


def matching_sample() -> tuple[Path, Path, list[tuple[float, float]]]:
    """TransforMatcher's example source and target (300 x 300 px) and its points ``(x, y)``."""
    source, target = map(sample_file, MATCHING)
    points = []
    for line in sample_file(MATCHING_POINTS).read_text().splitlines():
        entry = line.split("#", 1)[0].strip()
        if entry:
            x, y = entry.split(",")
            points.append((float(x), float(y)))
    return source, target, points
