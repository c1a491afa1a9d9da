"""Dense (stereo / flow) inference on image pairs of any size, and its memory check, for any
network that keeps :class:`crossview.models.dense.contract.DenseNetwork`.

Inputs are padded to a multiple of 32 by edge replication (height on the top, width on the
right, as the published MatchStereo inference does) and the outputs cropped back. With
``size`` the pair runs at a fixed resolution and the fields are resized back; with ``lri`` a
half-resolution pass gives the initial field (low-resolution initialisation); with ``init`` a
field the caller has (the previous frame's, a warm start) gives it instead.
:func:`predict_fields` is what :func:`crossview.estimate_disparity` and
:func:`crossview.estimate_flow` run; :func:`dense_predictor` runs it on benchmark samples.
"""

from __future__ import annotations

import contextlib
import logging
import math
import numbers
from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from crossview import memory
from crossview.data.image_batch import ImageLike, as_image_batch, sample_image, uint8_images
from crossview.device import resolve_device
from crossview.errors import UserError
from crossview.geometry.confidence import attention_peak
from crossview.geometry.consistency import consistency_error
from crossview.geometry.disparity import field_to_disparity
from crossview.geometry.pair_order import warn_if_swapped
from crossview.geometry.photometric_refinement import refine_field
from crossview.models.dense import dis_fusion, sgbm_fusion
from crossview.models.dense.dis_fusion import fuse_with_dis
from crossview.models.dense.presets import fused_settings
from crossview.models.dense.self_fusion import (
    fuse_with_itself,
    mirrored,
    mirrored_fields,
    self_fusion_sizes,
)
from crossview.models.dense.sgbm_fusion import fuse_with_sgbm
from crossview.models.dense.vertical_alignment import NOTED_OFFSET_PX, measure_rows, rows_shifted
from crossview.models.registry import FusedNetwork, Predictor

log = logging.getLogger(__name__)

NETWORK_ALONE = "network"  # the predictor variant of a fusing model without the fusion
# the predictor variant of a fusing stereo model with its views fused with each other instead
SELF_FUSED = "self-fused"
SELF_FUSED_CAPTION = ("network self-fused: the network alone, its views fused with each other "
                      "(--self-fuse)")
RECTIFY_HINT_PX = 2.0  # a row offset at which the note points to crossview rectify
# the caption of the network-alone row, per task: what the fusion adds
NETWORK_ALONE_CAPTIONS = {"stereo": "network alone: the same model without the SGBM fusion",
                          "flow": "network alone: the same model without the DIS fusion"}
PRECISIONS = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
CONSISTENCY_THRESHOLD = 8.0  # px, as the published inference script
# Fixed-resolution inference also holds full-size tensors besides the run: the float images,
# their resized copies, and the fields and self relative positions resized back (measured: 131
# B per input pixel for size=(256, 256) on 3008x3008, see crossview.models.matchstereo.memory).
RESIZE_BYTES_PER_PIXEL = 150
# Photometric refinement: peak bytes per pixel of each field it refines (measured with
# refine_field on two 3-channel views: 443 B at 800x800, 332 B at 1600x1600).
REFINE_BYTES_PER_PIXEL = 450
# The fusion with the classical matcher: peak bytes per pixel of the pair above its inputs
# (measured with fuse_with_sgbm: 234 B at 1000x1500, 194 B at 2000x3000; fuse_with_dis: 591 B
# at 1000x1500), with a margin
FUSE_BYTES_PER_PIXEL = {"stereo": 300, "flow": 650}


class MemoryAdvice(NamedTuple):
    """What a refused run can change, in the words of its caller: ``resize`` (smaller inputs or
    a smaller fixed resolution), and ``no_refine``, the switch that turns the photometric
    refinement off (offered only when the refinement runs)."""

    resize: str = "pass a smaller size=(H, W) (fixed-resolution inference) or smaller images"
    no_refine: str = "refine=False"


LIBRARY_ADVICE = MemoryAdvice()  # the words of the library's own arguments

def check_memory(model: nn.Module, height: int, width: int, *, task: str, batch: int = 1,
                 lri: bool | None = None, size: tuple[int, int] | None = None,
                 device: str | torch.device = "cpu", advice: MemoryAdvice = LIBRARY_ADVICE,
                 refine: bool | None = None, fuse: bool = False) -> int | None:
    """Refuse (:class:`UserError`) a :func:`predict_fields` run on ``batch`` pairs of
    ``height x width`` px that needs more memory than ``device`` has
    (:func:`crossview.memory.available_memory`), before anything is allocated.

    The estimate is the model's own (``model.inference_bytes(batch, H, W, task)`` at the padded
    run size, calibrated in :mod:`crossview.models.matchstereo.memory`), plus that of the
    half-resolution pass with ``lri`` (resolved as in :func:`predict_fields`; measured at
    1024x1024: 34 % above the plain run), plus
    :data:`RESIZE_BYTES_PER_PIXEL` per input pixel with ``size``; with the photometric
    refinement (``refine``, resolved as in :func:`predict_fields`), which runs after the network
    has freed its buffers, at least :data:`REFINE_BYTES_PER_PIXEL` per pixel of both views'
    fields at the input size; with the fusion (``fuse``), which also runs after the network,
    at least :data:`FUSE_BYTES_PER_PIXEL` per pixel of the pair. ``advice`` says what to change
    (the CLI names its options).
    Returns the estimate in bytes (``None`` for
    models that cannot estimate, which are not checked).
    """
    estimate = getattr(model, "inference_bytes", None)
    if estimate is None:
        return None
    run_h, run_w = size if size is not None else (height, width)
    needed = estimate(batch, _ceil32(run_h), _ceil32(run_w), task)
    if initialises_low(model, lri):
        needed += estimate(batch, _ceil32(run_h // 2), _ceil32(run_w // 2), task)
    hint = advice.resize
    if refines(model, refine):  # the full-resolution refinement can be what does not fit
        needed = max(needed, REFINE_BYTES_PER_PIXEL * 2 * batch * height * width)
        hint += f", or pass {advice.no_refine}"
    if fuse:
        needed = max(needed, FUSE_BYTES_PER_PIXEL[task] * batch * height * width)
    if size is not None:
        needed += RESIZE_BYTES_PER_PIXEL * batch * height * width
    run = f"{run_h}x{run_w} px" + (f" (images of {height}x{width} px resized)"
                                    if size is not None else "")
    what = f"{getattr(model, 'model_name', type(model).__name__)} at {run}" + (
        f", batch {batch}" if batch > 1 else "")
    memory.check_memory(needed, what, hint, resolve_device(device))
    return needed


class Fields(NamedTuple):
    """What :func:`predict_fields` returns (all float32 but ``valid``, rows as the model's)."""

    field: torch.Tensor  # [2B, H, W, 2] px: the first images' fields, then the second images'
    self_rpos: torch.Tensor  # [2B, H, W, 2] px
    valid: torch.Tensor  # [2B, H, W] bool, the consistency mask
    attention_peak: torch.Tensor | None  # [2B, H, W] in [0, 1]; None: no attention weights
    # [2B] in [0, 1]: each view's share of pixels the network answers in a fused stereo run
    # (sgbm_fusion.FusedFields); None: not fused with SGBM
    network_share: torch.Tensor | None = None
    # [B] px: the offset each pair's right rows were lined up by (row_offsets; 0: not lined
    # up); None: a run that does not line rows up
    row_offset: torch.Tensor | None = None
    # [2B, H, W] px: the fields' consistency error, which ``valid`` thresholds
    # (crossview.geometry.consistency.consistency_error)
    consistency_error: torch.Tensor | None = None


def predict_fields(model: nn.Module, img0: ImageLike, img1: ImageLike, task: str, *,
                   device: str | torch.device = "cpu", precision: str = "fp32",
                   lri: bool | None = None, size: tuple[int, int] | None = None,
                   threshold: float = CONSISTENCY_THRESHOLD, refine: bool | None = None,
                   advice: MemoryAdvice = LIBRARY_ADVICE, fuse: bool | None = None,
                   init: torch.Tensor | None = None, preset: str | None = None,
                   row_offset: torch.Tensor | float | None = None,
                   self_fuse: bool = False) -> Fields:
    """Both views' fields of a pair (or batch of pairs) at full resolution.

    Args:
        model: a MatchStereo network (stereo or flow); moved to ``device``.
        img0, img1: the pair in any form of :func:`crossview.data.image_batch.as_image_batch`.
        precision: ``"fp32"``, ``"bf16"`` or ``"fp16"`` (autocast; fields stay float32).
        lri: low-resolution initialisation: a half-resolution pass gives the initial field
            (skipped for images whose half is below the model's least size);
            ``None``: ``model.lri_by_default`` (set by :func:`crossview.load_model` from the
            registry; off for a bare network).
        size: fixed-resolution inference ``(H, W)``: run the network at that size, resize
            its fields back; a fusing run runs whole (network, refinement and fusion) at that
            size (:func:`working_size`).
        threshold: consistency threshold in px of the mask.
        refine: polish both fields with
            :func:`crossview.geometry.photometric_refinement.refine_field` (stereo along x
            only); ``None``: ``model.refine_by_default`` (set by :func:`crossview.load_model`
            from the registry; off for a bare network).
        advice: what a run refused for its memory (:func:`check_memory`) tells to change.
        fuse: fuse both views' fields with the classical matcher's, after the refinement:
            stereo with OpenCV SGBM's (:func:`crossview.models.dense.sgbm_fusion.fuse_with_sgbm`),
            flow with OpenCV DIS's (:func:`crossview.models.dense.dis_fusion.fuse_with_dis`);
            ``None``: ``model.fuse_by_default`` (set by :func:`crossview.load_model` from the
            registry; off for a bare network). A fusing run of a model with
            ``model.fused_network`` takes its ``lri``, ``refine`` and ``size`` (a scale of the
            pair) from there where they are ``None`` (:func:`network_settings`), and runs
            whole at :func:`working_size` on pairs of more than its ``max_pixels`` (unless a
            ``size`` is given).
        init: a warm start: both views' fields ``[2B, h, w, 2]`` (px, as ``field`` returns
            them; any ``h x w``, e.g. the previous frame's) that start the network in place of
            its correlation (and of the half-resolution pass of ``lri``), converted to the
            token grid of the size the network runs at (:func:`init_tokens`).
        preset: a fusing run's speed preset, ``"fast"``, ``"balanced"`` or ``"best"``
            (:mod:`crossview.models.dense.presets`), laid over ``model.fused_network``;
            ``None``: the model's own. A :class:`UserError` for a run that does not fuse or a
            model without ``fused_network``.
        row_offset: the right images' row offsets ``[B]`` (px at the pair's size), measured
            before (``Fields.row_offset`` of an earlier pair from the same rig: a stream
            measures them once in a while, :class:`crossview.api.StereoSequence`): lined up
            by these instead of measuring them again (:func:`row_offsets`); ``None``:
            measured. A :class:`UserError` for a run that does not line rows up.
        self_fuse: stereo without the classical matcher: the network (and the refinement)
            run a second time on the pair mirrored left to right with its images swapped
            (``init`` mirrored likewise), each pixel of each view taken from the run whose two
            views agree better there, then both views' fields fused with each other
            (:mod:`crossview.models.dense.self_fusion`: the network's left-right consistent
            pixels kept, the rest filled along the row, the edge medians and the out-of-view
            strip; ``self_rpos`` and the attention peak stay the pair's own run's); it runs
            instead of the SGBM fusion (``fuse=None`` then means off; ``fuse=True`` with it
            is a :class:`UserError`).

    Returns:
        :class:`Fields`: ``field [2B, H, W, 2]`` (the first images' fields, then the second
        images'), the self relative positions ``[2B, H, W, 2]`` (px), the consistency mask
        ``[2B, H, W]`` bool (:func:`crossview.geometry.consistency.noc_mask`) and the last
        cross-attention layer's peak sharpness ``[2B, H, W]``
        (:func:`crossview.geometry.confidence.attention_peak`, upsampled bilinearly; ``None``
        for a model without ``attn_to_proj``), on ``device``, and the rows' offsets the run
        lined up by (``row_offset [B]`` px; ``None``: a run that does not line rows up), and
        the consistency error ``[2B, H, W]`` px that the mask thresholds at ``threshold``
        (:func:`crossview.geometry.consistency.consistency_error`).
    """
    target = resolve_device(device)
    dtype = PRECISIONS.get(precision)
    if dtype is None:
        raise UserError(f"unknown precision {precision!r}; choose one of {', '.join(PRECISIONS)}")
    size = _run_size(size)
    if size is not None:
        _check_size(model, *size, task, f"size={size} is")
    x0, x1 = as_image_batch(img0, "first image"), as_image_batch(img1, "second image")
    _check_init(init, x0.shape[0])
    fuse = fuses_with_classical(model, task, fuse, self_fuse)
    fused_settings(model, task, preset)  # an unknown preset, or one the model cannot take
    if preset is not None and not fuse:
        raise UserError(f"the preset {preset!r} sets how the network runs with the fusion; "
                        "without it the network runs with its own settings (lri, refine)")
    shape = tuple(x0.shape[-2:])
    work = working_size(model, task, fuse, size, shape, preset=preset)
    if work is not None and x0.shape == x1.shape:
        lri, refine, run_size = network_settings(model, task, True, lri, refine, None, work,
                                                 preset=preset)
        # the full-size images and fields besides the run at the working size
        check_memory(model, *shape, task=task, batch=x0.shape[0], lri=lri,
                     size=run_size or work, device=target, refine=False, advice=advice)
        fields = _predict(model, _images_at(x0, work), _images_at(x1, work), task, target,
                          dtype, lri=lri, refine=refine, size=run_size, threshold=threshold,
                          advice=advice, fuse=True, init=init, preset=preset,
                          row_offset=None if row_offset is None
                          else row_offset * (work[0] / shape[0]))
        return _fields_at(fields, shape, threshold)
    lri, refine, size = network_settings(model, task, fuse, lri, refine, size, shape,
                                         preset=preset)
    return _predict(model, x0, x1, task, target, dtype, lri=lri, refine=refine, size=size,
                    threshold=threshold, advice=advice, fuse=fuse, init=init, preset=preset,
                    row_offset=row_offset, self_fuse=self_fuse)


def fuses_with_classical(model: nn.Module, task: str, fuse: bool | None,
                         self_fuse: bool) -> bool:
    """Whether a run fuses with the classical matcher (:func:`fuses`), ``self_fuse`` checked
    against it: a stereo run's alternative to that fusion, so off where it is on."""
    if not self_fuse:
        return fuses(model, fuse)
    if task != "stereo":
        raise UserError("self_fuse fuses a stereo network's two views; flow has no such option")
    if fuse:
        raise UserError("self_fuse fuses the network's two views with each other instead of "
                        "with SGBM: leave fuse off")
    return False


def _predict(model: nn.Module, x0: torch.Tensor, x1: torch.Tensor, task: str,
             target: torch.device, dtype: torch.dtype, *, lri: bool, refine: bool,
             size: tuple[int, int] | None, threshold: float, advice: MemoryAdvice,
             fuse: bool, init: torch.Tensor | None = None, preset: str | None = None,
             row_offset: torch.Tensor | float | None = None,
             self_fuse: bool = False) -> Fields:
    """:func:`predict_fields` on image batches ``[B, 3, H, W]`` (0..255) with its settings
    resolved: checked, then the network (at ``size`` if given), the refinement and the fusion
    (or, ``self_fuse``, the views fused with each other) at the pair's own size (its work as
    ``preset`` sets it)."""
    if (lri or init is not None) and not getattr(model, "accepts_init_field", False):
        raise UserError(f"model {getattr(model, 'model_name', type(model).__name__)!r} has no "
                        "low-resolution initialisation (lri) and no warm start (init)")
    if x0.shape[0] != x1.shape[0]:
        raise UserError(f"the two images differ in batch size: the first holds {x0.shape[0]} "
                        f"images, the second {x1.shape[0]} ([B, 3, H, W])")
    if x0.shape != x1.shape:
        raise UserError(f"the two images differ in size: {tuple(x0.shape[-2:])} and "
                        f"{tuple(x1.shape[-2:])} (H, W)")
    if size is None or fuse:  # the pair itself is matched: refused before any matcher runs
        _check_size(model, *x0.shape[-2:], task)
    runs = self_fusion_sizes(tuple(x0.shape[-2:]), size) if self_fuse else [size]
    largest = max(runs, key=lambda s: 0 if s is None else s[0] * s[1])
    check_memory(model, *x0.shape[-2:], task=task, batch=x0.shape[0], lri=lri, size=largest,
                 device=target, refine=refine, advice=advice, fuse=fuse)
    _move(model, target)
    x0, x1 = x0.to(target), x1.to(target)
    offsets = row_offsets(model, task, fuse, x0, x1, preset=preset, measured=row_offset)
    lined_up = offsets is not None and bool(offsets.any())
    if lined_up:
        x1 = _rows_shifted(x1, offsets)
    autocast = (torch.autocast(target.type, dtype=dtype) if dtype != torch.float32
                else contextlib.nullcontext())
    init = None if init is None else init.to(target)

    def answer(first: torch.Tensor, second: torch.Tensor, start: torch.Tensor | None,
               at: tuple[int, int] | None = size
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        with autocast:
            field, rpos, peak = network_fields(model, first, second, task, lri=lri, size=at,
                                               init=start)
        field = field.float()
        if refine:
            field = refine_fields(first, second, field, task)
        return field, rpos.float(), None if peak is None else peak.float()

    with torch.inference_mode():
        field, rpos, peak = answer(x0, x1, init)
        share = None
        if fuse:
            field, share = fuse_fields(x0, x1, field, task, fused_settings(model, task, preset))
        elif self_fuse:
            back = None if init is None else mirrored_fields(init)
            fields = [field, *(answer(x0, x1, init, at)[0] for at in runs[1:])]
            mirrors = [answer(mirrored(x1), mirrored(x0), back, at)[0] for at in runs]
            field = fuse_with_itself(x0, x1, fields, mirrors)
        if lined_up:
            field, rpos, peak = _rows_back(field, rpos, peak, offsets)
    return _fields(field, rpos, peak, threshold, share,
                   None if offsets is None else offsets.to(field.device))


def _fields(field: torch.Tensor, rpos: torch.Tensor, peak: torch.Tensor | None,
            threshold: float, share: torch.Tensor | None,
            offset: torch.Tensor | None) -> Fields:
    """:class:`Fields` of ``field [2B, H, W, 2]`` with its consistency error and, thresholded
    at ``threshold`` px, its mask."""
    error = consistency_error(field)[0]
    return Fields(field, rpos, error < threshold, peak, share, offset, error)


def _move(model: nn.Module, target: torch.device) -> None:
    """``model`` moved to ``target`` unless its first weight is there already (``Module.to``
    visits every weight and buffer: about 10 ms a pair for the bundled stereo model)."""
    first = next(model.parameters(), None)
    if first is None or first.device != target:
        model.to(target)


def fuse_fields(x0: torch.Tensor, x1: torch.Tensor, field: torch.Tensor, task: str,
                settings: FusedNetwork | None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Both views' fields ``[2B, H, W, 2]`` of the pair ``x0, x1 [B, 3, H, W]`` fused with the
    classical matcher's (stereo: SGBM, flow: DIS), making the runs and median passes that
    ``settings`` keeps (:class:`crossview.models.registry.FusedNetwork`; ``None``: all;
    :func:`fusion_work`); with, for stereo, each view's share ``[2B]`` of pixels the network
    answers (:class:`~crossview.models.dense.sgbm_fusion.FusedFields`; flow: ``None``)."""
    work = {} if settings is None else dict(zip(("runs", "medians"),
                                                fusion_work(task, settings), strict=True))
    if task == "stereo":
        return fuse_with_sgbm(x0, x1, field, **work)
    return fuse_with_dis(x0, x1, field, **work), None


def fusion_work(task: str, settings: FusedNetwork
                ) -> tuple[tuple[dict, ...] | None, tuple[dict, ...] | None]:
    """The classical runs and colour-weighted median passes a fusion with ``settings`` makes:
    the first ``classical_runs`` of the task's runs (stereo
    :data:`~crossview.models.dense.sgbm_fusion.FUSION_SGBM_RUNS`, flow
    :data:`~crossview.models.dense.dis_fusion.FLOW_DIS_RUNS`) and the passes of
    :data:`~crossview.models.dense.sgbm_fusion.EDGE_MEDIANS` that ``median_passes`` names;
    ``None`` for all (the fusion's own)."""
    # the fusions' constants read when the run starts (tests and studies set them)
    runs = sgbm_fusion.FUSION_SGBM_RUNS if task == "stereo" else dis_fusion.FLOW_DIS_RUNS
    passes, medians = settings.median_passes, sgbm_fusion.EDGE_MEDIANS
    if passes is not None and any(i >= len(medians) for i in passes):
        raise ValueError(f"median_passes index the {len(medians)} passes of EDGE_MEDIANS, "
                         f"got {passes}")
    return (None if settings.classical_runs is None else runs[:settings.classical_runs],
            None if passes is None else tuple(medians[i] for i in passes))


def row_offsets(model: nn.Module, task: str, fuse: bool, x0: torch.Tensor,
                x1: torch.Tensor, *, preset: str | None = None,
                measured: torch.Tensor | float | None = None) -> torch.Tensor | None:
    """Per pair of ``x0, x1 [B, 3, H, W]`` (0..255) the vertical offset ``[B]`` px that a
    fusing stereo run of a model whose ``fused_network.align_px`` is set lines its right
    image up by (:func:`crossview.models.dense.vertical_alignment.measure_rows`, or
    ``measured``, the offsets ``[B]`` px measured before; 0 where it is below ``align_px``),
    or ``None``: the run lines no rows up (a :class:`UserError` if ``measured`` is given).
    Measured offsets of at least :data:`NOTED_OFFSET_PX` are logged at INFO (the command
    shows them as ``note:`` lines); from :data:`RECTIFY_HINT_PX` the note points to
    ``crossview rectify`` (photographs taken by hand are turned as well as offset, which one
    offset does not undo). A pair whose matches say it was given right image first gets a
    warning (:func:`crossview.geometry.pair_order.warn_if_swapped`). ``preset``: as in
    :func:`predict_fields`."""
    settings = fused_settings(model, task, preset) if fuse and task == "stereo" else None
    if settings is None or settings.align_px is None:
        if measured is not None:
            raise UserError("row_offset lines up the rows of a fused stereo run of a model "
                            "that lines rows up (fused_network.align_px); this run does not")
        return None
    if measured is not None:
        offsets = torch.as_tensor(measured, dtype=torch.float32).detach().cpu().reshape(-1)
        if offsets.shape != (x0.shape[0],):
            raise UserError(f"row_offset holds {offsets.numel()} offsets for "
                            f"{x0.shape[0]} pair(s)")
    else:
        offsets = _measured_offsets(x0, x1)
    return torch.where(offsets.abs() >= settings.align_px, offsets, 0.0)


def _measured_offsets(x0: torch.Tensor, x1: torch.Tensor) -> torch.Tensor:
    """:func:`measure_rows` of each pair of ``x0, x1 [B, 3, H, W]`` (0..255): offsets ``[B]``
    px, with :func:`row_offsets`' notes and swapped-pair warnings."""
    measures = [measure_rows(a, b, consistency=_consistency_of_arrays)
                for a, b in zip(uint8_images(x0), uint8_images(x1), strict=True)]
    for measure in measures:
        warn_if_swapped(measure.disparities, tolerance=NOTED_OFFSET_PX)
    offsets = torch.tensor([measure.offset for measure in measures], dtype=torch.float32)
    for offset in offsets.tolist():
        if abs(offset) >= NOTED_OFFSET_PX:
            hint = ("; two photographs taken by hand: rectify them first (`crossview stereo "
                    "--rectify`)" if abs(offset) >= RECTIFY_HINT_PX else "")
            log.info("the right image's rows lie %.1f px %s the left's: lined up before matching "
                     "(a pair that is not quite rectified)%s", abs(offset),
                     "below" if offset > 0 else "above", hint)
    return offsets


def _consistency_of_arrays(fields: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`crossview.geometry.consistency.consistency_error` of numpy fields
    ``[2B, H, W, 2]``: what :mod:`crossview.geometry.consistency_arrays` computes (the same
    numbers where torch's CPU kernels use fused multiply-adds), several times faster."""
    error, inside = consistency_error(torch.from_numpy(fields))
    return error.numpy(), inside.numpy()


def _rows_back(field: torch.Tensor, rpos: torch.Tensor, peak: torch.Tensor | None,
               offsets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """The fields ``[2B, H, W, 2]``, self relative positions and attention peaks ``[2B, H, W]``
    of a run whose right images were sampled ``offsets [B]`` rows further down
    (:func:`crossview.models.dense.vertical_alignment.rows_shifted`), back in the right images'
    own rows; the matches' y moved by the offsets (left views ``+offset``, right ``-offset``)."""
    b = offsets.shape[0]
    offsets = offsets.to(field.device)

    def back(x: torch.Tensor) -> torch.Tensor:  # [2B, H, W, C]: the right rows moved back
        right = _rows_shifted(x[b:].permute(0, 3, 1, 2), -offsets).permute(0, 2, 3, 1)
        return torch.cat([x[:b], right])

    field = back(field)
    field[..., 1] += torch.cat([offsets, -offsets])[:, None, None]
    peak = None if peak is None else back(peak[..., None])[..., 0]
    return field, back(rpos), peak


def _rows_shifted(x: torch.Tensor, by: torch.Tensor) -> torch.Tensor:
    """:func:`crossview.models.dense.vertical_alignment.rows_shifted` (numpy, shared with
    :mod:`crossview.runtime`) of ``x [N, C, H, W]`` by ``by [N]`` rows, on ``x``'s device."""
    shifted = rows_shifted(x.detach().cpu().numpy(), by.detach().cpu().numpy())
    return torch.from_numpy(shifted).to(x.device)


def network_fields(model: nn.Module, x0: torch.Tensor, x1: torch.Tensor, task: str, *,
                   lri: bool, size: tuple[int, int] | None = None,
                   init: torch.Tensor | None = None
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """The network's part of :func:`predict_fields` on float pairs ``[B, 3, H, W]`` (0..255,
    on the model's device): padded to multiples of 32 and cropped back, after a
    half-resolution pass with ``lri`` (skipped for pairs whose half is below the model's least
    size; a warm start ``init`` replaces it: :func:`init_tokens`), at the fixed resolution
    ``size`` if given. Plain tensor code on the pair's shape
    only, so that :mod:`crossview.export` traces the same computation.

    Returns ``field [2B, H, W, 2]``, ``self_rpos [2B, H, W, 2]`` (px, the first images' rows
    first) and the attention peak ``[2B, H, W]`` (``None`` without attention weights).
    """
    if size is None:
        return run_padded(model, x0, x1, task, lri, init)
    return _run_fixed(model, x0, x1, task, lri, size, init)


def refine_fields(x0: torch.Tensor, x1: torch.Tensor, field: torch.Tensor,
                  task: str) -> torch.Tensor:
    """Both views' fields ``[2B, H, W, 2]`` (as :func:`network_fields` gives them) polished by
    :func:`crossview.geometry.photometric_refinement.refine_field` against the pair
    ``[B, 3, H, W]`` (stereo: along x only)."""
    return refine_field(torch.cat([x0, x1]), torch.cat([x1, x0]), field,
                        horizontal=task == "stereo")


def dense_predictor(model: nn.Module, device: str, precision: str,
                    variant: str | None = None, *, refine: bool | None = None,
                    lri: bool | None = None, fuse: bool | None = None,
                    preset: str | None = None, self_fuse: bool = False) -> Predictor:
    """A :func:`crossview.eval.evaluate` predictor for a loaded dense model (its ``task``): the
    first view's disparity ``[H, W]`` (stereo) or forward flow ``[H, W, 2]`` (flow) of a
    sample's ``image0``, ``image1``; ``refine``, ``lri``, ``fuse``, ``preset``, ``self_fuse``
    as in :func:`predict_fields`. ``variant`` :data:`NETWORK_ALONE`: without the fusion (SGBM or
    DIS); :data:`SELF_FUSED` (stereo): the views fused with each other instead."""
    if variant not in (None, NETWORK_ALONE, SELF_FUSED):
        raise ValueError(f"dense models' variants are {NETWORK_ALONE!r} and {SELF_FUSED!r}, "
                         f"got {variant!r}")
    if variant is not None:
        fuse = False
    task = model.task

    def predict(sample: Mapping[str, Any]) -> torch.Tensor:
        field = predict_fields(model, sample_image(sample["image0"]),
                               sample_image(sample["image1"]), task, device=device,
                               precision=precision, refine=refine, lri=lri, fuse=fuse,
                               preset=preset, self_fuse=self_fuse or variant == SELF_FUSED
                               ).field
        return field_to_disparity(field[:1])[0] if task == "stereo" else field[0]

    return predict


def refines(model: nn.Module, refine: bool | None) -> bool:
    """Whether a run refines photometrically: ``refine``, or the model's default when
    ``None`` (``model.refine_by_default``, set by :func:`crossview.load_model`; off for a bare
    network)."""
    return bool(getattr(model, "refine_by_default", False)) if refine is None else refine


def fuses(model: nn.Module, fuse: bool | None) -> bool:
    """Whether a run fuses with the classical matcher (SGBM for stereo, DIS for flow):
    ``fuse``, or the model's default when ``None``
    (``model.fuse_by_default``, set by :func:`crossview.load_model`; off for a bare
    network)."""
    return bool(getattr(model, "fuse_by_default", False)) if fuse is None else fuse


def network_settings(model: nn.Module, task: str, fuse: bool, lri: bool | None,
                     refine: bool | None, size: tuple[int, int] | None,
                     shape: tuple[int, int], *, preset: str | None = None
                     ) -> tuple[bool, bool, tuple[int, int] | None]:
    """The ``(lri, refine, size)`` a run of ``model`` on ``shape = (H, W)`` pairs uses: what
    was asked, else the model's defaults; a fusing run (``fuse``) of a model with
    ``model.fused_network`` (:class:`crossview.models.registry.FusedNetwork`, set by
    :func:`crossview.load_model`; ``preset`` laid over it) takes that one's lri, refinement
    and scale instead (:func:`scaled_size`)."""
    settings = fused_settings(model, task, preset) if fuse else None
    if settings is None:
        return initialises_low(model, lri), refines(model, refine), size
    if size is None and settings.scale != 1:
        size = scaled_size(model, task, shape, settings.scale)
    return (settings.lri if lri is None else lri,
            settings.refine if refine is None else refine, size)


def scaled_size(model: nn.Module, task: str, shape: tuple[int, int], scale: float
                ) -> tuple[int, int] | None:
    """The size the network runs at on a pair of ``shape = (H, W)`` at ``scale`` of it:
    ``round(H * scale) x round(W * scale)``; where that is below the model's least size, the
    least size at the same aspect that the model takes (not the pair's own: a small scale of
    a small pair, as the fast presets' working size gives, stays a small network); ``None``
    where that reaches the pair's own size.

    >>> from crossview.models.matchstereo import MatchStereo, MatchStereoConfig
    >>> network = MatchStereo(MatchStereoConfig(dims=(8, 16, 16, 24), radii=(1, 1, 1, 1)))
    >>> network.min_shape("stereo")  # padded to multiples of 32
    (128, 160)
    >>> [scaled_size(network, "stereo", shape, 0.3) for shape in [(480, 640), (300, 400)]]
    [(144, 192), (97, 129)]
    """
    scaled = (round(shape[0] * scale), round(shape[1] * scale))
    if _fits(model, *scaled, task):
        return scaled
    least_h, least_w = model.min_shape(task)  # multiples of 32: padded up from 31 px less
    factor = max(scale, (least_h - 31) / shape[0], (least_w - 31) / shape[1])
    if factor >= 1:
        return None
    return (max(least_h - 31, round(shape[0] * factor)),
            max(least_w - 31, round(shape[1] * factor)))


def working_size(model: nn.Module, task: str, fuse: bool, size: tuple[int, int] | None,
                 shape: tuple[int, int], *, preset: str | None = None
                 ) -> tuple[int, int] | None:
    """The ``(H, W)`` a fusing run (``fuse``) of ``model`` on a pair of ``shape = (H, W)``
    works at, network, refinement and fusion together, or ``None`` for the pair as it is:
    the ``size`` asked, if one was; else the pair resized, aspect kept, to at most
    ``model.fused_network.max_pixels`` (:class:`crossview.models.registry.FusedNetwork`) when
    it has more pixels and that size is at least the model's least size (``preset`` as in
    :func:`predict_fields`). A run that does not fuse never has one (its ``size`` is the
    network's only)."""
    if not fuse:
        return None
    if size is not None:
        return None if tuple(size) == tuple(shape) else tuple(size)
    settings = fused_settings(model, task, preset)
    cap = None if settings is None else settings.max_pixels
    if cap is None or shape[0] * shape[1] <= cap:
        return None
    factor = math.sqrt(cap / (shape[0] * shape[1]))
    work = (max(1, math.floor(shape[0] * factor)), max(1, math.floor(shape[1] * factor)))
    return work if _fits(model, *work, task) else None


def _images_at(x: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """``[B, 3, H, W]`` images (0..255) resized to ``size`` (bilinear, antialiased when
    shrinking)."""
    return F.interpolate(x.float(), size=size, mode="bilinear", align_corners=False,
                         antialias=True)


def _fields_at(fields: Fields, shape: tuple[int, int], threshold: float) -> Fields:
    """``fields`` of a pair resized by :func:`_images_at`, resized back to ``shape = (H, W)``:
    bilinear, x values times ``W / w`` and y values times ``H / h``; the consistency mask
    recomputed at the full size."""
    h, w = fields.field.shape[1:3]
    factors = torch.tensor([shape[1] / w, shape[0] / h], device=fields.field.device)

    def vectors(field: torch.Tensor) -> torch.Tensor:
        return F.interpolate(field.permute(0, 3, 1, 2), size=shape, mode="bilinear",
                             align_corners=False).permute(0, 2, 3, 1) * factors

    peak = None if fields.attention_peak is None else F.interpolate(
        fields.attention_peak[:, None], size=shape, mode="bilinear", align_corners=False)[:, 0]
    field = vectors(fields.field)
    offset = None if fields.row_offset is None else fields.row_offset * (shape[0] / h)
    return _fields(field, vectors(fields.self_rpos), peak, threshold, fields.network_share,
                   offset)


def initialises_low(model: nn.Module, lri: bool | None) -> bool:
    """Whether a run starts from a half-resolution pass: ``lri``, or the model's default when
    ``None`` (``model.lri_by_default``, set by :func:`crossview.load_model`; off for a bare
    network)."""
    return bool(getattr(model, "lri_by_default", False)) if lri is None else lri


def _run_size(size: object) -> tuple[int, int] | None:
    """``size`` checked: ``None`` or ``(H, W)``, two positive ints."""
    if size is None:
        return None
    if (not isinstance(size, tuple | list) or len(size) != 2
            or not all(isinstance(v, numbers.Integral) and not isinstance(v, bool)
                       for v in size)):
        raise TypeError(f"size must be (H, W), two ints, got {size!r}")
    if min(size) < 1:
        raise ValueError(f"size must be positive (H, W), got {tuple(size)}")
    return int(size[0]), int(size[1])


def _run_fixed(model: nn.Module, x0: torch.Tensor, x1: torch.Tensor, task: str, lri: bool,
               size: tuple[int, int], init: torch.Tensor | None = None
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Fixed-resolution inference: resize to ``size``, run, resize the fields back, rescale."""
    h, w = x0.shape[-2:]
    _check_size(model, *size, task, f"size={size} is")
    field, rpos, peak = run_padded(model, _resize(x0, size), _resize(x1, size), task, lri, init)
    gain = torch.tensor([w / size[1], h / size[0]], device=field.device, dtype=field.dtype)
    if peak is not None:
        peak = _resize(peak[:, None], (h, w))[:, 0]
    return _resize_field(field, (h, w)) * gain, _resize_field(rpos, (h, w)) * gain, peak


def run_padded(model: nn.Module, x0: torch.Tensor, x1: torch.Tensor, task: str,
               lri: bool, init: torch.Tensor | None = None
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """One pass of ``x0, x1 [B, 3, H, W]`` (0..255) padded to multiples of 32, two with
    ``lri`` (the half-resolution pass only initialises: it carries no gradient); a warm start
    ``init`` (fields ``[2B, h, w, 2]`` px, any ``h x w``) initialises instead of both.

    Returns ``(field [2B, H, W, 2], self_rpos [2B, H, W, 2], attention peak [2B, H, W] or
    None)``, cropped to the input size; gradients flow to the model's weights unless the
    caller disables them (:func:`predict_fields` runs it in inference mode, test-time
    adaptation with gradients)."""
    h, w = x0.shape[-2:]
    if init is not None:
        init = init_tokens(init, h, w)
    # the half-resolution pass needs images of the model's least size: smaller pairs (which
    # hold small disparities anyway) start from the correlation as without lri
    elif lri and _fits(model, h // 2, w // 2, task):
        half = (h // 2, w // 2)
        with torch.no_grad():
            coarse = run_padded(model, _resize(x0, half), _resize(x1, half), task, lri=False)[0]
        init = _resize_field(coarse, (_ceil32(h) // 32, _ceil32(w) // 32)) * (2 / 32)
    _check_size(model, h, w, task)
    out = model.forward_fields(_pad(x0), _pad(x1), task=task,
                               **({} if init is None else {"init_field": init}))
    attn = out.get("cross_attn")
    peak = None
    if attn is not None:  # 1/4 resolution -> full, as self_rpos_up
        peak = F.interpolate(attention_peak(attn)[:, None], scale_factor=4, mode="bilinear",
                             align_corners=True)[:, 0, :, :, None]
        peak = _crop(peak, h, w)[..., 0]
    field = _crop(out["field"], h, w)
    rpos = out.get("self_rpos_up")  # absent: every pixel draws from itself
    return field, torch.zeros_like(field) if rpos is None else _crop(rpos, h, w), peak


def init_tokens(init: torch.Tensor, h: int, w: int) -> torch.Tensor:
    """A warm start's fields ``init [2B, h', w', 2]`` (px of ``h' x w'`` images) as the
    network's initial field for ``h x w`` images: ``[2B, ceil32(h)/32, ceil32(w)/32, 2]`` in
    1/32 tokens (resized as the half-resolution pass of ``lri`` is, values times
    ``(w / w', h / h') / 32``)."""
    gain = torch.tensor([w / init.shape[2], h / init.shape[1]], device=init.device) / 32
    return _resize_field(init.float(), (_ceil32(h) // 32, _ceil32(w) // 32)) * gain


def _check_init(init: torch.Tensor | None, batch: int) -> None:
    """A ``ValueError`` unless a warm start ``init`` is ``None`` or ``[2B, h, w, 2]`` for
    ``batch`` pairs."""
    if init is None:
        return
    if not isinstance(init, torch.Tensor):
        raise TypeError(f"init must be a tensor [2B, H, W, 2], got {type(init).__name__}")
    if init.ndim != 4 or init.shape[0] != 2 * batch or init.shape[3] != 2:
        raise ValueError(f"init must be both views' fields [2B, H, W, 2] = [{2 * batch}, H, W, "
                         f"2] for {batch} pair(s), got {init.shape=}")


def _fits(model: nn.Module, h: int, w: int, task: str) -> bool:
    """Whether ``h x w`` images, padded to multiples of 32, are at least the model's least
    size."""
    least_h, least_w = model.min_shape(task)
    return _ceil32(h) >= least_h and _ceil32(w) >= least_w


def _check_size(model: nn.Module, h: int, w: int, task: str, subject: str = "") -> None:
    """:class:`UserError` ``"{subject} too small ..."`` (default subject: the images)."""
    if not _fits(model, h, w, task):
        least_h, least_w = model.min_shape(task)
        subject = subject or f"images of {h}x{w} px are"
        raise UserError(f"{subject} too small: the model needs at least "
                        f"{least_h - 31}x{least_w - 31} px (HxW) for {task} (padded to "
                        f"multiples of 32, >= {least_h}x{least_w})")


def _ceil32(n: int) -> int:
    return -(-n // 32) * 32


def _pad(x: torch.Tensor) -> torch.Tensor:
    """Edge-replicate ``[B, 3, H, W]`` to multiples of 32: height on the top, width right."""
    h, w = x.shape[-2:]
    return F.pad(x, (0, _ceil32(w) - w, _ceil32(h) - h, 0), mode="replicate")


def _crop(field: torch.Tensor, h: int, w: int) -> torch.Tensor:
    """Undo :func:`_pad` on a channel-last ``[N, Hp, Wp, 2]`` field."""
    return field[:, field.shape[1] - h:, :w]


def _resize(x: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    return F.interpolate(x, size=size, mode="bilinear", align_corners=True)


def _resize_field(field: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """Bilinear (``align_corners=True``) resize of ``[N, h, w, 2]``; values unchanged. Resized
    as a contiguous ``[N, 2, h, w]``: torch's channels-last resize of two channels takes three
    times as long for the same numbers."""
    return _resize(field.permute(0, 3, 1, 2).contiguous(), size).permute(0, 2, 3, 1).contiguous()
