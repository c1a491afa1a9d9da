"""How well the bundled models' confidence ranks their errors: sparsification AUC per scene.

For the real development scenes of a scene-folder root (stereo scenes and the flow scene),
scikit-image's Middlebury 2014 Motorcycle pair and a few held-out synthetic pairs, the bundled
default models (``matchstereo-hybrid``, ``matchflow-hybrid``) predict the first view, and
:func:`crossview.metrics.sparsification.sparsification` scores, over the pixels with known
ground truth (occluded ones included), the AUC of the confidence the api returns (consistency
times one minus the attention peak, :mod:`crossview.geometry.confidence`), of each cue alone
(the attention peak as a confidence: sharp = confident), of the oracle and of a random
ranking. Errors: stereo bad-2 (%, ``100 * (|d - gt| > 2)``) and EPE (px),
flow EPE (px) and Fl (%, KITTI: error > 3 px and > 5 % of ``|gt|``). A synthetic row is the
mean of the per-pair AUCs.

    OMP_NUM_THREADS=1 python docs/results/confidence/confidence_auc.py /work/shared/real-dev \
        [--synthetic 8] [--json docs/results/confidence/confidence_auc.json]
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator

import numpy as np
import torch
from rich.progress import track
from skimage import data as skdata

import crossview
from crossview.data.datasets.registry import open_dataset
from crossview.data.synthetic.heldout import get_heldout
from crossview.geometry.confidence import consistency_confidence, field_confidence
from crossview.geometry.consistency import consistency_error
from crossview.metrics.sparsification import sparsification
from crossview.models.dense.inference import predict_fields
from crossview.report import print_table, write_json

CUES = ("confidence", "consistency", "attention peak")
COLUMNS = ("scene", "error", *(f"AUC({c})" for c in CUES), "AUC(oracle)", "AUC(random)")

# name, task, first image, second image (as the api takes them), ground truth
Scene = tuple[str, str, object, object, np.ndarray]


def real_scenes(root: str) -> Iterator[Scene]:
    """``(name, task, image0, image1, ground truth with NaN unknown)`` of the real pairs."""
    for task, key in (("stereo", "disparity"), ("flow", "flow")):
        data, _ = open_dataset(f"scenes:{root}", task=task)
        for i in range(len(data)):
            s = data[i]
            gt = np.asarray(s[key], np.float64).copy()
            gt[~np.asarray(s["valid"], bool)] = np.nan
            yield s["name"], task, s["image0"], s["image1"], gt
    left, right, disparity = skdata.stereo_motorcycle()
    yield "motorcycle (Middlebury 2014)", "stereo", left, right, disparity.astype(np.float64)


def synthetic_scenes(task: str, pairs: int) -> Iterator[Scene]:
    data = get_heldout(f"synthetic-{task}", length=pairs)
    for i in range(pairs):
        s = data[i]
        gt = (s["disparity"] if task == "stereo" else s["flow"].permute(1, 2, 0)).double().numpy()
        gt[~s["valid"].numpy()] = np.nan
        # float images [1, 3, H, W], 0..255, as the api takes them
        yield f"synthetic-{task} {i}", task, s["image0"][None], s["image1"][None], gt


def scored(model: torch.nn.Module, scene: Scene) -> dict[str, dict[str, float]]:
    """``{error name: {column: AUC}}`` of one scene's first view."""
    _, task, img0, img1, gt = scene
    field, _, _, peak = predict_fields(model, img0, img1, task)
    consistency = consistency_confidence(consistency_error(field)[0])[0].numpy()
    cues = {"attention peak": peak[0].numpy(), "consistency": consistency}
    cues["confidence"] = field_confidence(field, peak)[0].numpy()
    if task == "stereo":
        known = np.isfinite(gt)
        error = np.abs(-field[0, ..., 0].clamp(max=0).numpy() - gt)[known]
        errors = {"bad-2 %": 100.0 * (error > 2), "EPE px": error}
    else:
        known = np.isfinite(gt).all(-1)
        error = np.linalg.norm(field[0].numpy() - gt, axis=-1)[known]
        magnitude = np.linalg.norm(gt, axis=-1)[known]
        errors = {"EPE px": error, "Fl %": 100.0 * ((error > 3) & (error > 0.05 * magnitude))}
    table = {}
    for name, values in errors.items():
        row = {f"AUC({cue})": sparsification(values, cues[cue][known]).auc for cue in CUES}
        reference = sparsification(values, cues["confidence"][known])
        table[name] = {**row, "AUC(oracle)": reference.auc_oracle,
                       "AUC(random)": reference.auc_random}
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", help="scene-folder root of the real development scenes")
    parser.add_argument("--synthetic", type=int, default=8, help="held-out pairs per task")
    parser.add_argument("--json", default="docs/results/confidence/confidence_auc.json")
    args = parser.parse_args()
    torch.set_num_threads(1)
    models = {"stereo": crossview.load_model("matchstereo-hybrid"),
              "flow": crossview.load_model("matchflow-hybrid")}
    results: dict[str, dict[str, dict[str, float]]] = {}
    for scene in track(list(real_scenes(args.root)), description="real scenes"):
        results[scene[0]] = scored(models[scene[1]], scene)
    for task in ("stereo", "flow"):
        per_pair = [scored(models[task], scene) for scene in track(
            list(synthetic_scenes(task, args.synthetic)), description=f"synthetic {task}")]
        results[f"synthetic-{task} (mean of {args.synthetic})"] = {
            error: {column: float(np.mean([p[error][column] for p in per_pair]))
                    for column in per_pair[0][error]} for error in per_pair[0]}
    rows = [(scene, error, *values.values()) for scene, table in results.items()
            for error, values in table.items()]
    print_table("sparsification AUC (lower is better; oracle: the best possible)", COLUMNS, rows,
                width=150)
    write_json(args.json, {"models": {t: m.model_name for t, m in models.items()},
                           "steps": 20, "results": results})


if __name__ == "__main__":
    main()
