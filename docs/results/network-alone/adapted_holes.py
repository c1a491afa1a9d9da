"""An adapted network in the fused default's holes (issue 50 item 3): with ``--adapt``, can the
network answer more of SGBM's holes than the row fill does, so that adapting changes the
default's answer and lowers its bad-2?

The fused default hands the network's pixels only to SGBM's holes longer than
:data:`~crossview.models.dense.sgbm_fusion.FUSION_NETWORK_RUN_PX` (128 px) along the row, where
the network's two views agree within 0.5 px; the row fill answers the rest, and is wrong on a
third of its pixels (docs/results/who-answers). That length was chosen for the network as the
fused run runs it (0.75 of the pair, no low-resolution initialisation, no refinement). Here the
fusion (:func:`~crossview.models.dense.sgbm_fusion.fusion_inputs`,
:func:`~crossview.models.dense.sgbm_fusion.fusion_steps`; the same SGBM runs, medians and strip)
receives instead the fields of

- ``default``: the fused run's own network (the default's answer, a check of the replay);
- ``alone``: the network alone (``--no-fuse``: full size, its own lri and refinement);
- ``adapted``: the network alone after ten steps of ``--adapt`` (the rate of a run whose
  answer is the network's, :data:`~crossview.train.pair_adaptation.NETWORK_ANSWER_LR`);
- ``taught``: the network alone after ten steps with the fused default's consistent answer as
  a target beside the self-supervised loss (``adapt_teacher.py``, weight 1),

and the network's pixels answer holes longer than ``RUN`` px (0, 16, 32, 64, 128) where its
views agree within ``CHECK`` px (0.5, 1). Scores bad-2 and EPE of the left view; the JSON's
``records`` (setting ``SOURCE run RUN check CHECK``) are what
``docs/results/real-stereo/real_choice.py`` reads.

Run: ``OMP_NUM_THREADS=1 python docs/results/network-alone/adapted_holes.py OUT.json ROOT
[--scenes a,b]`` (one process per share of the scenes), then ``python
docs/results/real-stereo/real_choice.py OUT.json ../shared/real-train``
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

import crossview
from crossview.data.datasets.scenes import SceneFolders
from crossview.geometry.consistency import noc_mask
from crossview.geometry.disparity import field_to_disparity
from crossview.models.dense import sgbm_fusion
from crossview.models.dense.inference import predict_fields
from crossview.report import write_json
from crossview.train.pair_adaptation import NETWORK_ANSWER_LR, AdaptationSettings, adapt_to_pair

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "who-answers"))
from adapt_rate import scores
from adapt_teacher import taught_steps
from who_answers import recorded_run

STEPS = 10
RUNS = (0, 16, 32, 64, 128)  # px along the row
CHECKS = (0.5, 1.0)  # px of left-right disagreement


def network_fields(model: torch.nn.Module, sample: dict) -> dict[str, torch.Tensor]:
    """The ``alone``, ``adapted`` and ``taught`` networks' fields ``[2, H, W, 2]`` on the
    pair of ``sample`` (RGB uint8 ``[H, W, 3]`` images)."""
    left, right = sample["image0"], sample["image1"]

    def alone(network: torch.nn.Module) -> torch.Tensor:
        with torch.no_grad():
            return predict_fields(network, left, right, "stereo", fuse=False).field

    adapted = adapt_to_pair(model, left, right, "stereo",
                            settings=AdaptationSettings(steps=STEPS, lr=NETWORK_ANSWER_LR))
    *_, (_, taught) = taught_steps(model, left, right, 1.0, NETWORK_ANSWER_LR, STEPS)
    return {"alone": alone(model), "adapted": alone(adapted), "taught": alone(taught.eval())}


def scene_records(model: torch.nn.Module, root: str, sample: dict,
                  sources: Callable[[torch.nn.Module, dict], dict[str, torch.Tensor]]
                  = network_fields, checks: tuple[float, ...] = CHECKS) -> list[dict]:
    """Every setting's ``(bad-2, EPE)`` of the left view of ``sample``, the fusion given the
    default's own field and each of ``sources(model, sample)``'s, each with its pixels
    agreeing within each of ``checks`` px."""
    default, x0, x1, field, kwargs = recorded_run(model, sample)
    truth = np.where(np.asarray(sample["valid"], bool), np.asarray(sample["disparity"]), np.nan)
    fields = {"default": field, **sources(model, sample)}
    records = []
    for source, source_field in fields.items():
        if source_field.shape != field.shape:
            raise ValueError(f"{sample['name']}: the fused run ran at another size")
        view = sgbm_fusion.fusion_inputs(x0, x1, source_field, runs=kwargs.get("runs"))[0]
        for check in checks:
            consistent = noc_mask(source_field.float(), check)[0].numpy()
            for run in RUNS:
                fused = sgbm_fusion.fusion_steps(
                    *view._replace(consistent=consistent), network_run=run,
                    medians=kwargs.get("medians")).fused
                if (source, run, check) == ("default", 128, 0.5) and not np.array_equal(
                        fused, field_to_disparity(default.field[:1])[0].numpy()):
                    raise RuntimeError(f"{sample['name']}: the replay is not the default's")
                bad, epe = scores(fused, truth)
                records.append({"root": root, "scene": sample["name"], "refine": True,
                                "setting": f"{source} run {run} check {check:g}",
                                "bad2": bad, "epe": epe})
        inside = {r["setting"]: r["bad2"] for r in records if r["setting"].startswith(source)}
        best = min(inside, key=inside.__getitem__)
        print(f"{sample['name']} {source}: as shipped {inside[f'{source} run 128 check 0.5']:.2f}"
              f", best {best} {inside[best]:.2f}", flush=True)
    return records


def main(doc: str = __doc__, sources: Callable[[torch.nn.Module, dict], dict[str, torch.Tensor]]
         = network_fields, checks: tuple[float, ...] = CHECKS) -> None:
    """The command line of the module docstring ``doc``, the fusion given ``sources``'s fields
    at ``checks`` (:func:`scene_records`)."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("root")
    parser.add_argument("--scenes", default="", help="comma-separated scene names (default all)")
    args = parser.parse_args()
    model = crossview.load_model("matchstereo-hybrid")
    scenes = SceneFolders(args.root, task="stereo")
    wanted = set(filter(None, args.scenes.split(",")))
    records: list[dict] = []
    for index, name in enumerate(scenes.names()):
        if wanted and name not in wanted:
            continue
        records += scene_records(model, args.root, scenes[index], sources, checks)
        write_json(args.out, {"records": records})


if __name__ == "__main__":
    main()
