"""The training loop every model family shares: AdamW + schedule, clipping, autocast,
validation, checkpoints, resume, torchrun.

What differs between families (model, data, batch, loss, validation metric, export) is a
:class:`~crossview.train.recipe.Recipe`, chosen by the config's ``task``
(:func:`crossview.train.recipes.get_recipe`). Validation runs the recipe's predictor through
:func:`crossview.eval.evaluate`, the evaluation loop of ``crossview eval``.

The loop is deterministic by step: the global batch of step ``s`` is a pure function of
``(data seed, s)`` (see :func:`batch_indices`), each rank takes its contiguous share, and the
random states are checkpointed, so a run resumed from a checkpoint (``resume=True``) computes
exactly what the uninterrupted run would have computed, and leaves the same files: the log cut
back to the resumed step (:func:`crossview.train.runlog.cut_after`), ``best.pt`` mended if an
older version left it stale (:func:`crossview.train.checkpoint.repair_best`), temporaries of
killed writes removed. Rank 0 alone writes checkpoints, the JSONL log and the progress bar,
and with ``train.tensorboard`` the log again as TensorBoard events, with pictures of the first
validation predictions (:mod:`crossview.train.tensorboard_log`; a resume purges the events
after its step as it cuts the log).
The log gets the train record of the first step a run takes, of every ``train.log_every``-th
step and of the last step it reaches, also when a signal or an error ends it early; off a
terminal, each of those steps is also a progress line on stderr (:mod:`crossview.progress`).

A finished run is extended by resuming it with a larger ``train.steps``: training goes on from
its last checkpoint (weights, optimiser moments, random states) with the learning-rate
schedule of ``optim.schedule`` run again over the added steps (warm-up, then decay: a warm
restart; the checkpoint records where the schedule started, so resuming inside the extension
is exact as well). A run stopped before its ``train.steps`` must finish first: changing the
count mid-schedule would change what its remaining steps compute.

Rank 0 holds a lock on ``train.out_dir`` (:class:`crossview.train.run_lock.RunLock`) from
before it touches a file there until :meth:`Trainer.run` ends (or :meth:`Trainer.close`): a
second run into the same directory refuses to start. What the configured sizes need is checked
against the memory available before the first batch is made (:meth:`Trainer.check_memory`).
"""

from __future__ import annotations

import contextlib
import logging
import math
import signal
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
from rich.progress import BarColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, Sampler, default_collate

from crossview import memory
from crossview.attention.match import NonFiniteError
from crossview.device import resolve_device
from crossview.distributed import (
    DistInfo,
    all_reduce_sum,
    barrier,
    close_distributed,
    init_distributed,
    shard,
)
from crossview.errors import UserError
from crossview.eval import evaluate
from crossview.models.registry import weights_named
from crossview.progress import Progress
from crossview.train import checkpoint as ckpt
from crossview.train import runlog
from crossview.train.config import Config, config_from_dict, config_to_dict
from crossview.train.recipe import Recipe, ValidationView
from crossview.train.recipes import get_recipe
from crossview.train.run_lock import RunLock
from crossview.train.tensorboard_log import PREVIEWS, TensorBoardLog, open_board

log = logging.getLogger(__name__)

StepCallback = Callable[[int, dict[str, float]], bool | None]

# Configuration fields that change what a run computes: a resume must not change them
# (train.steps only extends a finished run, see the module docstring).
_FROZEN_ON_RESUME = ("task", "model", "data", "loss", "optim", "recipe")
_FROZEN_TRAIN = ("batch_size", "precision", "seed")
# checkpoint keys that checkpoints of older versions lack: their runs had one schedule from 0
_ADDED_STATE = ("schedule_start",)


def batch_indices(step: int, batch_size: int, dataset_size: int, seed: int) -> list[int]:
    """The global batch of ``step``: samples ``step*B .. step*B + B - 1`` of an endless stream
    that visits the dataset in a fresh seeded permutation every epoch."""
    out = []
    cached: dict[int, torch.Tensor] = {}
    for t in range(step * batch_size, (step + 1) * batch_size):
        epoch, pos = divmod(t, dataset_size)
        if epoch not in cached:
            gen = torch.Generator().manual_seed(seed * 1_000_003 + epoch)
            cached[epoch] = torch.randperm(dataset_size, generator=gen)
        out.append(int(cached[epoch][pos]))
    return out


class StepBatches(Sampler[list[int]]):
    """This rank's share of the global batch of every step from ``first`` to ``steps - 1``
    (:func:`batch_indices`, then :func:`crossview.distributed.shard`): the batch sampler of the
    sample-making workers (``train.workers``)."""

    def __init__(self, first: int, steps: int, batch_size: int, dataset_size: int, seed: int,
                 dist: DistInfo) -> None:
        self.first, self.steps = first, steps
        self.batch_size, self.dataset_size, self.seed, self.dist = (batch_size, dataset_size,
                                                                     seed, dist)

    def __len__(self) -> int:
        return max(self.steps - self.first, 0)

    def __iter__(self) -> Iterator[list[int]]:
        for step in range(self.first, self.steps):
            yield shard(batch_indices(step, self.batch_size, self.dataset_size, self.seed),
                        self.dist)


def _leave_signals_to_the_trainer(worker: int) -> None:
    """In a sample-making worker: ignore Ctrl-C and SIGTERM (a terminal or ``timeout`` sends
    them to the whole process group), so the trainer finishes its step, saves and then ends
    the workers itself."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


def _schedule(optimizer: torch.optim.Optimizer, schedule: str, steps: int,
              pct_start: float) -> torch.optim.lr_scheduler.LRScheduler:
    """The learning-rate schedule ``optim.schedule`` names, peaking at each group's ``lr``.

    ``one-cycle``: linear warm-up over ``pct_start`` of the steps (at least one step), then
    linear decay; runs under 4 steps are too short for the two phases: constant rate.
    ``cosine``: linear warm-up over ``pct_start`` of the steps, then cosine decay to 0.
    """
    if schedule == "constant" or (schedule == "one-cycle" and steps < 4):
        return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)
    if schedule == "cosine":
        warmup = max(1, round(pct_start * steps))

        def factor(step: int) -> float:
            if step < warmup:
                return (step + 1) / warmup
            return 0.5 * (1.0 + math.cos(math.pi * (step - warmup) / max(steps - warmup, 1)))

        return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
    pct = min(max(pct_start, 2.0 / steps), (steps - 2.0) / steps)
    peaks = [group["lr"] for group in optimizer.param_groups]
    return torch.optim.lr_scheduler.OneCycleLR(
        optimizer, max_lr=peaks[0] if len(peaks) == 1 else peaks, total_steps=steps,
        pct_start=pct, anneal_strategy="linear", cycle_momentum=False)


class _Forward(nn.Module):
    """``forward(batch)`` = the recipe's training forward, so DistributedDataParallel hooks see
    the call."""

    def __init__(self, model: nn.Module, recipe: Recipe, cfg: Config) -> None:
        super().__init__()
        self.model = model
        self.recipe = recipe
        self.cfg = cfg

    def forward(self, batch: dict[str, torch.Tensor]) -> dict[str, Any]:
        return self.recipe.forward(self.model, batch, self.cfg)


class _StopRequested:
    """SIGINT/SIGTERM set a flag (and ``signal``, the last one received); the loop
    checkpoints at the next step boundary and stops."""

    def __init__(self) -> None:
        self.requested = False
        self.signal: int | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> _StopRequested:
        with contextlib.suppress(ValueError):  # not the main thread: no handlers
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        self.requested = True
        self.signal = signum

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


class Trainer:
    """One training run described by a :class:`Config`, with the recipe of ``cfg.task``.

    Args:
        cfg: the configuration.
        model: the network (default: the recipe builds it from ``cfg.model``).
        train_set / val_set: map-style datasets of training samples (default: the recipe
            builds them from ``cfg.data``).
        resume: continue from the newest usable checkpoint of ``cfg.train.out_dir``; newer
            unreadable ones are renamed ``NAME.unreadable`` with a warning line each (see
            :func:`crossview.train.checkpoint.usable_checkpoint`).
        init_weights: the weights loaded into the model before step 0 (fine-tuning), in
            place of ``cfg.model.init_weights``: a weights file, or a registered model's name
            for its bundled or published weights
            (:func:`crossview.models.registry.weights_named`); ignored when resuming.
        grow: ``init_weights`` come from a network with fewer decoder layers per scale or
            encoder blocks per stage; the extra ones start as the identity
            (:func:`crossview.train.grow.grow_into`).
        progress: show a progress bar, or lines off a terminal (rank 0).
        on_step: called on every rank after every step with ``(step, logs)``; returning True
            stops the run like SIGINT/SIGTERM do (checkpoint, then return).
    """

    def __init__(self, cfg: Config, *, model: nn.Module | None = None,
                 train_set: Any = None, val_set: Any = None, resume: bool = False,
                 init_weights: str | Path | None = None, grow: bool = False,
                 progress: bool = True, on_step: StepCallback | None = None) -> None:
        self.cfg = cfg
        device = resolve_device(cfg.train.device, "config: train.device")
        self.dist: DistInfo = init_distributed(cfg.train.device)
        if device.type == "cuda":
            self.device = torch.device("cuda", self.dist.local_rank)
        else:
            if cfg.train.precision == "fp16":
                raise UserError("train.precision fp16 needs a CUDA device; use bf16 on CPU")
            self.device = device
        if cfg.train.batch_size % self.dist.world_size:
            raise UserError(f"train.batch_size ({cfg.train.batch_size}) must be divisible by "
                            f"the number of processes ({self.dist.world_size})")
        self.recipe = get_recipe(cfg.task)
        self.recipe.check(cfg)
        torch.manual_seed(cfg.train.seed)
        if model is None or train_set is None:
            model = model if model is not None else self.recipe.build_model(cfg)
            self.recipe.check_model(model, cfg)
            if train_set is None:
                train_set, val_set = self.recipe.build_datasets(cfg)
        self.model = model.to(self.device)
        self.train_set = train_set
        self.val_set = val_set
        if len(train_set) == 0:
            raise UserError("the training set is empty")
        self.check_memory()
        self.unlabelled = self.recipe.unlabelled_set(cfg)
        if self.unlabelled is not None and self.unlabelled[1] % self.dist.world_size:
            raise UserError(f"the unlabelled batch ({self.unlabelled[1]}) must be divisible by "
                            f"the number of processes ({self.dist.world_size})")
        self.run_dir = Path(cfg.train.out_dir)
        self.progress = progress
        self.on_step = on_step
        self.schedule_start = 0  # the step the learning-rate schedule began at
        self._new_schedule()
        self.scaler = torch.amp.GradScaler("cuda", enabled=cfg.train.precision == "fp16")
        self.step = 0
        self.nonfinite_total = 0
        self.nonfinite_run = 0
        self.best_key, direction = self.recipe.best
        self.higher_is_better = direction == "max"
        self.best_metric = -math.inf if self.higher_is_better else math.inf
        self.resumed = resume
        self.board: TensorBoardLog | None = None  # opened by run()
        # before any file of the run directory is touched; rank 0 speaks for the run
        self._lock = RunLock(self.run_dir) if self.dist.is_main else None
        try:
            if self.dist.is_main:
                ckpt.remove_stale_temporaries(self.run_dir)
            if resume:
                self._resume()
            elif init_weights is not None or cfg.model.init_weights:
                given, what = ((init_weights, "--init-weights") if init_weights is not None
                               else (cfg.model.init_weights, "config: model.init_weights"))
                self.recipe.load_init_weights(self.model, weights_named(given, what), grow=grow)
        except BaseException:
            self._release_lock()
            raise
        wrapped: nn.Module = _Forward(self.model, self.recipe, cfg)
        if self.dist.enabled:
            wrapped = DistributedDataParallel(
                wrapped, device_ids=[self.device.index] if self.device.type == "cuda" else None,
                find_unused_parameters=True)
        self.forward = wrapped

    def check_memory(self) -> None:
        """Refuse (:class:`UserError`) a run whose configured sizes cannot fit this rank's
        device, before the first batch is made: a training step holds at least what inference
        on its batch needs (the model's own estimate, ``inference_bytes``, else the batch's
        float32 image pairs), and :func:`batch_indices` a permutation of the training set
        (int64)."""
        cfg = self.cfg
        rows = cfg.train.batch_size // self.dist.world_size
        h, w = cfg.data.height, cfg.data.width
        estimate = getattr(self.model, "inference_bytes", None)
        needed = (estimate(rows, h, w, cfg.task) if estimate is not None
                  else memory.array_bytes((2 * rows, 3, h, w)))
        needed += memory.array_bytes((len(self.train_set),), itemsize=8)
        memory.check_memory(
            needed, f"config: training on batches of {rows} samples of {h}x{w} px over "
            f"{len(self.train_set)} samples", "lower train.batch_size, data.height/data.width "
            "or data.train_size", self.device)

    # ----------------------------------------------------------------- state
    def _new_schedule(self) -> None:
        """A fresh optimiser and the learning-rate schedule from ``schedule_start`` to
        ``train.steps``."""
        cfg = self.cfg
        self.optimizer = torch.optim.AdamW(self.recipe.param_groups(self.model, cfg),
                                           lr=cfg.optim.lr, betas=cfg.optim.betas,
                                           weight_decay=cfg.optim.weight_decay)
        self.scheduler = _schedule(self.optimizer, cfg.optim.schedule,
                                   cfg.train.steps - self.schedule_start, cfg.optim.pct_start)

    def state_dict(self) -> dict[str, Any]:
        """Everything a resume needs, as plain containers and tensors."""
        return {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "schedule_start": self.schedule_start,
            "scaler": self.scaler.state_dict(),
            "step": self.step,
            "rng": ckpt.capture_rng_state(),
            "nonfinite_total": self.nonfinite_total,
            "nonfinite_run": self.nonfinite_run,
            "best_metric": self.best_metric,
            "config": config_to_dict(self.cfg),
        }

    def _resume(self) -> None:
        keys = [key for key in self.state_dict() if key not in _ADDED_STATE]
        try:
            latest, state, skipped = ckpt.usable_checkpoint(
                self.run_dir, keys, set_aside=self.dist.is_main)
        except UserError as error:
            raise UserError(f"--resume: {error}") from None
        if self.dist.is_main:
            for why in skipped:
                log.warning(f"--resume: {why}; resuming from {latest.name} (step "
                            f"{int(state['step'])})")
        # through the current defaults: keys added since the checkpoint was written compare
        # as their defaults (the behaviour of the version that wrote it)
        try:
            saved = config_to_dict(config_from_dict(state["config"]))
        except UserError as error:
            raise UserError(f"--resume: the config in {latest} does not fit this version: "
                            f"{error}") from None
        now = config_to_dict(self.cfg)
        for key in _FROZEN_ON_RESUME:
            if saved[key] != now[key]:
                raise UserError(f"--resume: the config's '{key}' section differs from the "
                                f"checkpoint's ({latest}); resume with the same config")
        for key in _FROZEN_TRAIN:
            if saved["train"][key] != now["train"][key]:
                raise UserError(f"--resume: train.{key} differs from the checkpoint's "
                                f"({saved['train'][key]!r} there, {now['train'][key]!r} now)")
        step, planned = int(state["step"]), saved["train"]["steps"]
        extend = self.cfg.train.steps != planned
        if extend:
            self._check_extension(step, planned, latest)
        self.schedule_start = step if extend else int(state.get("schedule_start", 0))
        if self.schedule_start:  # a schedule over the added steps only
            self._new_schedule()
        optimizer_state = state["optimizer"]
        if extend:  # the moments carry on; the learning rates are the new schedule's
            optimizer_state = {**optimizer_state,
                               "param_groups": self.optimizer.state_dict()["param_groups"]}
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(optimizer_state)
        if not extend:
            self.scheduler.load_state_dict(state["scheduler"])
        self.scaler.load_state_dict(state["scaler"])
        self.step = step
        self.nonfinite_total = int(state["nonfinite_total"])
        self.nonfinite_run = int(state["nonfinite_run"])
        self.best_metric = float(state["best_metric"])
        ckpt.restore_rng_state(state["rng"])
        if self.dist.is_main:
            runlog.cut_after(self.run_dir, self.step)
            best_step = runlog.step_of(self.run_dir, "val", self.best_key,
                                       self.best_metric)
            repaired = ckpt.repair_best(self.run_dir, self.step, self.best_metric, best_step)
            if repaired is not None:
                log.warning(f"--resume: {repaired}")
            if extend:
                added = self.cfg.train.steps - step
                log.info(f"--resume: the run finished at step {step}; training on to step "
                         f"{self.cfg.train.steps} with the {self.cfg.optim.schedule} "
                         f"learning-rate schedule over the {added} added "
                         f"step{'s' if added > 1 else ''}")

    def _check_extension(self, step: int, planned: int, latest: Path) -> None:
        """Refuse a changed ``train.steps`` unless it extends the finished run of
        checkpoint ``latest`` (at ``step``, of ``planned`` steps)."""
        steps = self.cfg.train.steps
        if step < planned:
            raise UserError(f"--resume: train.steps differs from the checkpoint's ({planned} "
                            f"there, {steps} now), and the run stopped at step {step} of "
                            f"{planned}: finish it first (resume with train.steps {planned}), "
                            "then raise train.steps to train it on")
        if steps < step:
            raise UserError(f"--resume: train.steps {steps} is below the step the run "
                            f"reached ({step}, {latest}); to train it on, raise train.steps "
                            f"above {step}")

    def save(self, best: bool = False) -> Path | None:
        """Checkpoint the current step, as ``best.pt`` too if ``best`` (rank 0 writes; every
        rank waits for it)."""
        path = None
        if self.dist.is_main:
            path = ckpt.save_step(self.run_dir, self.state_dict(), best=best,
                                  keep_last=self.cfg.train.keep_last)
        barrier(self.dist)
        return path

    # ------------------------------------------------------------------ steps
    def _autocast(self) -> contextlib.AbstractContextManager:
        precision = self.cfg.train.precision
        if precision == "fp32":
            return contextlib.nullcontext()
        dtype = torch.bfloat16 if precision == "bf16" else torch.float16
        return torch.autocast(self.device.type, dtype=dtype)

    def _batch(self, dataset: Any, indices: list[int]) -> dict[str, torch.Tensor]:
        return self._on_device(self.recipe.collate([dataset[i] for i in indices]))

    def _on_device(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """``batch`` on the training device (asynchronously from pinned memory on a GPU)."""
        return {k: v.to(self.device, non_blocking=True) for k, v in batch.items()}

    def _prefetched_batches(self) -> Iterator[dict[str, torch.Tensor]]:
        """The batches of the steps from ``self.step`` on, made ahead by ``train.workers``
        processes (on the device; pinned first when it is a GPU)."""
        cfg = self.cfg
        loader = DataLoader(
            self.train_set, num_workers=cfg.train.workers, collate_fn=self.recipe.collate,
            batch_sampler=StepBatches(self.step, cfg.train.steps, cfg.train.batch_size,
                                      len(self.train_set), cfg.data.seed, self.dist),
            pin_memory=self.device.type == "cuda", prefetch_factor=4,
            worker_init_fn=_leave_signals_to_the_trainer)
        yield from map(self._on_device, loader)

    def train_step(self, batch: dict[str, torch.Tensor] | None = None) -> dict[str, float]:
        """One optimisation step on this rank's share of the global batch of ``self.step``
        (made here unless ``batch`` holds it, from :meth:`_prefetched_batches`), and of the
        recipe's unlabelled stream, when it has one: its samples join the batch under
        ``unlabelled_*`` keys."""
        cfg = self.cfg
        if batch is None:
            indices = batch_indices(self.step, cfg.train.batch_size, len(self.train_set),
                                    cfg.data.seed)
            batch = self._batch(self.train_set, shard(indices, self.dist))
        if self.unlabelled is not None:
            dataset, size = self.unlabelled
            extra = shard(batch_indices(self.step, size, len(dataset), cfg.data.seed + 1),
                          self.dist)
            for key, value in default_collate([dataset[i] for i in extra]).items():
                batch[f"unlabelled_{key}"] = value.to(self.device)
        self.forward.train()
        outputs = self._forward(batch)
        self.optimizer.zero_grad(set_to_none=True)
        if outputs is None:  # the fields diverged inside the forward: no loss, no gradient
            loss, logs, grad_norm = None, {"loss": math.nan}, math.nan
        else:
            loss, logs = self.recipe.loss(outputs, batch, cfg)
            self.scaler.scale(loss).backward()
            self.scaler.unscale_(self.optimizer)
            params = [p for p in self.model.parameters() if p.grad is not None]
            max_norm = cfg.optim.grad_clip if cfg.optim.grad_clip > 0 else math.inf
            grad_norm = float(torch.nn.utils.clip_grad_norm_(params, max_norm))
        finite = (loss is not None and math.isfinite(float(loss.detach()))
                  and math.isfinite(grad_norm))
        if finite:
            self.scaler.step(self.optimizer)
            self.nonfinite_run = 0
        else:
            self.optimizer.zero_grad(set_to_none=True)
            self.nonfinite_total += 1
            self.nonfinite_run += 1
        if loss is not None:  # the scaler's update reads the inf checks of unscale_
            self.scaler.update()
        lr = self.optimizer.param_groups[0]["lr"]  # the rate this step used
        with warnings.catch_warnings():  # a skipped first step trips torch's order check
            warnings.filterwarnings("ignore", message="Detected call of `lr_scheduler.step")
            self.scheduler.step()
        logs = self._mean_over_ranks(logs)
        logs.update(grad_norm=grad_norm, lr=lr,
                    skipped=float(not finite))
        self.step += 1
        if self.nonfinite_run >= cfg.train.max_nonfinite:
            raise UserError(f"stopping at step {self.step}: {self.nonfinite_run} steps in a row "
                            "had a non-finite loss, gradient or field (lower optim.lr, or use "
                            "fp32)")
        return logs

    def _forward(self, batch: dict[str, torch.Tensor]) -> dict[str, Any] | None:
        """The training forward, or ``None`` when its fields became non-finite (diverged
        weights raise inside MatchAttention before a loss exists; the step counts as
        non-finite). Under torchrun every rank learns whether any rank diverged: all skip the
        step together, or, if only some did, all stop with one error instead of waiting for
        each other's gradients."""
        try:
            with self._autocast():
                outputs = self.forward(batch)
        except NonFiniteError:
            outputs = None
        if self.dist.enabled:
            diverged = all_reduce_sum(torch.tensor([float(outputs is None)]), self.dist)[0]
            if 0 < diverged < self.dist.world_size:
                raise UserError(f"stopping at step {self.step + 1}: the fields became "
                                f"non-finite on {int(diverged)} of {self.dist.world_size} "
                                "processes (lower optim.lr, or use fp32)")
        return outputs

    def _mean_over_ranks(self, logs: dict[str, float]) -> dict[str, float]:
        if not self.dist.enabled:
            return logs
        keys = sorted(logs)
        values = all_reduce_sum(torch.tensor([logs[k] for k in keys], dtype=torch.float64),
                                self.dist)
        return {k: float(v) / self.dist.world_size for k, v in zip(keys, values, strict=True)}

    def validate(self) -> dict[str, float]:
        """The recipe's metrics over the validation set, pooled
        (:func:`crossview.eval.evaluate`; every rank scores its strided share and gets the
        merged result)."""
        self.model.eval()
        predict = self.recipe.predictor(self.model, self.cfg, self.device)
        shown: list[tuple[Any, Any]] = []  # this rank's first samples and their predictions

        def predictor(sample: Any) -> Any:
            with torch.no_grad(), self._autocast():
                prediction = predict(sample)
            if self.board is not None and len(shown) < PREVIEWS:
                shown.append((sample, prediction))
            return prediction

        result = evaluate(ValidationView(self.val_set, self.recipe), predictor,
                          self.recipe.metrics(self.cfg), dist_info=self.dist)
        if self.board is not None:
            pictures = [self.recipe.preview(sample, prediction) for sample, prediction in shown]
            self.board.images([p for p in pictures if p is not None], self.step)
        return result.mean()

    def _improves(self, value: float) -> bool:
        return value > self.best_metric if self.higher_is_better else value < self.best_metric

    # ------------------------------------------------------------------- loop
    def _log(self, record: dict[str, Any]) -> None:
        if self.dist.is_main:
            runlog.append_record(self.run_dir, record)
        if self.board is not None:
            self.board.record(record)

    def _release_lock(self) -> None:
        if self._lock is not None:
            self._lock.release()

    def close(self) -> None:
        """Release the run directory's lock and tear the process group down (:meth:`run` does
        it when it ends; call it for a trainer that never runs). DistributedDataParallel's
        reducer holds the group: it is dropped first, so that ``destroy_process_group``
        destroys the group (releasing the GIL while gloo's threads finish). Left to the
        reducer's garbage collection, the group's destructor would join those threads holding
        the GIL while one of them waits for it to free a finished collective's tensors: a hang
        at exit."""
        if self.board is not None:
            self.board.close()
            self.board = None
        self._release_lock()
        if isinstance(self.forward, DistributedDataParallel):
            self.forward = self.forward.module
        close_distributed(self.dist)

    def run(self) -> dict[str, Any]:
        """Train until ``cfg.train.steps``; returns the last logs and validation metrics, and
        ``signal``: the signal (SIGINT, SIGTERM) that stopped the run early on this process,
        else ``None``."""
        cfg = self.cfg.train
        last_logs: dict[str, float] = {}
        last_val: dict[str, float] = {}
        started = time.perf_counter()
        first_step = self.step
        progress = Progress(TextColumn("[bold]train"), BarColumn(),
                            TextColumn("{task.completed}/{task.total}"),
                            TextColumn("loss {task.fields[loss]}"), TimeElapsedColumn(),
                            TextColumn("eta"), TimeRemainingColumn(),
                            show=self.progress and self.dist.is_main
                            and self.step < cfg.steps)  # a finished run: nothing to show
        bar = progress.add_task("step", total=cfg.steps, completed=self.step, loss="-")
        if self.step < cfg.steps:  # rank 0's events, beside the log
            self.board = open_board(self.run_dir, enabled=self.dist.is_main and cfg.tensorboard,
                                    resumed_step=self.step if self.resumed else None)
        taken = logged = self.step  # the step of last_logs; the last one in the log
        seconds = 0.0

        def log_step() -> None:
            """The train record of step ``taken``, and its progress line."""
            nonlocal logged
            self._log({"kind": "train", "step": taken, **last_logs, "step_s": seconds,
                       "samples_per_s": cfg.batch_size / max(seconds, 1e-9),
                       "nonfinite_total": self.nonfinite_total})
            progress.line(bar, f"loss {last_logs['loss']:.4g} lr {last_logs['lr']:.3g}")
            logged = taken

        try:
            with _StopRequested() as stop, progress:
                batches = self._prefetched_batches() if cfg.workers else None
                while self.step < cfg.steps:
                    t0 = time.perf_counter()
                    last_logs = self.train_step(None if batches is None else next(batches))
                    taken = self.step
                    if self.on_step is not None and self.on_step(self.step, last_logs):
                        stop.requested = True
                    if self.dist.enabled:  # a signal may reach the ranks at different steps
                        flag = torch.tensor([float(stop.requested)])
                        stop.requested = bool(all_reduce_sum(flag, self.dist)[0] > 0)
                    seconds = time.perf_counter() - t0
                    progress.update(bar, completed=self.step, loss=f"{last_logs['loss']:.3f}")
                    # the first step, every log_every-th and the last one this run takes
                    if (self.step % cfg.log_every == 0 or stop.requested
                            or self.step in (first_step + 1, cfg.steps)):
                        log_step()
                    saved = False
                    if self.val_set is not None and (self.step % cfg.val_every == 0
                                                     or self.step == cfg.steps):
                        last_val = self.validate()
                        self._log({"kind": "val", "step": self.step, **last_val})
                        if self._improves(last_val[self.best_key]):
                            self.best_metric = last_val[self.best_key]
                            self.save(best=True)
                            saved = True
                    due = self.step % cfg.ckpt_every == 0 or self.step == cfg.steps
                    if not saved and (due or stop.requested):
                        self.save()
                    if stop.requested:
                        break
        finally:
            if logged < taken:  # a run ended by an error still logs the last step it took
                log_step()
            self.close()
        return {"step": self.step, "train": last_logs, "val": last_val,
                "seconds": time.perf_counter() - started, "steps_run": self.step - first_step,
                "nonfinite_total": self.nonfinite_total, "is_main": self.dist.is_main,
                "signal": stop.signal}


def train(cfg: Config, **kwargs: Any) -> dict[str, Any]:
    """Build a :class:`Trainer` and run it (the Python twin of ``crossview train``)."""
    return Trainer(cfg, **kwargs).run()


__all__ = ["Trainer", "batch_indices", "train"]
