"""A lead, not a choice: more candidates for the flow fusion's census choice (issue 50, item 5).

The shipped fusion chooses per pixel among the network's flow and DIS's two runs
(:func:`crossview.models.dense.dis_fusion.census_choice`). Two more DIS runs, each both ways:

- ``init``: DIS (medium, grey frames) started from the network's flow
  (:func:`crossview.models.dense.classical.dis_flow` with ``start``: the coarse-to-fine
  search begins from it);
- ``half``: DIS on the frames shrunk to half (area), its flow enlarged back and doubled, for
  motions beyond DIS's own range.

On the pairs ``flow_census_choice.py record`` cached (the 142 pairs of that study), the
forward flow's EPE (at the pair's size, ``flow_census_choice.at_size``) of each new run alone
and of the census choice over ``A`` (the shipped candidates), ``B`` (``A`` and ``init``), ``C``
(``A`` and ``half``), ``D`` (all five): raw, without the edge medians and the variational
refinement, so not the default's EPE; no leave-one-group-out choice is made.
JSON ``{pair: {"root", "init", "half", "A", "B", "C", "D"}}`` (written after every pair; a
rerun skips the pairs it holds); means per kind of pair printed.

Run: ``OMP_NUM_THREADS=1 python docs/results/real-flow/flow_census_candidates.py /tmp/flow-cache
docs/results/real-flow/flow_census_candidates.json ../shared/real-train ../shared/real-dev``
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import cv2
import numpy as np

from crossview.geometry.census_arrays import census_codes
from crossview.models.dense.classical import dis_flow, grey_image
from crossview.models.dense.dis_fusion import census_choice
from crossview.report import write_json

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(1, str(Path(__file__).parents[1] / "real-stereo"))  # the stereo studies' helpers
from flow_census_choice import at_size, dis_runs, every_pair
from flow_dis_fusion import epe


def dis_at_half(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """DIS medium on the grey frames ``[H, W, 3]`` shrunk to half, its flow brought back."""
    h, w = first.shape[:2]
    small = [cv2.resize(grey_image(f), (w // 2, h // 2), interpolation=cv2.INTER_AREA)
             for f in (first, second)]
    flow = cv2.DISOpticalFlow_create(cv2.DISOPTICAL_FLOW_PRESET_MEDIUM).calc(*small, None)
    return cv2.resize(flow, (w, h), interpolation=cv2.INTER_LINEAR) * np.array(
        [w / (w // 2), h / (h // 2)], np.float32)


def main(cache: Path, out: Path, roots: list[str]) -> None:
    table = json.loads(out.read_text()) if out.is_file() else {}
    for key, root, _, _, _, truth, known in every_pair(roots):
        if key in table:
            continue
        with np.load(cache / f"{key}.npz") as data:
            first, second, network = data["frame0"], data["frame1"], data["field"]
        shipped = [network, *dis_runs(first, second)]
        start = np.stack([dis_flow(first, second, network[0]),
                          dis_flow(second, first, network[1])])
        half = np.stack([dis_at_half(first, second), dis_at_half(second, first)])
        codes = [census_codes(first), census_codes(second)]
        sets = {"A": shipped, "B": [*shipped, start], "C": [*shipped, half],
                "D": [*shipped, start, half]}
        flows = {"init": start, "half": half,
                 **{name: census_choice(c, codes) for name, c in sets.items()}}
        table[key] = {"root": root, **{name: epe(at_size(flow[0], truth.shape[:2]), truth, known)
                                       for name, flow in flows.items()}}
        print(key, {k: round(v, 3) for k, v in table[key].items() if k != "root"}, flush=True)
        write_json(out, table)
    rows = {k: v for k, v in table.items() if k != "machine"}
    kinds = {"real-train": lambda k: "real-train" in rows[k]["root"],
             "real-dev": lambda k: "real-dev" in rows[k]["root"],
             "streets": lambda k: rows[k]["root"].startswith("synthetic"),
             "moving 100 px and more (x2, x3, streets)": lambda k: not k.endswith("@x1"),
             "all": lambda k: True}
    for kind, test in kinds.items():
        keys = [k for k in rows if test(k)]
        print(kind, len(keys), {s: round(float(np.mean([rows[k][s] for k in keys])), 3)
                                for s in ("init", "half", "A", "B", "C", "D")})


if __name__ == "__main__":
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    main(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3:])
