"""ONNX export of MatchStereo / MatchFlow and TransforMatcher, and running the files with
onnxruntime (``pip install 'crossview[export]'``: onnx, onnxruntime and onnxscript, which
torch's exporter needs).

:func:`export_onnx` traces the export module of :mod:`crossview.export.modules` with
``torch.onnx.export`` (torch.export based) while MatchAttention runs its ``export`` backend
(:mod:`crossview.attention.match.export`: gathers, so any ONNX runtime runs it, no custom op).

A MatchStereo / MatchFlow file computes by default what ``crossview stereo`` / ``crossview
flow`` (and :func:`crossview.estimate_disparity` / :func:`crossview.estimate_flow`) give for
its size: the padding to multiples of 32, the low-resolution initialisation and the
photometric refinement are inside, as the model does them by default (``lri`` / ``refine``
choose otherwise); such a file takes the one size it was exported at (any size the model
runs). ``bare`` exports the network alone, which takes any height and width that are
multiples of 32 and at least the model's minimum (dynamic axes unless ``dynamic=False``).
TransforMatcher's files take only its ``image_size`` square. The batch is fixed at 1. Inputs
``image0``, ``image1``: ``[1, 3, H, W]`` float32 in 0..255. Every file records what it
computes in its metadata (:func:`file_metadata`).

A stereo model that fuses with SGBM by default (``matchstereo-hybrid``) is exported fused
unless ``fuse=False``: the file holds the network as the fused run runs it (at the pair's
working size, resized inside to the network's scale, with the fused run's lri and
refinement) and records the rest of the run (:class:`crossview.runtime.fused_file.FusedFile`),
which :mod:`crossview.runtime` (numpy, OpenCV, onnxruntime; no torch) completes to what
``crossview stereo`` gives (:func:`fused_module`). OpenCV's matchers are not in an ONNX graph.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import warnings
from collections.abc import Callable, Iterator

import numpy as np
import torch
from torch import nn

from crossview import api
from crossview.attention import using_backend
from crossview.data.image_arrays import as_uint8
from crossview.errors import UserError
from crossview.export.modules import INPUT_NAMES, DenseOutputs, MatcherOutputs
from crossview.geometry.disparity import field_to_disparity
from crossview.long_step import long_step
from crossview.models.dense import sgbm_fusion
from crossview.models.dense.contract import is_dense
from crossview.models.dense.inference import (
    fuses,
    fusion_work,
    initialises_low,
    network_settings,
    predict_fields,
    refines,
    working_size,
)
from crossview.models.dense.presets import fused_settings
from crossview.models.dense.self_fusion import SELF_FUSION_SCALES
from crossview.models.keypoints.contract import is_keypoint_matcher
from crossview.output import atomic_output
from crossview.runtime.fused_file import FusedFile, fusion_constants
from crossview.runtime.self_fused import (
    SelfFusedStereo,
    network_file_size,
    scales_text,
    self_fused_command,
)
from crossview.runtime.session import onnx_session
from crossview.runtime.stereo import FusedStereo

STRIDE = 32  # MatchStereo / MatchFlow sides are multiples of this (the 1/32 scale)
EXTRA = "pip install 'crossview[export]'"


def require(module: str) -> object:
    """Import ``module`` (``onnx``, ``onnxruntime``, ``onnxscript``), else a :class:`UserError`
    naming the extra that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise UserError(f"ONNX export needs {module}, which is not installed: {EXTRA}") from None


def export_module(model: nn.Module, *, lri: bool | None = None, refine: bool | None = None,
                  bare: bool = False, fuse: bool | None = None,
                  size: tuple[int, int] | None = None, preset: str | None = None,
                  self_fuse: bool = False) -> DenseOutputs | MatcherOutputs:
    """The export module of ``model`` (eval mode): MatchStereo / MatchFlow with the model's
    default low-resolution initialisation and refinement (``lri`` / ``refine`` choose, as in
    :func:`crossview.estimate_disparity`), or the network alone with ``bare``; a stereo model
    that fuses by default (``fuse=None``; ``fuse=False``: as one that does not) the fused run's
    network for pairs of ``size`` ``(H, W)`` (:func:`fused_module`; ``preset`` as in
    :func:`crossview.estimate_disparity`); with ``self_fuse`` (stereo) the network alone with
    the runs that ``--self-fuse`` fuses. A :class:`UserError` for a model that cannot be
    exported or options it does not take."""
    task = getattr(model, "task", None)
    name = getattr(model, "model_name", type(model).__name__)
    if task in ("stereo", "flow") and is_dense(model):
        if bare and (lri or refine):
            raise UserError("--bare exports the network alone: no --lri, no --refine")
        if bare and (fuse or preset is not None or self_fuse):
            raise UserError("--bare exports the network alone: no --fuse, no --preset, no "
                            "--self-fuse")
        if self_fuse and (task != "stereo" or fuse or preset is not None):
            raise UserError("--self-fuse exports a stereo network's runs, which "
                            "crossview.runtime fuses with each other instead of with SGBM: "
                            "no --fuse, no --preset, no flow model")
        if self_fuse:
            return DenseOutputs(model, lri=initialises_low(model, lri),
                                refine=refines(model, refine), self_fuse=True).eval()
        if task == "flow" and fuse:
            raise UserError("only stereo files are fused (crossview.runtime runs the SGBM "
                            "fusion); a flow file holds the network alone: drop --fuse")
        if task == "stereo" and not bare and fuses(model, fuse):
            if size is None:
                raise ValueError("a fused export needs the size of its pairs")
            return fused_module(model, size, lri=lri, refine=refine, preset=preset)
        if preset is not None:
            raise UserError("--preset sets the fused run: the network alone (--no-fuse, --bare, "
                            "a flow model) takes none")
        if bare:
            return DenseOutputs(model, bare=True).eval()
        return DenseOutputs(model, lri=initialises_low(model, lri),
                            refine=refines(model, refine)).eval()
    if task == "semantic" and is_keypoint_matcher(model):
        if bare or lri is not None or refine is not None or fuse or preset is not None:
            raise UserError(f"{name} is exported whole: --bare, --lri, --refine, --fuse and "
                            "--preset are MatchStereo / MatchFlow options")
        return MatcherOutputs(model).eval()
    raise UserError(f"model {name!r} ({task}) cannot be exported to ONNX; export a dense "
                    "(stereo, flow) or a TransforMatcher model")


def fused_module(model: nn.Module, size: tuple[int, int], *, lri: bool | None = None,
                 refine: bool | None = None, preset: str | None = None) -> DenseOutputs:
    """The network of a fusing stereo run of ``model`` on pairs of ``size = (H, W)``, as
    :func:`crossview.models.dense.inference.predict_fields` runs it: at the working size
    (:func:`~crossview.models.dense.inference.working_size`), resized inside to the network's
    size with its lri and refinement (:func:`~crossview.models.dense.inference.network_settings`;
    ``lri``, ``refine``, ``preset`` as there); the module's ``fused`` record holds what
    :mod:`crossview.runtime` needs for the rest (row alignment, SGBM runs, median passes,
    the fusion's thresholds)."""
    name = getattr(model, "model_name", type(model).__name__)
    settings = fused_settings(model, "stereo", preset)
    work = working_size(model, "stereo", True, None, size, preset=preset) or tuple(size)
    run_lri, run_refine, run_size = network_settings(model, "stereo", True, lri, refine, None,
                                                     work, preset=preset)
    runs, medians = (None, None) if settings is None else fusion_work("stereo", settings)
    options = "".join(f" --{'' if value else 'no-'}{option}" for option, value in (
        ("lri", lri), ("refine", refine)) if value is not None)
    record = FusedFile(
        size=tuple(size), working_size=work, network_size=run_size or work,
        align_px=None if settings is None else settings.align_px,
        runs=sgbm_fusion.FUSION_SGBM_RUNS if runs is None else runs,
        medians=sgbm_fusion.EDGE_MEDIANS if medians is None else medians,
        constants=fusion_constants(), model=name, preset=preset,
        same_as=f"crossview stereo --model {name}"
        + (f" --preset {preset}" if preset is not None else "") + options)
    return DenseOutputs(model, lri=run_lri, refine=run_refine, size=run_size,
                        fused=record).eval()


def check_size(model: nn.Module, size: tuple[int, int], *, bare: bool = False) -> None:
    """A :class:`UserError` unless ``model`` runs on ``size`` ``(H, W)`` images: at least
    the model's minimum less the padding (MatchStereo / MatchFlow), with ``bare`` multiples of
    32 and at least the minimum (no padding); the model's ``image_size`` square
    (TransforMatcher)."""
    h, w = size
    name = getattr(model, "model_name", type(model).__name__)
    if getattr(model, "task", None) == "semantic":
        side = model.image_size
        if (h, w) != (side, side):
            raise UserError(f"--size {h}x{w}: {name} takes only {side}x{side} images")
        return
    if bare and (h % STRIDE or w % STRIDE):
        raise UserError(f"--size {h}x{w}: the bare {name} needs sides that are multiples of "
                        f"{STRIDE} (no padding inside), e.g. {_round_up(h)}x{_round_up(w)}")
    least_h, least_w = model.min_shape(model.task)
    if not bare:  # padded inside to multiples of 32
        least_h, least_w = least_h - STRIDE + 1, least_w - STRIDE + 1
    if h < least_h or w < least_w:
        raise UserError(f"--size {h}x{w}: {name} needs at least {least_h}x{least_w} for "
                        f"{model.task}")


def file_metadata(module: DenseOutputs | MatcherOutputs, size: tuple[int, int],
                  dynamic: bool) -> dict[str, str]:
    """What an exported file computes, as its ONNX ``metadata_props`` record it:
    ``crossview.model``, ``crossview.task``, ``crossview.size`` (``HxW``, or ``any multiples
    of 32`` for a dynamic file), and for MatchStereo / MatchFlow ``crossview.padding``,
    ``crossview.lri``, ``crossview.refine`` (``on`` / ``off``), ``crossview.same_as`` (the
    command whose result the file gives) and ``crossview.lacks`` (what that command does by
    default and the file does not: empty when nothing); a fused stereo file (the module's
    ``fused`` record) also its record's entries
    (:meth:`crossview.runtime.fused_file.FusedFile.metadata`), its ``same_as`` answered with
    :mod:`crossview.runtime`."""
    model = module.model
    name = getattr(model, "model_name", type(model).__name__)
    task = getattr(model, "task", "semantic")
    meta = {"crossview.model": name, "crossview.task": task,
            "crossview.size": "any multiples of 32" if dynamic else f"{size[0]}x{size[1]}"}
    if isinstance(module, MatcherOutputs):
        return meta
    if module.fused is not None:
        return {**meta, **module.fused.metadata(),
                "crossview.padding": "inside (edge replication to multiples of 32)",
                "crossview.lri": "on" if module.lri else "off",
                "crossview.refine": "on" if module.refine else "off",
                "crossview.same_as": module.fused.same_as, "crossview.lacks": ""}
    dropped = dropped_defaults(module)
    if module.self_fuse:
        meta["crossview.self_fusion_scales"] = scales_text(SELF_FUSION_SCALES)
    meta.update({
        "crossview.padding": "none (H and W multiples of 32)" if module.bare
        else "inside (edge replication to multiples of 32)",
        "crossview.lri": "on" if module.lri else "off",
        "crossview.refine": "on" if module.refine else "off",
        "crossview.same_as": f"crossview {module.task} --model {name}"
        + "".join(f" {option}" for option, _ in dropped),
        "crossview.lacks": ", ".join(what for _, what in dropped)})
    return meta


def self_fused_same_as(metadata: dict[str, str]) -> str | None:
    """The command whose answer :class:`crossview.runtime.SelfFusedStereo` gives on a file of
    these ``metadata`` (:func:`file_metadata`): a stereo network file of one size with the
    self-fusion's runs (``--self-fuse``); ``None`` for any other file."""
    try:
        network_file_size(metadata, "")
    except UserError:
        return None
    return self_fused_command(metadata["crossview.same_as"])


def dropped_defaults(module: DenseOutputs) -> list[tuple[str, str]]:
    """``(option, what)`` for each step ``crossview stereo`` / ``flow`` do by default for
    ``module``'s model and the module does not: ``("--no-lri", "low-resolution
    initialisation")``, ``("--no-refine", "photometric refinement")``, and for a model that
    fuses by default ``("--no-fuse", "SGBM fusion")`` (stereo) or ``("--no-fuse", "DIS
    fusion")`` (flow) (OpenCV is not in an ONNX graph)."""
    model = module.model
    fusion = "SGBM fusion" if module.task == "stereo" else "DIS fusion"
    return [(option, what) for option, what, default, chosen in (
        ("--no-lri", "low-resolution initialisation", initialises_low(model, None), module.lri),
        ("--no-refine", "photometric refinement", refines(model, None), module.refine),
        ("--no-fuse", fusion, fuses(model, None), False))
        if default and not chosen]


def _round_up(n: int) -> int:
    return -(-n // STRIDE) * STRIDE


def example_inputs(size: tuple[int, int], seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """A random pair ``[1, 3, H, W]`` in 0..255: the second is the first shifted 4 px left
    plus noise (a plausible stereo / flow pair)."""
    generator = torch.Generator().manual_seed(seed)
    first = torch.rand(1, 3, *size, generator=generator) * 255
    noise = torch.rand(1, 3, *size, generator=generator) * 8
    return first, (torch.roll(first, -4, dims=3) + noise).clamp(0, 255)


def _dynamic_shapes(module: nn.Module) -> dict[str, dict[int, object]]:
    """Height and width as multiples of 32 (at least the model's minimum) for a bare
    MatchStereo / MatchFlow network."""
    least_h, least_w = module.model.min_shape(module.task)
    rows = torch.export.Dim("rows32", min=least_h // STRIDE)
    cols = torch.export.Dim("cols32", min=least_w // STRIDE)
    axes = {2: STRIDE * rows, 3: STRIDE * cols}
    return dict.fromkeys(INPUT_NAMES, axes)


def export_onnx(model: nn.Module, path: str | os.PathLike[str], size: tuple[int, int], *,
                lri: bool | None = None, refine: bool | None = None, bare: bool = False,
                dynamic: bool | None = None, fuse: bool | None = None,
                preset: str | None = None, self_fuse: bool = False) -> tuple[str, ...]:
    """Write ``model`` as an ONNX file at ``path`` (atomically: a failed export leaves
    nothing), traced at ``size`` ``(H, W)`` (a fused stereo file: at its working size),
    computing :func:`export_module` ``(model, lri=, refine=, bare=, fuse=, size=, preset=,
    self_fuse=)``,
    its :func:`file_metadata` in the file. ``dynamic`` keeps height and width free (a bare
    MatchStereo / MatchFlow only; default: on for those). The trace and the translation are
    each announced (:func:`crossview.long_step.long_step`). Returns the output names.

    Raises :class:`UserError` for a model that cannot be exported, a size it cannot take, a
    dynamic file that is not a bare network, or a missing exporter package.
    """
    for module_name in ("onnx", "onnxscript"):
        require(module_name)
    module = export_module(model.cpu().float(), lri=lri, refine=refine, bare=bare, fuse=fuse,
                           size=size, preset=preset, self_fuse=self_fuse)
    check_size(model, size, bare=bare)
    dense = isinstance(module, DenseOutputs)
    traced = module.fused.working_size if dense and module.fused is not None else size
    if dynamic is None:
        dynamic = dense and bare
    if dynamic and not (dense and bare):
        raise UserError("only a bare MatchStereo / MatchFlow network exports with dynamic "
                        "height and width (--bare)")
    name = getattr(model, "model_name", type(model).__name__)
    where = f"{name} at {traced[0]}x{traced[1]}"
    with using_backend("export"), _quiet_exporter(), torch.no_grad():
        with long_step(f"tracing {where} (torch.export)"):
            program = torch.export.export(
                module, example_inputs(traced),
                dynamic_shapes=_dynamic_shapes(module) if dynamic else None)
        with long_step(f"translating {where} to ONNX"):
            onnx_program = torch.onnx.export(
                program, dynamo=True, verbose=False, optimize=False,
                input_names=list(INPUT_NAMES), output_names=list(module.output_names))
    onnx_program.model.metadata_props.update(file_metadata(module, size, dynamic))
    with atomic_output(path) as staged:
        onnx_program.save(str(staged), external_data=False)
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


def run_onnx(session: object, image0: torch.Tensor, image1: torch.Tensor) -> list[np.ndarray]:
    """The outputs of an :func:`onnx_session` on a pair ``[1, 3, H, W]`` (float 0..255)."""
    feeds = {name: image.detach().cpu().float().numpy()
             for name, image in zip(INPUT_NAMES, (image0, image1), strict=True)}
    return session.run(None, feeds)


def compare_with_crossview(module: DenseOutputs | MatcherOutputs,
                           path: str | os.PathLike[str], size: tuple[int, int], *,
                           seed: int = 1) -> dict[str, tuple[float, float]]:
    """Run the file at ``path`` (exported from ``module``) with onnxruntime and crossview's
    own inference on a pair of ``size`` that the trace did not see (:func:`example_inputs`
    with ``seed``): for MatchStereo / MatchFlow :func:`crossview.estimate_disparity` /
    :func:`crossview.estimate_flow` with the module's lri and refinement (what ``crossview
    stereo`` / ``flow`` give with the options of :func:`file_metadata`'s ``same_as``; the
    default MatchAttention backend, not the export one), for TransforMatcher the module.

    Returns per output (``disparity`` or ``flow`` and ``valid``; ``coords``) the mean and the
    largest ``|onnxruntime - crossview|`` (a mask: the fraction of differing pixels, twice;
    a shape mismatch: infinite); a self-fusion file also its runtime's answer
    (:func:`compare_self_fused`).
    """
    if isinstance(module, DenseOutputs) and module.fused is not None:
        return compare_fused(module, path, size, seed=seed)
    pair = example_inputs(size, seed=seed)
    got = run_onnx(onnx_session(path, run_once=True), *pair)
    names = module.output_names
    if isinstance(module, DenseOutputs):
        options = {"lri": module.lri, "refine": module.refine}
        if module.task == "stereo":
            result = api.estimate_disparity(*pair, model=module.model, fuse=False, **options)
        else:
            result = api.estimate_flow(*pair, model=module.model, **options)
        expected = (result.disparity if module.task == "stereo" else result.flow, result.valid)
        got, names = got[1:3], names[1:3]  # the fields are what the main output is made of
    else:
        with torch.inference_mode():
            expected = module(*pair)
    infinite = float("inf")
    differences = {name: (_compare(want, have, lambda d: float(d.mean()), infinite),
                          _compare(want, have, lambda d: float(d.max()), infinite))
                   for name, want, have in zip(names, expected, got, strict=True)}
    if isinstance(module, DenseOutputs) and module.self_fuse:
        differences |= compare_self_fused(module, path, size, seed=seed)
    return differences


def uint8_example(size: tuple[int, int], seed: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`example_inputs` as RGB uint8 ``[H, W, 3]`` images (rounded)."""
    left, right = (as_uint8(x[0].permute(1, 2, 0).numpy())
                   for x in example_inputs(size, seed=seed))
    return left, right


def compare_self_fused(module: DenseOutputs, path: str | os.PathLike[str],
                       size: tuple[int, int], *, seed: int = 1) -> dict[str, tuple[float, float]]:
    """A self-fusion file (``module.self_fuse``) run by
    :class:`crossview.runtime.SelfFusedStereo` against :func:`crossview.estimate_disparity`
    with ``self_fuse=True`` and the module's lri and refinement on a uint8 pair of ``size``
    that the trace did not see (:func:`uint8_example`). Returns for ``self-fused disparity``
    the mean and the largest ``|runtime - crossview|`` (px)."""
    left, right = uint8_example(size, seed)
    got = SelfFusedStereo(path)(left, right).left
    want = api.estimate_disparity(left, right, model=module.model, lri=module.lri,
                                  refine=module.refine, self_fuse=True).disparity[0].numpy()
    difference = np.abs(got - want)
    return {"self-fused disparity": (float(difference.mean()), float(difference.max()))}


def compare_fused(module: DenseOutputs, path: str | os.PathLike[str], size: tuple[int, int],
                  *, seed: int = 1) -> dict[str, tuple[float, float]]:
    """A fused stereo file (``module.fused`` set) run by :mod:`crossview.runtime` against
    :func:`crossview.models.dense.inference.predict_fields` with the same settings (the
    record's ``same_as``) on a uint8 pair of ``size`` that the trace did not see
    (:func:`example_inputs` with ``seed``, rounded). Returns for ``disparity`` and
    ``right_disparity`` the mean and the largest ``|runtime - crossview|`` (px)."""
    left, right = uint8_example(size, seed)
    got = FusedStereo(path)(left, right)
    field = predict_fields(module.model, left, right, "stereo", lri=module.lri,
                           refine=module.refine, preset=module.fused.preset).field.numpy()
    expected = field_to_disparity(field[0]), field_to_disparity(field[1], "right")
    return {name: (float(np.abs(have - want).mean()), float(np.abs(have - want).max()))
            for name, want, have in zip(("disparity", "right_disparity"), expected,
                                        (got.left, got.right), strict=True)}


def max_differences(expected: tuple[torch.Tensor, ...], got: list[np.ndarray],
                    names: tuple[str, ...]) -> dict[str, float]:
    """Per output: the largest absolute difference (float outputs) or the fraction of
    differing elements (bool masks) between PyTorch's ``expected`` and onnxruntime's ``got``;
    a shape mismatch is infinite."""
    return {name: _compare(want, have, lambda d: float(d.max()), float("inf"))
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
