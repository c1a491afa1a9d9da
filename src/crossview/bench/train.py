"""Training speed: optimisation steps per second with the fused and the reference operator.

Each case times :meth:`crossview.train.trainer.Trainer.train_step` (forward of both views, the
paper's losses, backward, clipping, AdamW) on one synthetic stereo sample of the requested
size, repeated as a batch, for a registered model and a MatchAttention backend. Wall-clock and
process CPU time are reported; on a shared, busy machine the wall clock is inflated by other
processes, and CPU time / threads estimates what free cores would deliver. Ratios compare the
two backends of one model within this run.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

from crossview.api import build_model, model_task
from crossview.attention import set_backend
from crossview.data.synthetic.stereo import StereoConfig, SyntheticStereo
from crossview.train.build import stereo_training_sample
from crossview.train.config import config_from_dict
from crossview.train.trainer import Trainer

BACKENDS = ("cpu", "reference")


def _step_times(trainer: Any, repeats: int, warmup: int) -> dict[str, float]:
    for _ in range(warmup):
        trainer.train_step()
    wall, cpu = [], []
    for _ in range(repeats):
        w0, c0 = time.perf_counter(), time.process_time()
        trainer.train_step()
        wall.append(time.perf_counter() - w0)
        cpu.append(time.process_time() - c0)
    wall.sort()
    cpu.sort()
    return {"step_s": wall[len(wall) // 2], "cpu_s": cpu[len(cpu) // 2]}


def bench_train(models: Sequence[str], size: tuple[int, int], batch: int, *,
                backends: Sequence[str] = BACKENDS, repeats: int = 2, warmup: int = 1,
                precision: str = "fp32",
                on_case: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """Time training steps for every ``model x backend``; one row per case."""
    sample = stereo_training_sample(SyntheticStereo(1, config=StereoConfig(size=size))[0])
    cfg = config_from_dict({"train": {"steps": warmup + repeats + 1, "batch_size": batch,
                                      "precision": precision}})
    rows: list[dict[str, Any]] = []
    for name in models:
        if model_task(name) != "stereo":
            continue
        for backend in backends:
            if on_case is not None:
                on_case(f"{name} {backend}")
            set_backend(backend)
            torch.manual_seed(0)
            trainer = Trainer(cfg, model=build_model(name), train_set=[sample] * batch,
                              progress=False)
            times = _step_times(trainer, repeats, warmup)
            trainer.close()  # its run directory's lock: the next case trains into the same
            params = sum(p.numel() for p in trainer.model.parameters())
            rows.append({"model": name, "params": params, "backend": backend,
                         "size": list(size), "batch": batch, "precision": precision,
                         **times, "steps_per_s": 1.0 / times["step_s"],
                         "samples_per_s": batch / times["step_s"],
                         "threads": torch.get_num_threads()})
    set_backend(None)
    for row in rows:
        fused = [r for r in rows if r["model"] == row["model"] and r["backend"] == "cpu"]
        row["over_fused"] = row["step_s"] / fused[0]["step_s"] if fused else float("nan")
        row["over_fused_cpu"] = row["cpu_s"] / fused[0]["cpu_s"] if fused else float("nan")
    return rows
