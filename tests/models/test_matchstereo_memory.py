"""``crossview.models.matchstereo.memory``: the calibrated inference-memory estimate."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from crossview.models.matchstereo import MatchStereo
from crossview.models.matchstereo.config import VARIANTS
from crossview.models.matchstereo.memory import FIXED, FLOW_COPIES, STEREO_COPIES, inference_bytes
from crossview.models.registry import get_spec
from hang_guard import HANG_GUARD_SECONDS


def test_the_formula_of_the_docstring() -> None:
    tiny, base = VARIANTS["tiny"], VARIANTS["base"]  # dims[0] 32 and 128
    assert inference_bytes(tiny, "stereo", 2, 512, 1024) == int(
        2 * 512 * 1024 * 520 + STEREO_COPIES * 4 * 2 * 16 * 32 * 32 + FIXED)
    assert inference_bytes(base, "flow", 1, 512, 512) == int(
        512 * 512 * (200 + 10 * 128) + FLOW_COPIES * 4 * 256**2 + FIXED)


def test_flow_grows_with_the_square_of_the_pixels_stereo_does_not() -> None:
    tiny = VARIANTS["tiny"]
    stereo = [inference_bytes(tiny, "stereo", 1, side, side) for side in (4000, 8000)]
    flow = [inference_bytes(tiny, "flow", 1, side, side) for side in (4000, 8000)]
    assert 3.9 < stereo[1] / stereo[0] < 4.3 and flow[1] / flow[0] > 8
    assert flow[1] - stereo[1] > 79 * 2**30  # 8000x8000: the all-pairs volume is ~80 GiB


def test_the_model_answers_for_its_configuration() -> None:
    model = MatchStereo(VARIANTS["small"], task="flow")
    assert model.inference_bytes(1, 256, 320, "flow") == inference_bytes(
        VARIANTS["small"], "flow", 1, 256, 320)


MEASURE = textwrap.dedent("""
    import json, sys, warnings
    import numpy as np
    import crossview
    from crossview import api
    from crossview.models.dense.inference import check_memory

    def kib(field):
        return next(int(line.split()[1]) for line in open("/proc/self/status")
                    if line.startswith(field))

    warnings.simplefilter("ignore")
    model = crossview.load_model(sys.argv[1])
    image = np.random.default_rng(0).integers(0, 256, (256, 512, 3), dtype=np.uint8)
    api.estimate_disparity(image[:192, :192], image[:192, :192], model=model)  # warm-up
    before = kib("VmRSS:")
    open("/proc/self/clear_refs", "w").write("5")  # reset the peak (VmHWM) to the current RSS
    api.estimate_disparity(image, np.roll(image, -3, axis=1), model=model)
    guard = check_memory(model, 256, 512, task="stereo")  # the estimate a run is refused by
    print(json.dumps([(kib("VmHWM:") - before) * 1024, guard]))
""")


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="needs Linux /proc")
@pytest.mark.parametrize("name", ["matchstereo-mini", "matchstereo-hybrid"])
def test_the_estimate_lies_above_a_measured_peak(name: str) -> None:
    """The calibration's method on its smallest case: the peak RSS a 256x512 run with the
    model's defaults adds lies below the estimate that guards the run (the network's, plus the
    half-resolution pass with lri; the hybrid's frozen backbone runs before the decoder's peak,
    and the refinement and the SGBM fusion after the network has freed its buffers)."""
    result = subprocess.run([sys.executable, "-c", MEASURE, name], capture_output=True,
                            text=True, timeout=HANG_GUARD_SECONDS, check=True)
    measured, guard = json.loads(result.stdout.strip().splitlines()[-1])
    config = get_spec(name).build().config
    assert guard >= inference_bytes(config, "stereo", 1, 256, 512)
    assert 0 < measured < guard
