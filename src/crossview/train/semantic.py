"""Training and held-out evaluation of TransforMatcher on synthetic warps of photographs.

Semantic-correspondence datasets cannot be downloaded here, so the refinement is trained on
random warps (homography + thin-plate spline + colour jitter, :mod:`crossview.data.synthetic.warps`)
of the training photographs, with keypoints drawn from the exact dense correspondence, and the
loss of Eq. 12 (mean distance of soft-sampled keypoints, ``tau = 0.1``, normalised coordinates).
The backbone keeps its ImageNet weights unless ``--backbone-lr`` > 0 fine-tunes the layers that
feed the correlation (as the paper does, at 1e-5); its BatchNorm statistics stay frozen either
way. Held-out evaluation uses warps of the held-out photographs only and reports PCK@0.05 / @0.1
(``img`` threshold) for the raw correlation arg-max and the refined model (and, for weights with
a tuned backbone, the raw arg-max of both the tuned and the original ImageNet backbone).

Run (resumes from the newest checkpoint of ``--run-dir``; stops at ``--minutes``)::

    nice -n 10 python -m crossview.train.semantic train --run-dir runs/transformatcher
    python -m crossview.train.semantic evaluate --weights .../transformatcher_lite0.safetensors
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated

import torch
import torch.nn.functional as F
import typer
from rich.console import Console
from rich.progress import Progress

from crossview.bench.report import write_json
from crossview.cli.runner import run_app
from crossview.data.synthetic.textures import image_names
from crossview.data.synthetic.warps import SyntheticWarps, WarpConfig
from crossview.errors import UserError
from crossview.metrics.keypoints import pck
from crossview.models.transformatcher.correlation import upsample_correlation
from crossview.models.transformatcher.inference import EVAL_TAU, transformatcher_from_state
from crossview.models.transformatcher.loss import keypoint_loss
from crossview.models.transformatcher.model import (
    TASK,
    TransforMatcher,
    has_tuned_backbone,
    raw_argmax_coords,
)
from crossview.models.transformatcher.softargmax import (
    grid_centres,
    kernel_soft_argmax,
    normalised_to_pixels,
    pixels_to_normalised,
)
from crossview.models.weights import read_state_dict, write_safetensors
from crossview.train.checkpoint import (
    latest_checkpoint,
    load_checkpoint,
    prune_checkpoints,
    save_checkpoint,
)

# Inverse temperature of the no-attention soft-argmax baseline, chosen on *training* warps
# (16 pairs, 128 px: 20 -> 30.9, 50 -> 44.5, 100 -> 44.7 PCK@0.05; the hard arg-max gave 43.9).
RAW_SOFTARGMAX_BETA = 50.0
TRAIN_TAU = 0.1  # soft-sampler temperature in training (the paper's; 0.05 at evaluation)
_console = Console()


def warp_batch(dataset: SyntheticWarps, indices: list[int]) -> dict[str, torch.Tensor]:
    """Stack warp samples: ``src``, ``tgt`` ``[B, 3, S, S]`` (0..255), pixel keypoints
    ``kp_src``, ``kp_tgt`` ``[B, N, 2]``, the exact pixel ``flow [B, 2, S, S]`` and its
    ``valid [B, S, S]`` mask."""
    samples = [dataset[i] for i in indices]
    return {"src": torch.stack([s["image0"] for s in samples]),
            "tgt": torch.stack([s["image1"] for s in samples]),
            "kp_src": torch.stack([s["keypoints0"] for s in samples]),
            "kp_tgt": torch.stack([s["keypoints1"] for s in samples]),
            "flow": torch.stack([s["flow"] for s in samples]),
            "valid": torch.stack([torch.as_tensor(s["valid"]) for s in samples])}


def warp_dataset(split: str, size: int, length: int, seed: int, keypoints: int,
                 shift: float = 0.0) -> SyntheticWarps:
    """Square warps of ``size`` pixels with ``keypoints`` pairs per sample (``shift``: see
    :class:`WarpConfig`; the held-out evaluation always uses 0)."""
    return SyntheticWarps(length, seed=seed, split=split,
                          config=WarpConfig(size=(size, size), num_keypoints=keypoints,
                                            shift=shift))


def _cell_centres(flow: torch.Tensor, cells: int, frame_shift: float) -> torch.Tensor:
    """Image-frame normalised centres ``[B, cells, cells, 2]`` of the output grid's cells, for
    sampling ``flow [B, 2, S, S]`` (the grid frame is offset by ``frame_shift``)."""
    centres = grid_centres(cells, cells, flow.device, flow.dtype) - frame_shift
    return centres.expand(len(flow), -1, -1, -1)


def oracle_coords(flow: torch.Tensor, cells: int, frame_shift: float = 0.0) -> torch.Tensor:
    """The exact correspondence as a dense map on the model's output grid: normalised target
    ``(x, y)`` ``[B, cells, cells, 2]`` of each cell centre, from the pixel ``flow [B, 2, S, S]``
    (bilinearly sampled at the centres), in the grid frame offset by ``frame_shift`` from the
    image frame (:attr:`TransforMatcher.frame_shift`, 0: the image frame). Through the soft
    sampler it bounds what any correlation on that grid can reach."""
    size = flow.shape[-1]
    centres = _cell_centres(flow, cells, frame_shift)
    shift = F.grid_sample(flow, centres, mode="bilinear", padding_mode="border",
                          align_corners=False)  # [B, 2, G, G]
    target = normalised_to_pixels(centres, size, size) + shift.permute(0, 2, 3, 1)
    return pixels_to_normalised(target, size, size) + frame_shift


def dense_loss(coords: torch.Tensor, flow: torch.Tensor, valid: torch.Tensor,
               frame_shift: float) -> torch.Tensor:
    """Mean distance (normalised units) between the model's ``coords [B, G, G, 2]`` and the
    exact correspondence of every output cell whose centre has a valid match (``valid [B, S,
    S]``, nearest pixel): Eq. 12 with every output cell as a keypoint, no soft sampler."""
    cells = coords.shape[1]
    exact = oracle_coords(flow, cells, frame_shift)
    inside = F.grid_sample(valid[:, None].to(flow.dtype), _cell_centres(flow, cells, frame_shift),
                           mode="nearest", align_corners=False)[:, 0] > 0.5
    return keypoint_loss(coords.flatten(1, 2), exact.flatten(1, 2), inside.flatten(1))


@torch.no_grad()
def evaluate_warps(model: TransforMatcher, pairs: int = 48, seed: int = 0, keypoints: int = 32,
                   batch: int = 4, imagenet: TransforMatcher | None = None,
                   ) -> dict[str, dict[str, float]]:
    """PCK@0.05 / @0.1 (``img`` threshold, pooled over keypoints) and the median keypoint error
    in pixels on held-out warps at the model's input size, for ``raw`` (hard arg-max of the
    channel-mean correlation of the model's backbone), ``raw_softargmax`` (the kernel
    soft-argmax on it: the pipeline without attention), ``refined`` (the model) and ``oracle``
    (the exact correspondence at the output grid's cell centres, :func:`oracle_coords`). With
    ``imagenet`` (a model of the same grid whose backbone has its original ImageNet weights,
    for a ``model`` with a tuned backbone), also ``raw_imagenet``: the hard arg-max of that
    backbone's correlation."""
    model.eval()
    size = model.image_size
    data = warp_dataset("heldout", size, pairs, seed, keypoints)
    names = ("raw", *(("raw_imagenet",) if imagenet is not None else ()), "raw_softargmax",
             "refined", "oracle")
    scores: dict[str, dict[float, list]] = {name: {0.05: [], 0.1: []} for name in names}
    errors: dict[str, list[torch.Tensor]] = {name: [] for name in names}
    for start in range(0, pairs, batch):
        b = warp_batch(data, list(range(start, min(pairs, start + batch))))
        out = model(b["src"], b["tgt"])
        kp = pixels_to_normalised(b["kp_src"], size, size)
        soft = kernel_soft_argmax(upsample_correlation(out["corr"].mean(1), model.upsample),
                                  model.sigma, RAW_SOFTARGMAX_BETA)
        exact = oracle_coords(b["flow"], out["coords"].shape[1], model.frame_shift)
        found = {"raw": raw_argmax_coords(out["corr"], model.upsample),
                 "raw_softargmax": soft, "refined": out["coords"], "oracle": exact}
        if imagenet is not None:
            found["raw_imagenet"] = raw_argmax_coords(imagenet.correlation(b["src"], b["tgt"]),
                                                      model.upsample)
        for name, coords in found.items():
            pred = normalised_to_pixels(model.transfer(coords, kp, EVAL_TAU), size, size)
            errors[name].append((pred - b["kp_tgt"]).norm(dim=-1).flatten())
            for alpha, hits in scores[name].items():
                for p, g in zip(pred.numpy(), b["kp_tgt"].numpy(), strict=True):
                    hits.append(pck(p, g, None, alpha * size))
    return {name: {**{f"pck@{alpha:g}": sum(s.total for s in hits) / sum(s.count for s in hits)
                      for alpha, hits in per.items()},
                   "median_px": torch.cat(errors[name]).median().item()}
            for name, per in scores.items()}


def train(run_dir: Path, *, grid: int = 10, batch: int = 2, keypoints: int = 64,
          lr: float = 1e-3, max_steps: int = 100_000, minutes: float = 60.0,
          checkpoint_every: int = 25, seed: int = 0, init: Path | None = None,
          attention: str = "additive", dense_weight: float = 0.0,
          placement: bool = False, backbone_lr: float = 0.0,
          shift: float = 0.0) -> TransforMatcher:
    """Train the refinement on training-split warps; resume from ``run_dir``'s newest
    checkpoint (at learning rate ``lr``, so a run can be continued at a lower rate), or start
    from the weights file ``init`` when there is none; stop after ``max_steps`` or ``minutes``
    of wall time; return the model. ``attention="standard"`` trains the same-size softmax
    attention variant (paper Table 3; quadratic in the matches, small grids only).
    ``dense_weight > 0`` adds that multiple of :func:`dense_loss` (every output cell supervised
    by the exact correspondence; ours, not the paper's) to the keypoint loss of Eq. 12.
    ``placement=True`` trains with the absolute-placement embedding (zero at the start, so
    ``init`` may be weights trained without it). ``shift > 0`` trains on warps whose ``image0``
    view is also translated by up to that fraction of the size per axis
    (:attr:`WarpConfig.shift`): more content crosses the image sides, so more keypoints near the
    sides have large displacements (a resumed run needs the same ``shift``, as it needs the
    same ``seed``).

    ``backbone_lr = 0`` keeps the backbone frozen (its ImageNet weights, or the tuned ones of an
    ``init`` file that has them). ``backbone_lr > 0`` fine-tunes the backbone layers that feed
    the correlation (:meth:`TransforMatcher.tune_backbone`; not the unused ImageNet classifier)
    in their own Adam parameter group at that rate, as the paper does (1e-5). BatchNorm stays in
    eval mode: its running statistics are the ImageNet ones and never update (batches of two
    pairs are too small for batch statistics); its affine weights train. Checkpoints and
    exports then hold the tuned backbone tensors; a run resumes with the same choice (frozen or
    tuned) it was started with."""
    if backbone_lr < 0:
        raise UserError(f"the backbone learning rate must be >= 0 (0: frozen), got {backbone_lr}")
    if not 0 <= shift < 1:
        raise UserError(f"--shift must be in [0, 1) (a fraction of the image size), got {shift}")
    torch.manual_seed(seed)
    model = TransforMatcher(grid=grid, attention=attention, placement=placement)
    groups = [{"params": [p for p in model.parameters() if p.requires_grad], "lr": lr}]
    if backbone_lr > 0:
        groups.append({"params": model.tune_backbone(), "lr": backbone_lr})
    optim = torch.optim.Adam(groups, lr=lr)
    step = 0
    last = latest_checkpoint(run_dir)
    if last is not None:
        state = load_checkpoint(last)
        _check_optimiser_groups(last, state["optim"], len(groups))
        model.load_trained_state_dict(state["model"])
        optim.load_state_dict(state["optim"])
        for group, rate in zip(optim.param_groups, (lr, backbone_lr), strict=False):
            group["lr"] = rate  # a resumed run may continue at other rates
        step = int(state["step"])
        _console.print(f"resumed from {last} at step {step}")
    elif init is not None:
        model.load_trained_state_dict(read_state_dict(init, task=TASK), grow=placement)
        _console.print(f"started from {init}")
    data = warp_dataset("train", model.image_size, 10**9, seed, keypoints, shift)
    run_dir.mkdir(parents=True, exist_ok=True)
    log = (run_dir / "log.jsonl").open("a")
    started = time.monotonic()
    model.train()
    with Progress(console=_console, transient=False) as progress:
        task = progress.add_task("training", total=max_steps, completed=step)
        while step < max_steps and time.monotonic() - started < minutes * 60:
            b = warp_batch(data, list(range(step * batch, (step + 1) * batch)))
            size = model.image_size
            out = model(b["src"], b["tgt"])
            pred = model.transfer(out["coords"], pixels_to_normalised(b["kp_src"], size, size),
                                  TRAIN_TAU)
            loss = keypoint_loss(pred, pixels_to_normalised(b["kp_tgt"], size, size))
            if dense_weight > 0:
                loss = loss + dense_weight * dense_loss(out["coords"], b["flow"], b["valid"],
                                                        model.frame_shift)
            optim.zero_grad()
            loss.backward()
            optim.step()
            step += 1
            log.write(json.dumps({"step": step, "loss": loss.item(),
                                  "beta": model.log_beta.exp().item()}) + "\n")
            log.flush()
            progress.update(task, completed=step, description=f"loss {loss.item():.4f}")
            if step % checkpoint_every == 0:
                _save(run_dir, model, optim, step)
    _save(run_dir, model, optim, step)
    return model


def _check_optimiser_groups(path: Path, optim_state: dict, groups: int) -> None:
    """One :class:`UserError` line unless the checkpoint's optimiser has ``groups`` parameter
    groups (1: frozen backbone, 2: tuned backbone)."""
    saved = len(optim_state["param_groups"])
    if saved != groups:
        how = {1: "a frozen backbone (--backbone-lr 0)", 2: "a tuned backbone (--backbone-lr > 0)"}
        raise UserError(f"{path}: this run was trained with {how.get(saved, f'{saved} groups')}; "
                        f"resume it the same way or start a new --run-dir")


def _save(run_dir: Path, model: TransforMatcher, optim: torch.optim.Optimizer, step: int) -> None:
    save_checkpoint(run_dir / f"step-{step:08d}.pt",
                    {"model": model.trained_state_dict(), "optim": optim.state_dict(),
                     "step": step})
    prune_checkpoints(run_dir, keep_last=2)


def export_weights(model: TransforMatcher, path: Path, metadata: dict[str, str]) -> Path:
    """Write the trained tensors (:meth:`TransforMatcher.trained_state_dict`: the refinement,
    plus the backbone's feature layers if tuned) to a ``.safetensors`` file, atomically. The
    metadata gets ``task`` (``"semantic"``, see :mod:`crossview.models.weights`), ``backbone``
    (its name) and ``backbone_tuned`` (``"True"`` when the file holds the backbone) on top of
    ``metadata``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_safetensors(path, model.trained_state_dict(), TASK,
                             {**metadata, "backbone": model.backbone_name,
                              "backbone_tuned": str(model.backbone_tuned)})


app = typer.Typer(help="Train / evaluate TransforMatcher on synthetic warps.",
                  no_args_is_help=True, add_completion=False)


@app.command("train")
def _train_command(
    run_dir: Annotated[Path, typer.Option(help="checkpoints and log")] = Path(
        "runs/transformatcher"),
    grid: Annotated[int, typer.Option(help="correlation grid; images are 16 * grid px")] = 10,
    batch: Annotated[int, typer.Option()] = 2,
    keypoints: Annotated[int, typer.Option()] = 64,
    lr: Annotated[float, typer.Option()] = 1e-3,
    max_steps: Annotated[int, typer.Option()] = 100_000,
    minutes: Annotated[float, typer.Option()] = 60.0,
    seed: Annotated[int, typer.Option(help="seed of the model's start and the warp stream")] = 0,
    export: Annotated[Path | None, typer.Option(help="write the weights here at the end")] = None,
    init: Annotated[Path | None, typer.Option(
        help="start from these weights (.safetensors) when the run has no checkpoint")] = None,
    attention: Annotated[str, typer.Option(help="additive (the paper's) or standard")] = (
        "additive"),
    dense_weight: Annotated[float, typer.Option(
        help="weight of the dense loss on every output cell (ours; 0: Eq. 12 only)")] = 0.0,
    placement: Annotated[bool, typer.Option(
        help="add the absolute-placement embedding of the matches (ours)")] = False,
    backbone_lr: Annotated[float, typer.Option(
        help="Adam rate of the backbone layers that feed the correlation (paper: 1e-5); "
             "0: frozen backbone")] = 0.0,
    shift: Annotated[float, typer.Option(
        help="translate the source view of the training warps by up to this fraction of the "
             "size per axis, so content crosses the sides (ours; 0: none)")] = 0.0,
) -> None:
    """Train (resuming) and optionally export the weights."""
    model = train(run_dir, grid=grid, batch=batch, keypoints=keypoints, lr=lr,
                  max_steps=max_steps, minutes=minutes, seed=seed, init=init,
                  attention=attention, dense_weight=dense_weight, placement=placement,
                  backbone_lr=backbone_lr, shift=shift)
    if export is not None:
        step = load_checkpoint(latest_checkpoint(run_dir))["step"]
        export_weights(model, export, {"train_grid": str(grid), "steps": str(step),
                                       "seed": str(seed),
                                       "attention": attention, "placement": str(placement),
                                       "backbone_lr": f"{backbone_lr:g}",
                                       "shift": f"{shift:g}",
                                       "train_images": ",".join(image_names("train"))})
        _console.print(f"wrote {export}")


@app.command("evaluate")
def _evaluate_command(
    weights: Annotated[Path | None, typer.Option(help=".safetensors of the refinement")] = None,
    checkpoint: Annotated[Path | None, typer.Option(help="or a training checkpoint")] = None,
    grid: Annotated[int, typer.Option()] = 15,
    pairs: Annotated[int, typer.Option()] = 48,
    seed: Annotated[int, typer.Option()] = 0,
    attention: Annotated[str, typer.Option(help="additive (the paper's) or standard")] = (
        "additive"),
    json_out: Annotated[Path | None, typer.Option("--json")] = None,
) -> None:
    """PCK@0.05/0.1 on held-out warps: raw correlation arg-max vs the refined model (for weights
    with a tuned backbone: the raw arg-max of the tuned and of the ImageNet backbone)."""
    state = (read_state_dict(weights, task=TASK) if weights is not None
             else load_checkpoint(checkpoint)["model"] if checkpoint is not None else {})
    model = (transformatcher_from_state(state, weights or checkpoint, grid=grid,
                                        attention=attention)
             if state else TransforMatcher(grid=grid, attention=attention))
    imagenet = TransforMatcher(grid=grid).eval() if has_tuned_backbone(state) else None
    result = {"image_size": model.image_size, "pairs": pairs, "seed": seed, "attention": attention,
              "backbone_tuned": model.backbone_tuned,
              "heldout_images": list(image_names("heldout")),
              **evaluate_warps(model, pairs=pairs, seed=seed, imagenet=imagenet)}
    _console.print(result)
    if json_out is not None:
        write_json(json_out, result)


def main(argv: list[str] | None = None) -> None:
    """``python -m crossview.train.semantic`` (``argv``: its arguments, default the command
    line), run as ``crossview`` runs: a :class:`UserError` is one stderr line and exit 2."""
    run_app(app, argv)


if __name__ == "__main__":
    main()
