"""The flow default's work against its accuracy: the network's scale, low-resolution
initialisation and photometric refinement, and the DIS fusion's runs and median passes, every
combination scored by EPE on every real pair at hand as flow.

For every pair of the roots (``flow_on_real_pairs.real_pairs``: a root's KITTI flow scene, its
stereo scenes as flow pairs; Motorcycle with the development root only) the bundled
``matchflow-hybrid`` runs as its fused default does
(:func:`crossview.models.dense.inference.predict_fields`) with each network setting of
:data:`NETWORKS` (``scale``, ``lri``, ``refine`` of its ``fused_network``), and what it hands the
fusion is recorded; then :func:`crossview.models.dense.dis_fusion.fuse_with_dis` fuses it with
each combination of :data:`RUNS` (how many of ``FLOW_DIS_RUNS``) and :data:`MEDIANS` (which
passes of ``EDGE_MEDIANS``), as a preset's ``classical_runs`` and ``median_passes`` ask. DIS's
flows are memoised by their inputs (every setting of a pair shares them), so the study's time
says nothing of a setting's: ``flow_timing.py`` measures that. The study's shipped setting
(:data:`SHIPPED`) is checked to give the default run's forward flow while it is the model's own
(it was when this study ran; since 2026-12-07 the default makes a third DIS run, which this
grid does not hold).

Each record: root, pair, group (real-train's README group column; the pair itself elsewhere),
setting and its fields, EPE of the forward flow on known pixels.

Run: ``OMP_NUM_THREADS=2 python docs/results/speed-presets/flow_presets.py OUT.json
../shared/real-train ../shared/real-dev`` (``PAIRS=a,b`` keeps those pairs, named as in the
records), then ``python docs/results/speed-presets/flow_choice.py OUT.json TIMING.json``.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import itertools
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch

import crossview
from crossview.models.dense import dis_fusion, inference
from crossview.models.registry import FusedNetwork
from crossview.report import write_json

sys.path.insert(0, str(Path(__file__).parents[1] / "real-flow"))
from flow_on_real_pairs import epe, real_pairs, scene_groups  # the real pairs as flow

# pruned to what fits 45 minutes of a 2-core machine shared by five: the shipped network, then
# without lri and refinement at three scales; the shipped fusion, and one DIS run without the
# median passes
NETWORKS = [{"scale": scale, "lri": lri, "refine": refine} for scale, lri, refine in (
    (1.0, True, True), (1.0, False, False), (0.75, False, False), (0.5, False, False))]
FUSIONS = ((2, (0, 1)), (1, ()))  # (classical_runs, median_passes)
RUNS = {"r2": 2, "r1": 1}  # grey then rank 2 (FLOW_DIS_RUNS), grey only
MEDIANS = {"m01": (0, 1), "m1": (1,), "m-": ()}
SHIPPED = "s1.0_lri_ref_r2_m01"


def setting_name(fields: dict[str, Any]) -> str:
    """``s{scale}_{lri|nolri}_{ref|noref}_r{runs}_{medians}`` of a setting's fields."""
    medians = next(k for k, v in MEDIANS.items() if v == tuple(fields["median_passes"]))
    return (f"s{fields['scale']}_{'lri' if fields['lri'] else 'nolri'}_"
            f"{'ref' if fields['refine'] else 'noref'}_r{fields['classical_runs']}_{medians}")


def settings() -> dict[str, dict[str, Any]]:
    """``{name: FusedNetwork fields}`` of the whole grid."""
    grid = {}
    for network, (runs, medians) in itertools.product(NETWORKS, FUSIONS):
        fields = {**network, "classical_runs": runs, "median_passes": medians}
        grid[setting_name(fields)] = fields
    return grid


def with_fields(own: FusedNetwork, fields: dict[str, Any]) -> FusedNetwork:
    """``own`` with a setting's fields laid over it (what a preset does)."""
    return dataclasses.replace(own, **fields)


def memoised_dis(matcher):
    """``dis_flow`` answering again from memory for the same frames."""
    answers: dict[str, np.ndarray] = {}

    @functools.wraps(matcher)
    def remembering(frame0: np.ndarray, frame1: np.ndarray) -> np.ndarray:
        key = hashlib.blake2b(np.ascontiguousarray(frame0).tobytes()
                              + np.ascontiguousarray(frame1).tobytes()).hexdigest()
        if key not in answers:
            answers[key] = matcher(frame0, frame1)
        return answers[key].copy()

    return remembering


def fusion_inputs(model: torch.nn.Module, frame0: np.ndarray, frame1: np.ndarray,
                  network: dict[str, Any]) -> tuple[torch.Tensor, ...]:
    """What the fused default hands the fusion with the network setting ``network``:
    ``(x0, x1, field)``."""
    recorded = []

    def recording(x0: torch.Tensor, x1: torch.Tensor, field: torch.Tensor, **_) -> torch.Tensor:
        recorded.append((x0.clone(), x1.clone(), field.clone()))
        return field

    own = model.fused_network
    model.fused_network = dataclasses.replace(own, **network)
    inference.fuse_with_dis = recording
    try:
        inference.predict_fields(model, frame0, frame1, "flow")
    finally:
        inference.fuse_with_dis = dis_fusion.fuse_with_dis
        model.fused_network = own
    return recorded[0]


def ordered_pairs(roots: list[str]) -> list[tuple]:
    """``(root, group, name, frame0, frame1, truth)`` of every pair: one pair of each group
    in turn with a pair without a group (the development pairs), then the rest (so that a run
    cut short has as many groups and development pairs as it could)."""
    first, ungrouped, rest = [], [], []
    for root in roots:
        groups = scene_groups(Path(root))
        for name, *arrays in real_pairs(root):
            if name == "motorcycle as flow" and groups:
                continue  # Motorcycle once, with the development pairs (no group table)
            group = groups.get(name.removesuffix(" as flow"))
            seen = {p[1] for p in first}
            where = ungrouped if group is None else rest if group in seen else first
            where.append((root, group or name, name, *arrays))
    mixed = [p for pair in itertools.zip_longest(first, ungrouped) for p in pair if p]
    return mixed + rest


def main(out: Path, roots: list[str]) -> None:
    only = set(os.environ.get("PAIRS", "").split(",")) - {""}
    model = crossview.load_model("matchflow-hybrid")
    plain_dis = dis_fusion.dis_flow
    records = []
    for root, group, name, frame0, frame1, truth in ordered_pairs(roots):
        if only and name not in only:
            continue
        own = setting_name(dataclasses.asdict(model.fused_network)) == SHIPPED
        default = None if records or not own else inference.predict_fields(  # checked once
            model, frame0, frame1, "flow").field[0]
        dis_fusion.dis_flow = memoised_dis(plain_dis)
        scores = {}
        for network in NETWORKS:
            inputs = fusion_inputs(model, frame0, frame1, network)
            for runs, medians in FUSIONS:
                fields = {**network, "classical_runs": runs, "median_passes": medians}
                fused = dis_fusion.fuse_with_dis(
                    *inputs, runs=dis_fusion.FLOW_DIS_RUNS[:runs],
                    medians=tuple(dis_fusion.EDGE_MEDIANS[i] for i in medians))
                setting = setting_name(fields)
                if setting == SHIPPED and default is not None:
                    gap = float((fused[0] - default).abs().max())
                    print(f"shipped setting vs the default run: max gap {gap:.2g} px")
                    if gap > 1e-3:
                        raise RuntimeError("the study's shipped setting is not the default")
                scores[setting] = epe(fused[0].numpy(), truth)
                records.append({"root": root, "pair": name, "group": group,
                                "setting": setting, **fields, "epe": scores[setting]})
        dis_fusion.dis_flow = plain_dis
        print(name, {s: round(v, 3) for s, v in scores.items() if s.endswith("r2_m01")},
              flush=True)
        write_json(out, {"weights": "bundled", "threads": torch.get_num_threads(),
                         "records": records})


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2:])
