"""Does the flow default still need the photometric refinement before its DIS fusion (issue 50,
the 2 s target)? The refinement (:mod:`crossview.geometry.photometric_refinement`) was chosen
for the network alone (docs/real-eval.md, 2026-11-26), before the fusion chose among the
network's and DIS's flows by their census cost and polished the choice with the edge medians
and OpenCV's variational refinement. It costs about 0.1-0.2 s of the flow default's 1.8-2.1 s
at 375x1242 (``crossview bench model``).

``score``: on every pair of ``flow_census_choice.every_pair`` (real-train's and real-dev's
scenes as flow pairs at their own size and enlarged 2 and 3 times, real-dev's KITTI flow pair,
Motorcycle, the 32 synthetic street pairs), the bundled ``matchflow-hybrid`` runs as its default
does; what the refinement receives (the network's fields) is kept, and the fusion
(:func:`crossview.models.dense.dis_fusion.fuse_with_dis`) runs a second time on it unrefined.
Each row: ``root``, ``factor``, ``motion_max``, ``dis`` (DIS medium alone on the pair's own
frames), ``network+`` (the network's refined fields alone), ``default`` and ``refined+`` (the
default's forward flow), ``unrefined+`` (the fusion of the unrefined fields), EPE px of the
forward flow on the known pixels at the pair's size. ``choose``: ``flow_census_choice.choose``
on the table (leave-one-group-out over real-train's groups among the ``+`` columns, and the
means per kind).

Run (one thread each; two processes share the pairs)::

    OMP_NUM_THREADS=1 python docs/results/real-flow/flow_refine_fused.py score OUT_I.json \\
        ../shared/real-train ../shared/real-dev --part I/2
    python docs/results/real-flow/flow_refine_fused.py choose OUT_0.json OUT_1.json \\
        ../shared/real-train
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

import crossview
from crossview.models.dense import inference
from crossview.models.dense.classical import dis_flow
from crossview.models.dense.dis_fusion import fuse_with_dis
from crossview.report import write_json

sys.path.insert(0, str(Path(__file__).parent))
from flow_census_choice import at_size, choose, every_pair, part
from flow_dis_fusion import epe


def score(out: Path, roots: list[str], share: tuple[int, int]) -> None:
    """The ``score`` step of the module docstring on every ``share[1]``-th pair from the
    ``share[0]``-th (a rerun skips the pairs ``out`` holds)."""
    model = crossview.load_model("matchflow-hybrid")
    seen: dict = {}
    refine, fuse = inference.refine_fields, inference.fuse_with_dis

    def refining(x0, x1, field, task):
        seen["unrefined"] = field
        seen["refined"] = refine(x0, x1, field, task)
        return seen["refined"]

    def fusing(x0, x1, field, **kwargs):
        seen.update(x0=x0, x1=x1, kwargs=kwargs)
        return fuse(x0, x1, field, **kwargs)

    inference.refine_fields, inference.fuse_with_dis = refining, fusing
    table = json.loads(out.read_text()) if out.is_file() else {}
    for index, (key, root, factor, frame0, frame1, truth, known) in enumerate(every_pair(roots)):
        if index % share[1] != share[0] or key in table:
            continue
        seen.clear()
        result = crossview.estimate_flow(frame0, frame1, model=model)
        unrefined = fuse_with_dis(seen["x0"], seen["x1"], seen["unrefined"], **seen["kwargs"])
        shape = truth.shape[:2]
        table[key] = {
            "root": str(root), "factor": int(factor),
            "motion_max": float(np.linalg.norm(truth, axis=-1)[known].max()),
            "dis": epe(dis_flow(frame0, frame1), truth, known),
            "network+": epe(at_size(seen["refined"][0].numpy(), shape), truth, known),
            "default": epe(result.flow[0].permute(1, 2, 0).numpy(), truth, known),
            "unrefined+": epe(at_size(unrefined[0].numpy(), shape), truth, known)}
        table[key]["refined+"] = table[key]["default"]
        print(key, {k: round(v, 3) for k, v in table[key].items() if isinstance(v, float)},
              flush=True)
        write_json(out, table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    steps = parser.add_subparsers(dest="step", required=True)
    step = steps.add_parser("score")  # no cache: the study runs the default itself
    step.add_argument("out", type=Path)
    step.add_argument("roots", nargs="+")
    step.add_argument("--part", default="0/1", help="I/N: the I-th of N shares of the pairs")
    step = steps.add_parser("choose")
    step.add_argument("tables", type=Path, nargs="+")
    step.add_argument("train_root", type=Path)
    args = parser.parse_args()
    if args.step == "score":
        score(args.out, args.roots, part(args))
    else:
        choose(args.tables, args.train_root)


if __name__ == "__main__":
    main()
