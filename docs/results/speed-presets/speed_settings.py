"""The stereo default's work against its accuracy: the network's scale and the fusion's parts
(SGBM runs, edge-median passes), every combination scored and timed on real scenes.

For every stereo scene under ROOT the bundled ``matchstereo-hybrid`` model runs as its fused
default does (:func:`crossview.models.dense.inference.predict_fields`: the right image lined
up, the network without lri or refinement) with the network at each scale of :data:`SCALES`
of the pair, and what it hands the fusion is recorded; then
:func:`crossview.models.dense.sgbm_fusion.fuse_with_sgbm` fuses it with each combination of
:data:`RUNS` (which SGBM runs of step 1) and :data:`MEDIANS` (which passes of step 4). Each
record holds the left view's bad-1/2/3 and EPE. SGBM's answers are memoised by their inputs
(the settings of one scale share them), so the study's time says nothing of a setting's:
``speed_timing.py`` measures that. The shipped setting (scale 0.75, both runs, both passes) is
checked to give the default run's left view.

Run: ``OMP_NUM_THREADS=2 python docs/results/speed-presets/speed_settings.py OUT.json ROOT``
(``SCENES=a,b`` keeps only those), then ``python docs/results/speed-presets/speed_choice.py``.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import itertools
import os
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

import crossview
from crossview.data.datasets.scenes import SceneFolders
from crossview.geometry.disparity import field_to_disparity
from crossview.models.dense import inference, sgbm_fusion
from crossview.report import write_json

sys.path.insert(0, str(Path(__file__).parents[1] / "real-stereo"))
from real_inference_settings import scores  # the scoring of the fusion studies

SCALES = (0.3, 0.5, 0.75)
RUNS = {"rank+colour": sgbm_fusion.FUSION_SGBM_RUNS, "rank": sgbm_fusion.FUSION_SGBM_RUNS[:1]}
MEDIANS = {"both": (0, 1), "narrow": (1,), "none": ()}
SHIPPED = ("0.75", "rank+colour", "both")
plain_left, plain_right = sgbm_fusion.sgbm_disparity, sgbm_fusion.sgbm_right_disparity


def memoised(matcher: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
    """``matcher`` (an SGBM view) answering again from memory for the same images and
    arguments."""
    answers: dict[str, np.ndarray] = {}

    @functools.wraps(matcher)
    def remembering(left: np.ndarray, right: np.ndarray, *args, **kwargs) -> np.ndarray:
        key = hashlib.blake2b(np.ascontiguousarray(left).tobytes()
                              + np.ascontiguousarray(right).tobytes()
                              + repr((args, sorted(kwargs.items()))).encode()).hexdigest()
        if key not in answers:
            answers[key] = matcher(left, right, *args, **kwargs)
        return answers[key].copy()

    return remembering


def network_part(model: torch.nn.Module, left: np.ndarray, right: np.ndarray, scale: float
                 ) -> tuple[torch.Tensor, ...]:
    """The fused default's inputs to the fusion with the network at ``scale``: ``(x0, x1,
    field)``."""
    recorded = []

    def recording(x0: torch.Tensor, x1: torch.Tensor, field: torch.Tensor,
                  **work: object) -> torch.Tensor:  # work: the runs and passes of a preset
        recorded.append((x0.clone(), x1.clone(), field.clone()))
        return field

    shipped = model.fused_network
    model.fused_network = dataclasses.replace(shipped, scale=scale)
    inference.fuse_with_sgbm = recording
    try:
        inference.predict_fields(model, left, right, "stereo")
    finally:
        inference.fuse_with_sgbm = sgbm_fusion.fuse_with_sgbm
        model.fused_network = shipped
    return recorded[0]


def main(out: Path, root: str) -> None:
    only = set(os.environ.get("SCENES", "").split(",")) - {""}
    model = crossview.load_model("matchstereo-hybrid")
    scenes = SceneFolders(root, task="stereo")
    records = []
    for index, name in enumerate(scenes.names()):
        if only and name not in only:
            continue
        sample = scenes[index]
        truth, valid = sample["disparity"], np.asarray(sample["valid"], bool)
        default = inference.predict_fields(model, sample["image0"], sample["image1"], "stereo")
        sgbm_fusion.sgbm_disparity = memoised(plain_left)
        sgbm_fusion.sgbm_right_disparity = memoised(plain_right)
        for scale in SCALES:
            inputs = network_part(model, sample["image0"], sample["image1"], scale)
            for (runs_name, runs), (medians_name, passes) in itertools.product(
                    RUNS.items(), MEDIANS.items()):
                medians = tuple(sgbm_fusion.EDGE_MEDIANS[i] for i in passes)
                fused = sgbm_fusion.fuse_with_sgbm(*inputs, runs=runs, medians=medians).field
                left = field_to_disparity(fused[:1])[0].numpy()
                setting = (f"{scale}", runs_name, medians_name)
                if setting == SHIPPED and not np.array_equal(
                        left, field_to_disparity(default.field[:1])[0].numpy()):
                    raise RuntimeError("the study's shipped setting is not the default run")
                records.append({
                    "root": root, "scene": name, "refine": True,
                    "setting": f"scale{scale}_{runs_name}_{medians_name}",
                    "scale": scale, "runs": runs_name, "medians": medians_name,
                    "seconds": 0.0, **scores(left, truth, valid)})
        sgbm_fusion.sgbm_disparity, sgbm_fusion.sgbm_right_disparity = plain_left, plain_right
        print(name, {r["setting"]: round(r["bad2"], 2) for r in records
                     if r["scene"] == name and r["medians"] == "both"
                     and r["runs"] == "rank+colour"}, flush=True)
        write_json(out, {"weights": "bundled", "threads": torch.get_num_threads(),
                         "records": records})


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
