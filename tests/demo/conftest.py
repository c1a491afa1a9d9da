"""Shared by the demo's tests: what ``crossview stereo`` writes for the sample pair, the
reference the page's disparity picture is held to."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hang_guard import HANG_GUARD_SECONDS

ROOT = Path(__file__).resolve().parents[2]
SAMPLE_PAIR = (ROOT / "samples" / "motorcycle_left.png", ROOT / "samples" / "motorcycle_right.png")


@pytest.fixture(scope="session")
def stereo_command_outputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, np.ndarray]:
    """``crossview stereo samples/motorcycle_left.png samples/motorcycle_right.png --format
    npy`` run as a separate process: ``{"colour": the _disp_color.png pixels, "disparity":
    the raw .npy}``."""
    out = tmp_path_factory.mktemp("stereo-command")
    done = subprocess.run([sys.executable, "-m", "crossview", "stereo", *map(str, SAMPLE_PAIR),
                           "-o", str(out), "--format", "npy"], capture_output=True, text=True,
                          timeout=HANG_GUARD_SECONDS, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    from crossview import api

    return {"colour": api.read_image(out / "motorcycle_left_disp_color.png"),
            "disparity": np.load(out / "motorcycle_left_disp.npy")}
