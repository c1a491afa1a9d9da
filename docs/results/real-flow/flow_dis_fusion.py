"""The default flow model against OpenCV DIS on real pairs with large motions, and a
forward-backward fusion of the two, per pair (the study behind the shipped rule).

Pairs: the stereo scenes of ``../shared/real-dev`` and ``../shared/real-train`` used as flow
pairs (left to right moves by ``(-d, 0)``; the model is not told the motion is horizontal), the
KITTI flow scene of real-dev and scikit-image's Middlebury 2014 Motorcycle. For each pair,
``matchflow-hybrid`` with its defaults (both directions) and DIS medium (both directions,
:func:`crossview.baselines.dis_flow`) are scored by EPE on the known pixels, and so are the
fusions ``fb{T}`` (DIS where the network's forward-backward error exceeds T px and DIS's does
not) and ``fbless{T}`` (DIS where the network's error exceeds T px and DIS's is smaller), with
the errors of :func:`crossview.geometry.consistency.consistency_error`. The JSON holds
``{pair: {"root": ..., setting: EPE}}``; the real-train pairs' groups (their README) give the
leave-one-group-out choice this script prints.

Run: ``OMP_NUM_THREADS=1 python docs/results/real-flow/flow_dis_fusion.py OUT.json
../shared/real-dev ../shared/real-train``
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch
from skimage import data as skdata

import crossview
from crossview.baselines import dis_flow
from crossview.data.datasets.scenes import SceneFolders
from crossview.geometry.consistency import consistency_error
from crossview.models.dense.dis_fusion import FUSION_DIS_FB_PX
from crossview.report import write_json

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(1, str(Path(__file__).parents[1] / "real-stereo"))  # the stereo studies' helpers
from real_choice import scene_groups  # the groups of real-train's README

THRESHOLDS_PX = (0.0, 0.5, 1.0, 2.0, 4.0)  # fbless0: DIS wherever its error is smaller
Pair = tuple[str, str, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def forward_backward_choice(field: torch.Tensor, classical: torch.Tensor,
                            threshold: float = FUSION_DIS_FB_PX) -> torch.Tensor:
    """Per pixel ``classical``'s flow where ``field``'s forward-backward error exceeds
    ``threshold`` px and ``classical``'s does not, else ``field``'s: both ``[2B, H, W, 2]``
    (forward rows first) -> ``[2B, H, W, 2]``. The flow fusion's rule until the census choice
    (``flow_census_choice.py``), DIS's runs applied one after the other."""
    error_network = consistency_error(field)[0]
    error_classical = consistency_error(classical)[0]
    use_classical = (error_network > threshold) & (error_classical <= threshold)
    return torch.where(use_classical[..., None], classical, field)


def stereo_as_flow(disparity: np.ndarray) -> np.ndarray:
    """Left-to-right flow ``[H, W, 2]`` of a disparity map ``[H, W]``: ``(-d, 0)``."""
    flow = np.zeros((*disparity.shape, 2), np.float32)
    flow[..., 0] = -np.nan_to_num(disparity)
    return flow


def pairs(roots: list[str]) -> list[Pair]:
    """``(root, name, frame0, frame1, flow [H, W, 2], known [H, W])`` for every pair."""
    out = []
    for root in roots:
        stereo = SceneFolders(root, task="stereo")
        for i, name in enumerate(stereo.names()):
            s = stereo[i]
            out.append((root, name, s["image0"], s["image1"], stereo_as_flow(s["disparity"]),
                        np.asarray(s["valid"], bool)))
        if not any((folder / "flow.npy").is_file() for folder in Path(root).iterdir()):
            continue  # no flow scene (real-train)
        flow = SceneFolders(root, task="flow")
        for i, name in enumerate(flow.names()):
            s = flow[i]
            out.append((root, name, s["image0"], s["image1"], np.asarray(s["flow"], np.float32),
                        np.asarray(s["valid"], bool)))
    left, right, disparity = skdata.stereo_motorcycle()
    known = np.isfinite(disparity) & (disparity > 0)
    out.append(("scikit-image", "motorcycle", left, right, stereo_as_flow(disparity), known))
    return out


def epe(flow: np.ndarray, truth: np.ndarray, known: np.ndarray) -> float:
    return float(np.linalg.norm((flow - truth)[known], axis=-1).mean())  # known first: inf


def settings(network: torch.Tensor, dis: torch.Tensor) -> dict[str, np.ndarray]:
    """``{setting: forward flow [H, W, 2]}`` from both directions' fields ``[2, H, W, 2]``
    of the network and of DIS."""
    error_net, error_dis = (consistency_error(f)[0][0].numpy() for f in (network, dis))
    net, classical = network[0].numpy(), dis[0].numpy()
    out = {"net": net, "dis": classical}
    for t in THRESHOLDS_PX:
        out[f"fb{t:g}"] = forward_backward_choice(network, dis, t)[0].numpy()
        out[f"fbless{t:g}"] = np.where(((error_net > t) & (error_dis < error_net))[..., None],
                                       classical, net)
    return out


def network_and_dis(model: torch.nn.Module, frame0: np.ndarray,
                    frame1: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    """Both directions' flow ``[2, H, W, 2]`` of the model's network (its defaults, no fusion)
    and of DIS medium, for frames ``[H, W, 3]``."""
    result = crossview.estimate_flow(frame0, frame1, model=model, fuse=False)
    network = torch.cat([result.flow, result.flow_backward]).permute(0, 2, 3, 1)
    dis = torch.from_numpy(np.stack([dis_flow(frame0, frame1), dis_flow(frame1, frame0)]))
    return network, dis


def fused_pairs(roots: list[str]) -> Iterator[tuple]:
    """For every pair of :func:`pairs`: ``(root, name, frame0, frame1, flow, known, network,
    dis, choice)``, with both directions' fields ``[2, H, W, 2]`` of ``matchflow-hybrid``'s
    network and of DIS (:func:`network_and_dis`) and the forward flow ``[H, W, 2]`` of the
    shipped forward-backward rule (:func:`forward_backward_choice`) between them."""
    model = crossview.load_model("matchflow-hybrid")
    for pair in pairs(roots):
        network, dis = network_and_dis(model, pair[2], pair[3])
        yield *pair, network, dis, forward_backward_choice(network, dis)[0].numpy()


def print_choice(table: dict[str, dict], roots: list[str], names: list[str],
                 digits: int = 3) -> None:
    """Print the mean EPE of each of ``names`` over the real-train pairs of ``table`` and the
    leave-one-group-out choice among them (the groups of real-train's README)."""
    train = [n for n in table if "real-train" in table[n]["root"]]
    groups = scene_groups(Path(next(r for r in roots if "real-train" in r)))
    left_out = {}
    for group in sorted({groups.get(n, n) for n in train}):
        others = [n for n in train if groups.get(n, n) != group]
        chosen = min(names, key=lambda k: np.mean([table[n][k] for n in others]))
        left_out.update({n: (chosen, table[n][chosen]) for n in train
                         if groups.get(n, n) == group})
    print("mean EPE over the real-train pairs:",
          {k: round(float(np.mean([table[n][k] for n in train])), digits) for k in names})
    print("leave-one-group-out: left-out mean",
          round(float(np.mean([v for _, v in left_out.values()])), digits), "chosen",
          sorted({c for c, _ in left_out.values()}))


def main(out: Path, roots: list[str]) -> None:
    model = crossview.load_model("matchflow-hybrid")
    table: dict[str, dict] = {}
    for root, name, frame0, frame1, truth, known in pairs(roots):
        network, dis = network_and_dis(model, frame0, frame1)
        table[name] = {"root": root, **{setting: epe(flow, truth, known)
                                        for setting, flow in settings(network, dis).items()}}
        print(name, {k: round(v, 3) for k, v in table[name].items() if k != "root"}, flush=True)
        write_json(out, table)
    print_choice(table, roots, [k for k in next(iter(table.values())) if k != "root"])


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2:])
