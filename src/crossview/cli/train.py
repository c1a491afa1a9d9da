"""``crossview train CONFIG``: train a model from a YAML configuration, with the recipe of its
``task`` (stereo, flow, semantic, novel-view; see :mod:`crossview.train.recipes`).

Also what ``torchrun --nproc-per-node N -m crossview train CONFIG`` runs on every rank.
Ctrl-C and SIGTERM checkpoint and stop (:class:`crossview.train.trainer.Trainer`); the command
then says how to continue and exits with 130 or 143, as the other commands do. ``--resume``
of a finished run trains nothing and says how to train it on (a larger ``--steps``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from crossview.console import stdout
from crossview.errors import UserError
from crossview.lazy import lazy_import

api = lazy_import("crossview.api")


def train_command(
    config: Annotated[Path, typer.Argument(help="YAML training configuration (see configs/).")],
    resume: Annotated[bool, typer.Option(
        "--resume", help="Continue from the newest checkpoint of train.out_dir. A newer "
        "step-*.pt that cannot be read (truncated, corrupt, not a training checkpoint) is "
        "renamed to NAME.unreadable, with one warning line saying why and which checkpoint "
        "is used instead; if none can be read: an error naming the newest.")] = False,
    init_weights: Annotated[str | None, typer.Option(
        "--init-weights", help="Fine-tune: start from these weights: a model name (its "
        "bundled or published weights; `crossview models` lists them) or a file (.pth, state "
        "dict or .safetensors); replaces the config's model.init_weights; ignored with "
        "--resume.")] = None,
    grow: Annotated[bool, typer.Option(
        "--grow", help="--init-weights come from a network with fewer decoder layers per "
        "scale or encoder blocks per stage (model.overrides.decoder_layers, encoder_depths); "
        "the extra ones start as the identity.")] = False,
    out_dir: Annotated[Path | None, typer.Option(
        "--out-dir", help="Override train.out_dir.")] = None,
    steps: Annotated[int | None, typer.Option(
        "--steps", min=1, help="Override train.steps. With --resume, a count above the step a "
        "finished run reached trains it on, with the learning-rate schedule run again over "
        "the added steps.")] = None,
    export: Annotated[Path | None, typer.Option(
        "--export", help="When train.steps are reached, write the model's weights to this "
        ".safetensors file (stereo/flow: and its registry description next to it, NAME.json, "
        "NAME = the file's stem; then --model FILE runs it, as the printed command says). A "
        "run stopped early (Ctrl-C, SIGTERM) writes no export: it says how to continue "
        "(--resume) or export the stopped state (--resume --export-only).")] = None,
    description: Annotated[str, typer.Option(
        help="Description stored with --export.")] = "",
    export_only: Annotated[bool, typer.Option(
        "--export-only", help="With --resume and --export: export the newest checkpoint's "
        "model without training further (e.g. a run stopped early).")] = False,
) -> None:
    """Train a model; checkpoints, log.jsonl and best.pt go to train.out_dir."""
    if export_only and (not resume or export is None):
        raise UserError("--export-only needs --resume and --export")
    if grow and init_weights is None:
        raise UserError("--grow needs --init-weights")
    run = api.train(config, resume=resume, init_weights=init_weights, grow=grow,
                    out_dir=out_dir, steps=steps, export=export, description=description,
                    export_only=export_only)
    for written in run.exported:
        stdout.print(f"wrote {written}" + (f" (step {run.step})" if export_only else ""))
    if run.exported and run.cfg.task in api.ESTIMATORS:  # a bundle: --model takes its path
        inputs = "LEFT RIGHT" if run.cfg.task == "stereo" else "FRAME0 FRAME1"
        stdout.print(f"use it: crossview {run.cfg.task} {inputs} --model {export}",
                     markup=False, soft_wrap=True)
    if export_only:
        return
    cfg, summary, finished = run.cfg, run.summary, run.finished

    def again(step_count: object) -> str:
        """The command that resumes this run (with ``--steps step_count`` unless None)."""
        return (f"crossview train {config} --resume"
                + (f" --out-dir {out_dir}" if out_dir is not None else "")
                + (f" --steps {step_count}" if step_count is not None else ""))

    if summary["is_main"] and finished and not summary["steps_run"]:  # resumed a finished run
        stdout.print(f"the run in {cfg.train.out_dir} finished at step {summary['step']} of "
                     f"{cfg.train.steps}: nothing to train; to train it on, raise the step "
                     f"count: `{again('N')}` with N > {summary['step']} (or train.steps in "
                     f"{config})", soft_wrap=True, markup=False)
    elif summary["is_main"]:
        val = ", ".join(f"{k} {v:.4g}" for k, v in summary["val"].items())
        stdout.print(f"step {summary['step']} of {cfg.train.steps}; "
                        f"loss {summary['train'].get('loss', float('nan')):.4g}"
                        + (f"; validation {val}" if val else "")
                        + f"; checkpoints in {cfg.train.out_dir}")
        if not finished:
            stdout.print(f"stopped early at step {summary['step']}: continue with "
                         f"`{again(steps)}`"
                         + (f"; {export} was not written (export this state with "
                            f"`{again(steps)} --export-only --export {export}`)"
                            if export is not None else ""), soft_wrap=True, markup=False)
    if summary["signal"] is not None and not finished:
        raise typer.Exit(128 + summary["signal"])  # as a shell reports a signal's end: 130, 143
