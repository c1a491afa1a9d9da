"""Test-time adaptation of the default stereo model scored on real scenes, per scene and budget.

For every stereo scene under ROOT (``SCENES=a,b,...`` keeps only those), the bundled
``matchstereo-hybrid`` (or WEIGHTS, a ``.safetensors`` of its architecture) is adapted to the
pair (:func:`crossview.train.pair_adaptation.adaptation_steps`, learning rate LR, default
``2e-5``) and run with its defaults (lri + refinement) before adaptation and after each budget
in STEPS (default ``3,5,8,10``), scored as ``crossview eval`` scores scenes. The JSON holds one
record per (scene, budget) in the format of ``real_inference_settings.py`` (setting
``adapt{N}``, ``adapt0`` being the model as shipped), so ``real_choice.py`` chooses the
budget by leave-one-group-out; ``seconds`` is the adaptation time to that budget.

Run: ``OMP_NUM_THREADS=2 python docs/results/real-stereo/real_adaptation.py OUT.json WEIGHTS ROOT``
(WEIGHTS ``bundled`` for the shipped file).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import crossview
from crossview.data.datasets.scenes import SceneFolders
from crossview.report import write_json
from crossview.train.pair_adaptation import AdaptationSettings, adaptation_steps

sys.path.insert(0, str(Path(__file__).parent))
from real_inference_settings import scores  # the scoring of the settings script


def main(out: Path, weights: str, root: str, only: set[str], budgets: list[int],
         lr: float) -> None:
    model = crossview.load_model("matchstereo-hybrid", None if weights == "bundled" else weights)
    scenes = SceneFolders(root, task="stereo")
    records = []

    def record(sample: dict, steps: int, adapted: object, seconds: float) -> None:
        disparity = crossview.estimate_disparity(sample["image0"], sample["image1"],
                                                 model=adapted).disparity[0].numpy()
        records.append({"root": root, "scene": sample["name"], "setting": f"adapt{steps}",
                        "refine": True, "lr": lr, "seconds": seconds,
                        **scores(disparity, sample["disparity"], sample["valid"])})
        print(records[-1], flush=True)
        write_json(out, {"weights": weights, "records": records})

    for index, name in enumerate(scenes.names()):
        if only and name not in only:
            continue
        sample = scenes[index]
        record(sample, 0, model, 0.0)
        start = time.perf_counter()
        settings = AdaptationSettings(steps=max(budgets), lr=lr)
        for step, _, adapted in adaptation_steps(model, sample["image0"], sample["image1"],
                                                 "stereo", settings=settings):
            if step in budgets:
                record(sample, step, adapted, time.perf_counter() - start)
                start = time.perf_counter() - records[-1]["seconds"]


if __name__ == "__main__":
    chosen = set(os.environ.get("SCENES", "").split(",")) - {""}
    steps = [int(v) for v in os.environ.get("STEPS", "3,5,8,10").split(",")]
    main(Path(sys.argv[1]), sys.argv[2], sys.argv[3], chosen, steps,
         float(os.environ.get("LR", "2e-5")))
