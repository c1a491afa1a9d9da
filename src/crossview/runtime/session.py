"""An onnxruntime session on the CPU, shared by the export's checks
(:mod:`crossview.export.onnx`) and :mod:`crossview.runtime` (no torch)."""

from __future__ import annotations

import importlib
import os
from pathlib import Path

from crossview.errors import UserError

EXTRA = "pip install onnxruntime (or 'crossview[export]')"


def onnx_session(path: str | os.PathLike[str], threads: int = 0, *,
                 run_once: bool = False) -> object:
    """An onnxruntime inference session of ``path`` on the CPU execution provider
    (``threads`` intra-op threads, 0: onnxruntime's default). ``run_once``: for a session
    that runs one pair (the export's check), onnxruntime's basic graph optimisations only and
    threads that sleep when idle: at 384x1248 its start takes about half the time, and the
    whole check about 2/3 of the CPU time (measured: 13.6 s against 21 s), for the same
    outputs up to float rounding. A :class:`UserError` for a missing file, a file that is no
    ONNX model, or onnxruntime not installed."""
    try:
        ort = importlib.import_module("onnxruntime")
    except ImportError:
        raise UserError(f"running an ONNX file needs onnxruntime, which is not installed: "
                        f"{EXTRA}") from None
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.log_severity_level = 3  # errors only: its optimiser's notes say nothing to a user
    if run_once:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    if not Path(path).is_file():
        raise UserError(f"{path}: no such file")
    try:
        return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    except Exception as error:  # onnxruntime raises its own exception types, unexported
        raise UserError(f"{path}: not an ONNX model onnxruntime can run "
                        f"({str(error).splitlines()[0][:200]})") from None
