"""Large flow pairs through the fused flow default at a working size: which pixel cap, chosen
by leave-one-group-out on the real-train scenes as flow pairs at their own size and enlarged
twice (the flow twin of ``real_working_size.py``).

Each real-train stereo scene read as a flow pair (``flow_dis_fusion.pairs``) is also enlarged
(bicubic) by 2, its flow repeated and scaled; ``matchflow-hybrid`` with its defaults
(DIS fusion and edge medians on) runs with a ``FusedNetwork`` that keeps the model's own lri
and refinement at scale 1 and caps the pixels at each cap
(:func:`crossview.models.dense.inference.working_size`), and without a cap (a cap the pair
does not exceed repeats the uncapped run). Scores: EPE at the full size and at the scene's own
scale (EPE / factor), per scene, factor and cap; the leave-one-group-out choice by the mean
full-size EPE over all factors is printed.

Run: ``OMP_NUM_THREADS=2 python docs/results/real-flow/flow_working_size.py OUT.json
../shared/real-train``
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

import crossview
from crossview.models.registry import FusedNetwork
from crossview.report import write_json

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(1, str(Path(__file__).parents[1] / "real-stereo"))  # the stereo studies' helpers
from flow_dis_fusion import epe, pairs  # the real-train scenes as flow pairs, the score
from real_working_size import enlarged, print_cap_choice  # the stereo study's enlargement, choice

FACTORS = (1, 2)  # x3 runs a minute a pair uncapped on 2 cores: too long for 28 scenes
CAPS: tuple[int | None, ...] = (None, 500_000, 700_000, 1_000_000)


def main(out: Path, root: str) -> None:
    model = crossview.load_model("matchflow-hybrid")
    table: dict[str, dict] = {}
    for _, name, frame0, frame1, truth, known in pairs([root]):
        if name == "motorcycle":
            continue  # scikit-image's pair is not a real-train scene
        for factor in FACTORS:
            first, second = enlarged(frame0, factor), enlarged(frame1, factor)
            big_truth = np.kron(truth, np.ones((factor, factor, 1), np.float32)) * factor
            big_known = np.kron(known, np.ones((factor, factor), bool))
            row = {}
            for cap in CAPS:
                if cap is not None and first.shape[0] * first.shape[1] <= cap:
                    row[str(cap)] = row["None"]  # the cap does not bind: the same run
                    continue
                model.fused_network = FusedNetwork(1.0, lri=model.lri_by_default,
                                                   refine=model.refine_by_default,
                                                   max_pixels=cap)
                start = time.perf_counter()
                result = crossview.estimate_flow(first, second, model=model)
                seconds = time.perf_counter() - start
                error = epe(result.flow[0].permute(1, 2, 0).numpy(), big_truth, big_known)
                row[str(cap)] = {"epe": error, "epe_own": error / factor, "seconds": seconds}
            table[f"{name}@x{factor}"] = {"scene": name, "factor": factor, **row}
            print(name, factor, {c: (round(v["epe"], 3), round(v["seconds"], 1))
                                 for c, v in row.items()}, flush=True)
            write_json(out, table)
    print_cap_choice(table, root, [str(c) for c in CAPS], ("epe", "epe_own", "seconds"))

if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
