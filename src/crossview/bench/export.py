"""ONNX export timed and checked: one model exported at one size, then the same random pair
run by PyTorch (eager, the default MatchAttention backend, and the ``export`` backend the file
was traced with) and by onnxruntime's CPU execution provider, with the largest difference of
each output against PyTorch (of a stereo model that fuses: the fused run's network,
:func:`crossview.export.onnx.fused_module`).

Rows: ``runtime``, ``median_s``, ``min_s`` and per output the largest absolute difference from
the PyTorch row (a bool mask: the fraction of differing pixels). The export itself is timed
once (``export_s``).
"""

from __future__ import annotations

import contextlib
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn

from crossview.attention import choose_backend, using_backend
from crossview.bench.measure import time_call, torch_threads
from crossview.export.onnx import (
    example_inputs,
    export_module,
    export_onnx,
    max_differences,
    onnx_session,
    run_onnx,
)


def bench_export(model: nn.Module, size: tuple[int, int], *, repeats: int = 3, threads: int = 1,
                 on_step: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Export ``model`` at ``size`` into a temporary file and time it against PyTorch on
    ``threads`` threads (torch and onnxruntime alike). Returns ``{"export_s", "outputs",
    "onnx_bytes", "rows"}``."""
    step = on_step or (lambda label: None)
    with torch_threads(threads):
        module = export_module(model.cpu().float(), size=size)
        fused = getattr(module, "fused", None)  # a fused stereo file's inputs: the working size
        image0, image1 = example_inputs(size if fused is None else fused.working_size,
                                        seed=1)  # not the tracing example
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "model.onnx"
            step("export")
            started = time.perf_counter()
            names = export_onnx(model, path, size)
            export_s = time.perf_counter() - started
            session = onnx_session(path, threads)
            onnx_bytes = path.stat().st_size

        def torch_run() -> tuple[torch.Tensor, ...]:
            with torch.inference_mode():
                return module(image0, image1)

        expected = torch_run()
        default = choose_backend("cpu", torch.float32).name
        rows = []
        runs: list[tuple[str, Callable[[], Any], Any]] = [
            (f"pytorch ({default} MatchAttention)", torch_run, None),
            ("pytorch (export MatchAttention)", torch_run, "export"),
            ("onnxruntime cpu", lambda: run_onnx(session, image0, image1), None)]
        for runtime, run, backend in runs:
            step(runtime)
            with using_backend(backend) if backend else contextlib.nullcontext():
                stats = time_call(run, repeats=repeats, warmup=1)
                got = run()
            got = [t.numpy() if isinstance(t, torch.Tensor) else t for t in got]
            rows.append({"runtime": runtime, "median_s": stats["median_s"], "min_s": stats["min_s"],
                         "max_abs_diff": max_differences(expected, got, names)})
    return {"export_s": export_s, "outputs": list(names), "onnx_bytes": onnx_bytes,
            "rows": rows}

