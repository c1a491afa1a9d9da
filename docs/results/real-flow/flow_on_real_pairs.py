"""Flow models and OpenCV DIS on every real pair with ground truth at hand: the KITTI flow scene
of a scene-folder root, its stereo scenes used as flow pairs (left to right moves by
``(-d, 0)``; the model is not told the motion is horizontal) and scikit-image's Middlebury 2014
Motorcycle pair. Prints the EPE on known pixels, one row per model.

    OMP_NUM_THREADS=1 python docs/results/real-flow/flow_on_real_pairs.py /work/shared/real-dev \
        matchflow-hybrid [WEIGHTS.safetensors ...] [--lri] [--no-refine] \
        [--scenes a,b,...] [--json OUT.json]

A weights file is loaded into ``matchflow-hybrid``'s architecture; models run with their
default photometric refinement unless ``--no-refine``. ``--scenes`` keeps the named scenes
(and drops Motorcycle); ``--json`` writes ``{model: {pair: EPE}}``. ``--choose`` picks among
the models (not DIS) by leave-one-group-out over the root's scene groups (its README's table,
as :mod:`real_choice` reads it) and prints each group's choice and the left-out mean EPE.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import cv2
import numpy as np
from skimage import data as skdata

import crossview
from crossview.data.datasets.registry import open_dataset
from crossview.report import write_json

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(1, str(Path(__file__).parents[1] / "real-stereo"))  # the stereo studies' helpers
from real_choice import choose, scene_groups  # the groups of real-train's README


def real_pairs(root: str, only: set[str] | None = None
               ) -> list[tuple[str, np.ndarray, np.ndarray, np.ndarray]]:
    """``(name, frame0, frame1, flow [H, W, 2] with NaN unknown)`` for every pair (of the
    scenes named in ``only``, when given)."""
    pairs = []
    if any((folder / "flow.npy").is_file() for folder in Path(root).iterdir()):
        flows, _ = open_dataset(f"scenes:{root}", task="flow")
        for i in range(len(flows)):
            s = flows[i]
            gt = np.asarray(s["flow"], np.float64).copy()
            gt[~np.asarray(s["valid"], bool)] = np.nan
            pairs.append((s["name"], s["image0"], s["image1"], gt))
    stereo, _ = open_dataset(f"scenes:{root}", task="stereo")
    scenes = [stereo[i] for i in range(len(stereo))]
    if only is None:
        left, right, disp = skdata.stereo_motorcycle()
        scenes.append({"name": "motorcycle", "image0": left, "image1": right, "disparity": disp,
                       "valid": np.isfinite(disp) & (disp > 0)})
    else:
        pairs = [p for p in pairs if p[0] in only]
        scenes = [s for s in scenes if s["name"] in only]
    for s in scenes:
        d = np.asarray(s["disparity"], np.float64).copy()
        d[~np.asarray(s["valid"], bool)] = np.nan
        pairs.append((f"{s['name']} as flow", s["image0"], s["image1"],
                      np.stack([-d, np.zeros_like(d)], -1)))
    return pairs


def epe(flow: np.ndarray, gt: np.ndarray) -> float:
    known = np.isfinite(gt[..., 0])
    return float(np.linalg.norm(flow - gt, axis=-1)[known].mean())


def print_group_choice(rows: dict[str, list[float]], pairs: list[str],
                       groups: dict[str, str]) -> None:
    """For each scene group: the model (DIS excluded) with the lowest mean EPE on the other
    groups' pairs, scored on this group's; then the left-out mean."""
    table = {name: dict(zip(pairs, values, strict=True)) for name, values in rows.items()
             if name != "DIS medium"}
    group_of = {p: groups.get(p.removesuffix(" as flow"), p) for p in pairs}
    left_out = {}
    for group in sorted(set(group_of.values())):
        chosen = choose(table, [p for p in pairs if group_of[p] != group])
        print(f"group {group}: chosen {chosen}")
        left_out.update({p: table[chosen][p] for p in pairs if group_of[p] == group})
    print(f"leave-one-group-out: left-out mean EPE {np.mean(list(left_out.values())):.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root")
    parser.add_argument("models", nargs="+", help="registered flow model names or weights files")
    parser.add_argument("--lri", action="store_true", help="low-resolution initialisation")
    parser.add_argument("--no-refine", action="store_true", help="no photometric refinement")
    parser.add_argument("--scenes", help="comma-separated scene names to keep")
    parser.add_argument("--json", help="write {model: {pair: EPE}} here")
    parser.add_argument("--choose", action="store_true",
                        help="leave-one-group-out choice among the models")
    args = parser.parse_args()
    pairs = real_pairs(args.root, set(args.scenes.split(",")) if args.scenes else None)
    print("model | " + " | ".join(p[0] for p in pairs) + " | mean")
    dis = cv2.DISOpticalFlow_create(cv2.DISOPTICAL_FLOW_PRESET_MEDIUM)
    rows = {"DIS medium": [epe(dis.calc(cv2.cvtColor(a, cv2.COLOR_RGB2GRAY),
                                        cv2.cvtColor(b, cv2.COLOR_RGB2GRAY), None), gt)
                           for _, a, b, gt in pairs]}
    for name in args.models:
        weights = name if name.endswith(".safetensors") else None
        model = crossview.load_model("matchflow-hybrid" if weights else name, weights=weights)
        if args.no_refine:
            model.refine_by_default = False
        rows[name] = [epe(crossview.estimate_flow(a, b, model=model, lri=args.lri).flow[0].numpy()
                          .transpose(1, 2, 0), gt) for _, a, b, gt in pairs]
    for name, values in rows.items():
        print(f"{name} | " + " | ".join(f"{v:.3f}" for v in values)
              + f" | {np.mean(values):.2f}")
    if args.choose:
        print_group_choice(rows, [p[0] for p in pairs], scene_groups(Path(args.root)))
    if args.json:
        write_json(args.json, {name: {p[0]: v for p, v in zip(pairs, values, strict=True)}
                               for name, values in rows.items()})


if __name__ == "__main__":
    main()
