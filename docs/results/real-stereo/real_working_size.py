"""Large pairs through the fused stereo default at a working size: which pixel cap, chosen by
leave-one-group-out on the real-train scenes at their own size and enlarged two and three
times.

Real scenes larger than the fusion's were chosen on are not at hand, so each scene of ROOT is
also enlarged (bicubic, antialiased) by 2 and 3, its ground truth repeated and scaled; then
``matchstereo-hybrid`` with its defaults runs with ``fused_network.max_pixels`` set to each
cap (:func:`crossview.models.dense.inference.working_size`: a larger pair runs whole at that
many pixels and its fields are enlarged back) and without one. Scores: bad-2 at the full size
(``bad2``) and bad-2 at the scene's own scale (error > 2 x factor px, ``bad2_own``), per
scene, factor and cap. Leave-one-group-out (the groups of ROOT's README, a scene's enlarged
copies in its group) picks the cap by the mean ``bad2`` over all factors and prints the
left-out means. Enlarged images hold no detail the scene did not: real large photographs
would favour the full size more than these do.

Run: ``OMP_NUM_THREADS=2 python docs/results/real-stereo/real_working_size.py OUT.json
../shared/real-train``
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

import crossview
from crossview.data.datasets.scenes import SceneFolders
from crossview.geometry.disparity import field_to_disparity
from crossview.models.dense.inference import predict_fields
from crossview.report import write_json

sys.path.insert(0, str(Path(__file__).parent))
from real_choice import scene_groups  # the groups of real-train's README

FACTORS = (1, 2, 3)
CAPS: tuple[int | None, ...] = (None, 250_000, 350_000, 500_000, 700_000, 1_000_000)


def enlarged(image: np.ndarray, factor: int) -> np.ndarray:
    """``[H, W, 3]`` uint8 -> ``[factor H, factor W, 3]`` uint8, bicubic."""
    if factor == 1:
        return image
    x = torch.from_numpy(np.ascontiguousarray(image)).permute(2, 0, 1)[None].float()
    x = F.interpolate(x, scale_factor=factor, mode="bicubic", align_corners=False)
    return x.clamp(0, 255).round()[0].permute(1, 2, 0).to(torch.uint8).numpy()


def scenes_with_truth(root: str) -> Iterator[tuple[str, dict, np.ndarray, np.ndarray]]:
    """``(name, sample, disparity [H, W] with NaN as 0, known [H, W] bool)`` of every stereo
    scene folder of ``root``."""
    scenes = SceneFolders(root, task="stereo")
    for index, name in enumerate(scenes.names()):
        sample = scenes[index]
        yield name, sample, np.nan_to_num(sample["disparity"]), np.asarray(sample["valid"], bool)


def main(out: Path, root: str) -> None:
    model = crossview.load_model("matchstereo-hybrid")
    preset = model.fused_network
    table: dict[str, dict] = {}
    for name, sample, truth, valid in scenes_with_truth(root):
        for factor in FACTORS:
            left, right = enlarged(sample["image0"], factor), enlarged(sample["image1"], factor)
            big_truth = np.kron(truth, np.ones((factor, factor), np.float32)) * factor
            big_valid = np.kron(valid, np.ones((factor, factor), bool))
            row = {}
            for cap in CAPS:
                model.fused_network = dataclasses.replace(preset, max_pixels=cap)
                start = time.perf_counter()
                field = predict_fields(model, left, right, "stereo").field
                seconds = time.perf_counter() - start
                error = np.abs(field_to_disparity(field[:1])[0].numpy() - big_truth)[big_valid]
                row[str(cap)] = {"bad2": float(100 * (error > 2).mean()),
                                 "bad2_own": float(100 * (error > 2 * factor).mean()),
                                 "seconds": seconds}
            table[f"{name}@x{factor}"] = {"scene": name, "factor": factor,
                                          "pixels": left.shape[0] * left.shape[1], **row}
            print(name, factor, {c: (round(v["bad2"], 2), round(v["bad2_own"], 2),
                                     round(v["seconds"], 1)) for c, v in row.items()}, flush=True)
            write_json(out, table)
    model.fused_network = preset
    print_cap_choice(table, root, [str(c) for c in CAPS], ("bad2", "bad2_own", "seconds"))


def print_cap_choice(table: dict[str, dict], root: str, caps: list[str],
                     metrics: tuple[str, ...], label: str = "x") -> None:
    """Leave-one-group-out over ``caps`` by the mean of ``metrics[0]`` (a scene's enlarged
    copies in its group; the groups of ROOT's README); prints each factor's mean of every
    metric per cap (the factor printed after ``label``), the left-out means and the caps
    chosen. ``table``: ``{scene@xF: {"scene", "factor", cap: {metric: value}}}``."""
    groups = scene_groups(Path(root))
    group_of = {key: groups.get(entry["scene"], entry["scene"]) for key, entry in table.items()}
    left_out = {}
    for group in sorted(set(group_of.values())):
        others = [k for k in table if group_of[k] != group]
        chosen = min(caps, key=lambda c: np.mean([table[k][c][metrics[0]] for k in others]))
        left_out.update({k: (chosen, table[k][chosen]) for k in table if group_of[k] == group})
    for factor in sorted({entry["factor"] for entry in table.values()}):
        keys = [k for k in table if table[k]["factor"] == factor]
        for metric in metrics:
            print(f"{label}{factor} {metric}:", {c: round(float(np.mean([table[k][c][metric]
                                                                   for k in keys])), 3)
                                           for c in caps},
                  "left-out", round(float(np.mean([left_out[k][1][metric] for k in keys])), 3))
    print("chosen", sorted({c for c, _ in left_out.values()}))

if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
