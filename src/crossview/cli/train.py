"""``crossview train CONFIG``: train MatchStereo / MatchFlow from a YAML configuration.

Also what ``torchrun --nproc-per-node N -m crossview train CONFIG`` runs on every rank.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from crossview.train.config import load_config


def train_command(
    config: Annotated[Path, typer.Argument(help="YAML training configuration (see configs/).")],
    resume: Annotated[bool, typer.Option(
        "--resume", help="Continue from the newest checkpoint of train.out_dir.")] = False,
    init_weights: Annotated[Path | None, typer.Option(
        "--init-weights", help="Fine-tune: start from these weights (.pth, state dict or "
        ".safetensors); ignored with --resume.")] = None,
    out_dir: Annotated[Path | None, typer.Option(
        "--out-dir", help="Override train.out_dir.")] = None,
    steps: Annotated[int | None, typer.Option("--steps", help="Override train.steps.")] = None,
) -> None:
    """Train a model; checkpoints, log.jsonl and best.pt go to train.out_dir."""
    from crossview.train.trainer import train

    cfg = load_config(config)
    if out_dir is not None:
        cfg.train.out_dir = str(out_dir)
    if steps is not None:
        cfg.train.steps = steps
    summary = train(cfg, resume=resume, init_weights=init_weights)
    if summary.get("is_main", True):
        val = ", ".join(f"{k} {v:.4g}" for k, v in summary["val"].items())
        Console().print(f"step {summary['step']} of {cfg.train.steps}; "
                        f"loss {summary['train'].get('loss', float('nan')):.4g}"
                        + (f"; validation {val}" if val else "")
                        + f"; checkpoints in {cfg.train.out_dir}")
