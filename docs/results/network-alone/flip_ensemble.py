"""The network alone run on mirrored copies of the pair and the answers combined (issue 50
item 2, item 15): test-time augmentation with no training and no classical matcher.

A rectified pair stays a rectified pair when both images are mirrored top to bottom, and
when both are mirrored left to right and swapped (the mirrored right image is then the left
one: a point at ``x`` in it lies at ``x - d`` in the mirrored left image). The network is not
equivariant to either (its convolutions and its learned attention are not mirror symmetric),
so each copy is a second opinion of both views' disparities at one more network run each.
Four runs per pair: ``id`` (the pair as it is), ``h`` (left-right mirrored and swapped),
``v`` (top-bottom mirrored), ``hv`` (both); each is
``crossview.estimate_disparity(..., fuse=False)``'s network alone (lri, refinement), mapped
back to the pair's views. The combinations scored, each also self-fused
(:func:`crossview.models.dense.self_fusion.self_fused_disparities`: its left-right check on
the combined views, the row fill, the medians, the strip, as ``--self-fuse``):

- ``id``, ``h``, ``v``: one run;
- ``mean id+h``, ``mean id+v``, ``mean 4``, ``median 4``: per pixel, per view;
- ``consistent id+h``, ``consistent id+v``, ``consistent 4``: per pixel and view the value of
  the run (of those named) whose own two views agree best there (the least left-right error,
  :func:`crossview.geometry.consistency_arrays.consistency_error`).

Writes the records (``setting``, ``bad2``, ``epe`` per scene and root, left view, known pixels)
that ``docs/results/real-stereo/real_choice.py`` chooses among by leave-one-group-out.

Run: ``OMP_NUM_THREADS=2 python docs/results/network-alone/flip_ensemble.py OUT.json
../shared/real-train ../shared/real-dev`` then ``python docs/results/real-stereo/real_choice.py
OUT.json ../shared/real-train``; ``--adapt N`` adapts the network to each pair first (N steps
of ``--self-fuse --adapt N``, at :data:`crossview.train.pair_adaptation.NETWORK_ANSWER_LR`),
with ``--adapt-mirrored-too`` to the pair and its mirrored, swapped copy together.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

import crossview
from crossview.data.io import read_image
from crossview.geometry.consistency_arrays import consistency_error
from crossview.models.dense.self_fusion import self_fused_disparities
from crossview.report import print_table, write_json
from crossview.train.pair_adaptation import AdaptationSettings, adapt_to_pair

sys.path.insert(0, str(Path(__file__).parent))
from adapt_rate import scores

Views = tuple[np.ndarray, np.ndarray]  # left and right disparities [H, W] float32 px


def mirrored(image: np.ndarray, h: bool, v: bool) -> np.ndarray:
    """``image [H, W, 3]`` mirrored left-right (``h``) and top-bottom (``v``)."""
    return np.ascontiguousarray(image[::-1 if v else 1, ::-1 if h else 1])


def network_views(model: object, left: np.ndarray, right: np.ndarray, h: bool, v: bool,
                  **options: object) -> Views:
    """Both views' disparities of the network alone run on the pair mirrored (``h``: left to
    right, the images swapped; ``v``: top to bottom), mapped back to the pair's views
    (``options``: more arguments of ``crossview.estimate_disparity``)."""
    first, second = (right, left) if h else (left, right)
    result = crossview.estimate_disparity(mirrored(first, h, v), mirrored(second, h, v),
                                          model=model, fuse=False, **options)
    views = [mirrored(d[..., None], h, v)[..., 0] for d in
             (result.disparity[0].numpy(), result.disparity_right[0].numpy())]
    return (views[1], views[0]) if h else (views[0], views[1])


def as_field(views: Views) -> np.ndarray:
    """Both views' stereo fields ``[2, H, W, 2]`` (left x = -disparity, right x = +disparity,
    y = 0) of ``views``."""
    left, right = views
    field = np.zeros((2, *left.shape, 2), np.float32)
    field[0, ..., 0], field[1, ..., 0] = -left, right
    return field


def left_right_error(views: Views) -> np.ndarray:
    """Each view's left-right consistency error ``[2, H, W]`` px."""
    return consistency_error(as_field(views))[0]


def self_fused(views: Views, left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """The left view of ``views`` fused with each other as ``--self-fuse`` fuses them."""
    disparity = np.stack(views).astype(np.float32)
    return self_fused_disparities([left, right], disparity, left_right_error(views))[0]


def most_consistent(runs: dict[str, Views], names: list[str]) -> Views:
    """Per pixel and view, the value of the run of ``names`` whose own two views agree best
    there (the least left-right error; the first named on a tie)."""
    errors = np.stack([left_right_error(runs[n]) for n in names])  # [N, 2, H, W]
    stacked = np.stack([np.stack(runs[n]) for n in names])  # [N, 2, H, W]
    chosen = np.take_along_axis(stacked, errors.argmin(0)[None], 0)[0]
    return chosen[0], chosen[1]


def combinations(runs: dict[str, Views]) -> dict[str, Views]:
    """Every combination of the module docstring from the four runs."""
    def per_view(reduce: Callable[[np.ndarray], np.ndarray], names: list[str]) -> Views:
        return tuple(reduce(np.stack([runs[n][k] for n in names])).astype(np.float32)
                     for k in (0, 1))

    return {"id": runs["id"], "h": runs["h"], "v": runs["v"],
            "mean id+h": per_view(lambda s: s.mean(0), ["id", "h"]),
            "mean id+v": per_view(lambda s: s.mean(0), ["id", "v"]),
            "mean 4": per_view(lambda s: s.mean(0), list(runs)),
            "median 4": per_view(lambda s: np.median(s, 0), list(runs)),
            "consistent id+h": most_consistent(runs, ["id", "h"]),
            "consistent id+v": most_consistent(runs, ["id", "v"]),
            "consistent 4": most_consistent(runs, list(runs))}


def adapted(model: object, left: np.ndarray, right: np.ndarray, adapt: int,
            both: bool = False) -> object:
    """``model`` adapted to the pair for ``adapt`` steps (0: ``model`` itself) as ``--self-fuse
    --adapt`` adapts it (``both``: to the pair and its mirrored, swapped copy together, a batch
    of two)."""
    if not adapt:
        return model
    first, second = ([left, mirrored(right, True, False)], [right, mirrored(left, True, False)]
                     ) if both else ([left], [right])
    return adapt_to_pair(model, *(torch.from_numpy(np.stack(images)).permute(0, 3, 1, 2)
                                  .float() for images in (first, second)), "stereo",
                         settings=AdaptationSettings.for_run(adapt, "stereo", fused=False))


def scene_records(model: object, root: Path, scene: Path, adapt: int,
                  both: bool = False) -> list[dict]:
    """Every combination's scores on ``scene``, alone and self-fused, by ``model`` adapted
    first to the pair for ``adapt`` steps (0: none) as ``--self-fuse --adapt`` adapts it
    (``both``: to the pair and its mirrored, swapped copy together, a batch of two)."""
    left, right = read_image(scene / "left.png"), read_image(scene / "right.png")
    truth = np.load(scene / "gt.npy").astype(np.float32)
    model = adapted(model, left, right, adapt, both)
    runs = {name: network_views(model, left, right, h, v)
            for name, h, v in (("id", False, False), ("h", True, False), ("v", False, True),
                               ("hv", True, True))}
    return setting_records(combinations(runs), root, scene, left, right, truth)


def setting_records(settings: dict[str, Views], root: Path, scene: Path, left: np.ndarray,
                    right: np.ndarray, truth: np.ndarray) -> list[dict]:
    """The records of each of ``settings``' views on ``scene`` of ``root`` (the pair ``left``,
    ``right``; ground truth ``truth``), its left view as it is and self-fused."""
    records = []
    for name, views in settings.items():
        for setting, disparity in ((name, views[0]),
                                   (f"{name} self-fused", self_fused(views, left, right))):
            bad, epe = scores(disparity, truth)
            records.append({"root": str(root), "scene": scene.name, "setting": setting,
                            "refine": True, "bad2": bad, "epe": epe})
    return records


def every_scene(roots: list[Path], records_of: Callable[[Path, Path], list[dict]], out: Path,
                header: dict) -> list[dict]:
    """``records_of(root, scene)`` for every scene with ground truth under ``roots``: each
    scene's bad-2 printed, and ``header`` with all the records so far written to ``out`` after
    every scene."""
    records: list[dict] = []
    for root in roots:
        for scene in sorted(p.parent for p in root.glob("*/gt.npy")):
            records += records_of(root, scene)
            print(scene.name, " ".join(f"{r['setting']}={r['bad2']:.2f}"
                                       for r in records if r["scene"] == scene.name), flush=True)
            write_json(out, {**header, "records": records})
    return records


def print_means(records: list[dict], roots: list[Path]) -> None:
    """Mean bad-2 % (EPE px) of the left view per setting and root."""
    rows = []
    for setting in dict.fromkeys(r["setting"] for r in records):
        row = [setting]
        for root in roots:
            inside = [r for r in records if r["setting"] == setting and r["root"] == str(root)]
            row.append(f"{np.mean([r['bad2'] for r in inside]):.2f} "
                       f"({np.mean([r['epe'] for r in inside]):.3f})")
        rows.append(row)
    print_table("mean bad-2 % (EPE px) of the left view", ["setting", *map(str, roots)], rows)


def study_parser(doc: str) -> argparse.ArgumentParser:
    """A study's command line (``doc``: its module docstring): ``OUT.json`` and the folders of
    scenes; the study adds its own options."""
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("roots", type=Path, nargs="+", help="folders of scenes with gt.npy")
    return parser


def run_study(out: Path, roots: list[Path], records_of: Callable[[object, Path, Path], list[dict]],
              header: dict) -> None:
    """``records_of(model, root, scene)`` of the bundled stereo model on every scene of
    ``roots`` (:func:`every_scene`), then the means (:func:`print_means`)."""
    model = crossview.load_model("matchstereo-hybrid")
    records = every_scene(roots, lambda root, scene: records_of(model, root, scene), out, header)
    print_means(records, roots)


if __name__ == "__main__":
    parser = study_parser(__doc__)
    parser.add_argument("--adapt", type=int, default=0, help="test-time adaptation steps")
    parser.add_argument("--adapt-mirrored-too", action="store_true",
                        help="adapt to the pair and its mirrored, swapped copy together")
    args = parser.parse_args()
    run_study(args.out, args.roots,
              lambda model, root, scene: scene_records(model, root, scene, args.adapt,
                                                       args.adapt_mirrored_too),
              {"adapt": args.adapt, "adapt_mirrored_too": args.adapt_mirrored_too})
