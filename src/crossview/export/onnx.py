"""ONNX export of MatchStereo / MatchFlow and TransforMatcher, and running the files with
onnxruntime (``pip install 'crossview[export]'``: onnx, onnxruntime and onnxscript, which
torch's exporter needs).

:func:`export_onnx` traces the export module of :mod:`crossview.export.modules` with
``torch.onnx.export`` (torch.export based) while MatchAttention runs its ``export`` backend
(:mod:`crossview.attention.match.export`: gathers, so any ONNX runtime runs it, no custom op).
MatchStereo / MatchFlow files take any height and width that are multiples of 32 and at least
the model's minimum (dynamic axes; the batch is fixed at 1); TransforMatcher's take only its
``image_size`` square. Inputs ``image0``, ``image1``: ``[1, 3, H, W]`` float32 in 0..255.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import torch
from torch import nn

from crossview.attention import using_backend
from crossview.errors import UserError
from crossview.export.modules import INPUT_NAMES, DenseOutputs, MatcherOutputs
from crossview.models.dense.contract import is_dense
from crossview.output import atomic_output

STRIDE = 32  # MatchStereo / MatchFlow sides are multiples of this (the 1/32 scale)
EXTRA = "pip install 'crossview[export]'"


def require(module: str) -> object:
    """Import ``module`` (``onnx``, ``onnxruntime``, ``onnxscript``), else a :class:`UserError`
    naming the extra that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise UserError(f"ONNX export needs {module}, which is not installed: {EXTRA}") from None


def export_module(model: nn.Module) -> DenseOutputs | MatcherOutputs:
    """The export module of ``model`` (eval mode); a :class:`UserError` for a model that
    cannot be exported."""
    task = getattr(model, "task", None)
    name = getattr(model, "model_name", type(model).__name__)
    if task in ("stereo", "flow") and is_dense(model):
        return DenseOutputs(model).eval()
    if task == "semantic" and hasattr(model, "image_size"):
        return MatcherOutputs(model).eval()
    raise UserError(f"model {name!r} ({task}) cannot be exported to ONNX; export a dense "
                    "(stereo, flow) or a TransforMatcher model")


def check_size(model: nn.Module, size: tuple[int, int]) -> None:
    """A :class:`UserError` unless ``size`` ``(H, W)`` is one ``model`` runs without padding:
    multiples of 32, at least the model's minimum (MatchStereo / MatchFlow); the model's
    ``image_size`` square (TransforMatcher)."""
    h, w = size
    name = getattr(model, "model_name", type(model).__name__)
    if getattr(model, "task", None) == "semantic":
        side = model.image_size
        if (h, w) != (side, side):
            raise UserError(f"--size {h}x{w}: {name} takes only {side}x{side} images")
        return
    if h % STRIDE or w % STRIDE:
        raise UserError(f"--size {h}x{w}: {name} needs sides that are multiples of {STRIDE} "
                        f"(the export runs without padding), e.g. {_round_up(h)}x{_round_up(w)}")
    least_h, least_w = model.min_shape(model.task)
    if h < least_h or w < least_w:
        raise UserError(f"--size {h}x{w}: {name} needs at least {least_h}x{least_w} for "
                        f"{model.task}")


def _round_up(n: int) -> int:
    return -(-n // STRIDE) * STRIDE


def example_inputs(size: tuple[int, int], seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """A random pair ``[1, 3, H, W]`` in 0..255: the second is the first shifted 4 px left
    plus noise (a plausible stereo / flow pair)."""
    generator = torch.Generator().manual_seed(seed)
    first = torch.rand(1, 3, *size, generator=generator) * 255
    noise = torch.rand(1, 3, *size, generator=generator) * 8
    return first, (torch.roll(first, -4, dims=3) + noise).clamp(0, 255)


def _dynamic_shapes(module: nn.Module) -> dict[str, dict[int, object]] | None:
    """Height and width as multiples of 32 (at least the model's minimum) for MatchStereo /
    MatchFlow; ``None`` (static) for TransforMatcher."""
    if not isinstance(module, DenseOutputs):
        return None
    least_h, least_w = module.model.min_shape(module.task)
    rows = torch.export.Dim("rows32", min=least_h // STRIDE)
    cols = torch.export.Dim("cols32", min=least_w // STRIDE)
    axes = {2: STRIDE * rows, 3: STRIDE * cols}
    return dict.fromkeys(INPUT_NAMES, axes)


def export_onnx(model: nn.Module, path: str | os.PathLike[str], size: tuple[int, int], *,
                dynamic: bool = True) -> tuple[str, ...]:
    """Write ``model`` as an ONNX file at ``path`` (atomically: a failed export leaves
    nothing), traced at ``size`` ``(H, W)``; ``dynamic`` keeps height and width free for
    MatchStereo / MatchFlow. Returns the output names.

    Raises :class:`UserError` for a model that cannot be exported, a size it cannot take, or a
    missing exporter package.
    """
    for module_name in ("onnx", "onnxscript"):
        require(module_name)
    module = export_module(model.cpu().float())
    check_size(model, size)
    with using_backend("export"), _quiet_exporter(), torch.no_grad():
        program = torch.onnx.export(
            module, example_inputs(size), dynamo=True, verbose=False,
            input_names=list(INPUT_NAMES), output_names=list(module.output_names),
            dynamic_shapes=_dynamic_shapes(module) if dynamic else None)
    with atomic_output(path) as staged:
        program.save(str(staged), external_data=False)
    return module.output_names


@contextlib.contextmanager
def _quiet_exporter() -> Iterator[None]:
    """Without the exporter's warnings and log lines on its own internals (skipped
    torchvision ops, deprecations), which say nothing about the model."""
    logger = logging.getLogger("torch.onnx")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logger.setLevel(level)


def onnx_session(path: str | os.PathLike[str], threads: int = 0) -> object:
    """An onnxruntime inference session of ``path`` on the CPU execution provider
    (``threads`` intra-op threads, 0: onnxruntime's default)."""
    ort = require("onnxruntime")
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    if not Path(path).is_file():
        raise UserError(f"{path}: no such file")
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def run_onnx(session: object, image0: torch.Tensor, image1: torch.Tensor) -> list[np.ndarray]:
    """The outputs of an :func:`onnx_session` on a pair ``[1, 3, H, W]`` (float 0..255)."""
    feeds = {name: image.detach().cpu().float().numpy()
             for name, image in zip(INPUT_NAMES, (image0, image1), strict=True)}
    return session.run(None, feeds)


def max_differences(expected: tuple[torch.Tensor, ...], got: list[np.ndarray],
                    names: tuple[str, ...]) -> dict[str, float]:
    """Per output: the largest absolute difference (float outputs) or the fraction of
    differing elements (bool masks) between PyTorch's ``expected`` and onnxruntime's ``got``;
    a shape mismatch is infinite."""
    return {name: _compare(want, have, lambda d: float(d.max()), float("inf"))
            for name, want, have in zip(names, expected, got, strict=True)}


def fractions_beyond(expected: tuple[torch.Tensor, ...], got: list[np.ndarray],
                     names: tuple[str, ...], tolerance: float) -> dict[str, float]:
    """Per output: the fraction of elements differing by more than ``tolerance`` (bool masks:
    differing at all) between ``expected`` and ``got``; a shape mismatch is 1."""
    return {name: _compare(want, have, lambda d: float(np.mean(d > tolerance)), 1.0)
            for name, want, have in zip(names, expected, got, strict=True)}


def _compare(want: torch.Tensor, have: np.ndarray, reduce: Callable[[np.ndarray], float],
             mismatch: float) -> float:
    """``reduce`` of ``|want - have|`` (float outputs); a bool mask gives the fraction of
    differing elements, a shape mismatch ``mismatch``."""
    want = want.detach().cpu().numpy()
    if want.shape != have.shape:
        return mismatch
    if want.dtype == np.bool_:
        return float(np.mean(want != have))
    return reduce(np.abs(want.astype(np.float64) - have))
