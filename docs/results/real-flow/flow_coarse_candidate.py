"""Does the network's own half-resolution pass earn a place among the flow fusion's candidates
(issue 50, item 5)?

With ``lri`` (on in the flow default) the network first runs on the pair at half size and
starts its full-size pass from that field; the full-size pass rewrites it. On large motions
the half-size pass sees the motions halved, within what the network was trained on, so its
field (brought to the full size, values doubled) may be right where the full-size pass is
not. The fusion computes it anyway; this study asks whether the census choice should see it.

On the pairs ``flow_census_choice.py record`` cached (142: the real-train and real-dev stereo
scenes as flow at their own size and enlarged 2 and 3 times, KITTI's flow pair, Motorcycle, 32
synthetic street pairs), per pixel of each direction the census choice
(:func:`crossview.models.dense.dis_fusion.census_choice`, the shipped threshold and window)
among:

- ``E``: the shipped candidates (the network's fields, DIS on the grey frames, on their rank
  transforms, and DIS started from the choice among those three);
- ``C``: the network's fields, DIS's first two runs, the half-size pass's fields, then DIS
  started from the choice among those four (the half-size field before the restart);
- ``Ca``: ``E``'s four and the half-size pass's fields last (DIS started as shipped);
- ``CQ``: ``C`` with the fields of one more network run, at a quarter of the size (a
  sixteenth of the pixels; the default makes no such run), before the restart; ``C`` where
  the quarter is below the network's least size (the streets).

The half-size pass is :func:`crossview.models.dense.inference.run_padded` without ``lri`` on
the cached working-size frames resized as ``lri`` resizes them, its field brought back to the
working size bilinearly (values times the size ratio), without the photometric refinement
the full-size field gets. Each raw and ``+`` polished (edge medians, variational refinement:
:func:`crossview.models.dense.dis_fusion.polished`). Score: EPE of the forward flow on the known
pixels at the pair's size (``flow_census_choice.at_size``); ``default`` is the recorded
default, ``dis`` DIS medium alone on the pair's own frames. The JSON (``{pair: {"root",
"factor", "motion_max", "dis", "default", setting: EPE}}``, written after every pair; a rerun
skips the pairs it holds) is read by ``choose`` (``flow_census_choice.choose``: the
leave-one-group-out choice among the polished rules over the real-train pairs, then per kind;
``flow_census_init.large_motions`` style count of the pairs ahead of DIS among the 104 moving
100 px and more).

Run (``--part I/N`` splits the pairs over processes)::

    OMP_NUM_THREADS=1 python docs/results/real-flow/flow_coarse_candidate.py score \\
        /tmp/flow-cache docs/results/real-flow/flow_coarse_candidate.json \\
        ../shared/real-train ../shared/real-dev
    python docs/results/real-flow/flow_coarse_candidate.py choose \\
        docs/results/real-flow/flow_coarse_candidate.json ../shared/real-train
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch

import crossview
from crossview.data.image_batch import as_image_batch
from crossview.geometry.census_arrays import census_codes
from crossview.models.dense.dis_fusion import census_choice, polished
from crossview.models.dense.inference import _fits, _resize, _resize_field, run_padded

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(1, str(Path(__file__).parents[1] / "real-stereo"))  # the stereo studies' helpers
from flow_census_choice import (
    at_size,
    cached_row,
    choose,
    dis_runs,
    part,
    score,
    scoring_steps,
)
from flow_census_init import large_motions, started_from
from flow_dis_fusion import epe

SETTINGS = ("E", "C", "Ca", "CQ")
MODEL = crossview.load_model("matchflow-hybrid")


def smaller_pass(first: np.ndarray, second: np.ndarray, times: int) -> np.ndarray | None:
    """The network (no ``lri``, no refinement) on the frames ``[H, W, 3]`` halved ``times``
    times as ``lri`` halves them, both directions' fields brought back to ``H x W`` ->
    ``[2, H, W, 2]``; ``None`` where that size is below the network's least."""
    h, w = first.shape[:2]
    size = (h >> times, w >> times)
    if not _fits(MODEL, *size, "flow"):
        return None
    x0, x1 = (_resize(as_image_batch(f, "frame"), size) for f in (first, second))
    with torch.inference_mode():
        field = run_padded(MODEL, x0, x1, "flow", lri=False)[0]
    gain = torch.tensor([w / size[1], h / size[0]])
    return (_resize_field(field, (h, w)) * gain).numpy()


def score_pair(data: dict, frame0: np.ndarray, frame1: np.ndarray, truth: np.ndarray,
               known: np.ndarray) -> dict:
    """The JSON row of one cached pair (module docstring)."""
    first, second = data["frame0"], data["frame1"]
    codes = [census_codes(first), census_codes(second)]
    three = [data["field"], *dis_runs(first, second)]
    half, quarter = smaller_pass(first, second, 1), smaller_pass(first, second, 2)

    def restarted(candidates: list[np.ndarray]) -> np.ndarray:
        """The census choice among ``candidates`` and DIS started from their choice."""
        start = census_choice(candidates, codes)
        return census_choice([*candidates, started_from(first, second, start)], codes)

    flows = {"E": restarted(three), "C": restarted([*three, half]),
             "CQ": restarted([*three, half] + ([] if quarter is None else [quarter]))}
    four = [*three, started_from(first, second, census_choice(three, codes))]
    flows["Ca"] = census_choice([*four, half], codes)
    shape = truth.shape[:2]

    def error(flow: np.ndarray) -> float:
        """EPE of the forward flow of ``flow [2, h, w, 2]`` at the pair's size."""
        return epe(at_size(flow[0], shape), truth, known)

    row = {**cached_row(data, frame0, frame1, truth, known), "half": error(half),
           "quarter": float("nan") if quarter is None else error(quarter)}
    for name, flow in flows.items():
        row[name] = error(flow)
        row[f"{name}+"] = error(np.stack([polished(flow[0], first, second),
                                          polished(flow[1], second, first)]))
    return row


def main() -> None:
    args = scoring_steps(__doc__.splitlines()[0])[0].parse_args()
    if args.step == "score":
        score(args.cache, args.out, args.roots, part(args), score_pair)
    else:
        choose(args.tables, args.train_root)
        large_motions(args.tables, SETTINGS)


if __name__ == "__main__":
    main()
