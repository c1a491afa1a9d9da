"""What an ONNX file of a fused stereo default records for :mod:`crossview.runtime`: the pair
size it takes, the sizes it works at, the lining up of the rows and the SGBM fusion's work, in
the file's ``metadata_props`` (written by :func:`crossview.export.onnx.export_onnx`, read
here; the one place the keys are named).

The graph holds the network part of the fused run (``crossview stereo``'s default): inputs
``image0``, ``image1`` ``[1, 3, h, w]`` float32 0..255 at the working size (the right image's
rows lined up), resized inside to the network's size, padded to multiples of 32, run, and the
fields resized back; output ``field [2, h, w, 2]`` px (left view first). What surrounds it,
numpy and OpenCV, is :class:`crossview.runtime.stereo.FusedStereo`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from crossview.errors import UserError
from crossview.models.dense import sgbm_fusion

FUSION = "sgbm"  # crossview.fusion of a fused stereo file


def fusion_constants() -> dict[str, Any]:
    """The installed SGBM fusion's thresholds and lengths
    (:mod:`crossview.models.dense.sgbm_fusion`), as a file records them: a file runs only
    with the fusion it was exported with."""
    return {"sgbm_check_px": sgbm_fusion.FUSION_SGBM_CHECK_PX,
            "sgbm_uniqueness": sgbm_fusion.FUSION_SGBM_UNIQUENESS,
            "consistency_px": sgbm_fusion.FUSION_CONSISTENCY_PX,
            "network_run_px": sgbm_fusion.FUSION_NETWORK_RUN_PX,
            "tone_match_min_grey": sgbm_fusion.TONE_MATCH_MIN_GREY,
            "out_of_view": sgbm_fusion.OUT_OF_VIEW}


@dataclass(frozen=True)
class FusedFile:
    """A fused stereo file's record.

    Attributes:
        size: ``(H, W)`` of the pairs the file takes.
        working_size: ``(h, w)`` of the graph's inputs: ``size``, or the pair resized (aspect
            kept) when it has more pixels than the model fuses whole
            (:func:`crossview.models.dense.inference.working_size`).
        network_size: ``(h', w')`` the network runs at inside the graph.
        align_px: the row offset from which the right image is lined up
            (:mod:`crossview.models.dense.vertical_alignment`; ``None``: never).
        runs: the fusion's SGBM runs (:data:`~crossview.models.dense.sgbm_fusion.FUSION_SGBM_RUNS`
            or the first of them).
        medians: the fusion's colour-weighted median passes
            (of :data:`~crossview.models.dense.sgbm_fusion.EDGE_MEDIANS`).
        constants: :func:`fusion_constants` at export.
        model: the model's name; ``preset``: the speed preset of the run (``None``: the
            model's own); ``same_as``: the command whose answer the file gives.
    """

    size: tuple[int, int]
    working_size: tuple[int, int]
    network_size: tuple[int, int]
    align_px: float | None
    runs: tuple[dict, ...]
    medians: tuple[dict, ...]
    constants: dict[str, Any]
    model: str
    preset: str | None
    same_as: str

    def metadata(self) -> dict[str, str]:
        """The record's own ``metadata_props`` entries (``crossview.*`` keys, string values);
        ``crossview.size``, ``crossview.model`` and ``crossview.same_as`` are every dense
        file's (:func:`crossview.export.onnx.file_metadata`)."""
        return {"crossview.fusion": FUSION,
                "crossview.working_size": _size_text(self.working_size),
                "crossview.network_size": _size_text(self.network_size),
                "crossview.align_px": json.dumps(self.align_px),
                "crossview.fusion_runs": json.dumps(list(self.runs)),
                "crossview.fusion_medians": json.dumps(list(self.medians)),
                "crossview.fusion_constants": json.dumps(self.constants, sort_keys=True),
                "crossview.preset": json.dumps(self.preset)}

    @classmethod
    def read(cls, metadata: Mapping[str, str], path: str) -> FusedFile:
        """The record of the file at ``path`` (named in errors) from its ``metadata``; a
        :class:`UserError` for a file that is not a fused stereo file, or one exported with
        another fusion than the installed one."""
        if metadata.get("crossview.fusion") != FUSION:
            raise UserError(f"{path}: not a fused stereo file (export the default stereo model "
                            "with `crossview export onnx --model matchstereo-hybrid --size HxW "
                            "-o FILE`; a file of the network's runs, --self-fuse, runs with "
                            "--self-fuse)")
        try:
            record = cls(size=_size(metadata["crossview.size"]),
                         working_size=_size(metadata["crossview.working_size"]),
                         network_size=_size(metadata["crossview.network_size"]),
                         align_px=json.loads(metadata["crossview.align_px"]),
                         runs=tuple(json.loads(metadata["crossview.fusion_runs"])),
                         medians=tuple(json.loads(metadata["crossview.fusion_medians"])),
                         constants=json.loads(metadata["crossview.fusion_constants"]),
                         model=metadata["crossview.model"],
                         preset=json.loads(metadata["crossview.preset"]),
                         same_as=metadata["crossview.same_as"])
        except (KeyError, ValueError) as error:
            raise UserError(f"{path}: its crossview metadata is incomplete or damaged "
                            f"({error})") from None
        if record.constants != json.loads(json.dumps(fusion_constants())):
            raise UserError(f"{path}: exported with other fusion thresholds than this "
                            "crossview's; export it again with this version")
        return record


def _size_text(size: tuple[int, int]) -> str:
    return f"{size[0]}x{size[1]}"


def _size(text: str) -> tuple[int, int]:
    """``"HxW"`` as ``(H, W)``; a ``ValueError`` otherwise."""
    h, w = text.split("x")
    return int(h), int(w)
