"""The network's self-fused answer (``crossview stereo --self-fuse``) from an exported ONNX file
of the network alone, with numpy and onnxruntime only (no OpenCV matcher, no torch).

``crossview export onnx --model matchstereo-hybrid --size HxW --self-fuse -o FILE`` writes the
network as ``crossview stereo --no-fuse`` runs it (padding, low-resolution initialisation and
refinement inside; one pair size) with the runs ``--self-fuse`` fuses: on the pair and on the
pair mirrored left to right with its images swapped, at each scale of
:data:`crossview.models.dense.self_fusion.SELF_FUSION_SCALES`. :class:`SelfFusedStereo` runs
that file once and fuses the runs and then the two views as ``--self-fuse`` does, with the
same numpy function (:func:`crossview.models.dense.self_fusion.self_fused_pair`).

Example::

    stereo = SelfFusedStereo("network-375x450.onnx")
    result = stereo("left.png", "right.png")
    result.left  # [375, 450] float32 px
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from crossview.errors import UserError
from crossview.models.dense.self_fusion import SELF_FUSION_SCALES, self_fused_pair
from crossview.runtime.images import ImageInput, network_input, read_pair
from crossview.runtime.session import onnx_session
from crossview.runtime.stereo import StereoResult


class SelfFusedStereo:
    """A stereo network file of one pair size with the self-fusion's runs (``crossview export
    onnx --self-fuse``) ready to run: ``SelfFusedStereo(path, threads=0)`` (onnxruntime's
    intra-op threads; 0: its default), then ``stereo(left, right)`` on paths or RGB uint8
    ``[H, W, 3]`` arrays of the file's :attr:`size`. A :class:`crossview.errors.UserError`
    for a file that is not such a file or images it does not take."""

    def __init__(self, path: str | os.PathLike[str], threads: int = 0) -> None:
        self.session = onnx_session(path, threads)
        metadata = self.session.get_modelmeta().custom_metadata_map
        self.size = network_file_size(metadata, str(path))
        self.same_as = self_fused_command(metadata["crossview.same_as"])

    def __call__(self, left: ImageInput, right: ImageInput) -> StereoResult:
        image0, image1 = read_pair(left, right, self.size)
        x0, x1 = network_input(image0), network_input(image1)
        fields, mirrors = self.session.run(["fields", "mirrors"], {"image0": x0, "image1": x1})
        left_view, right_view = self_fused_pair([image0, image1], list(fields), list(mirrors))
        return StereoResult(left_view, right_view, 0.0)


def network_file_size(metadata: Mapping[str, str], path: str) -> tuple[int, int]:
    """The pair size ``(H, W)`` of a stereo network file of one size with the self-fusion's
    runs at :data:`~crossview.models.dense.self_fusion.SELF_FUSION_SCALES`, from its
    ``metadata``; a :class:`UserError` naming ``path`` for any other file (a fused default, a
    bare network, the network alone, runs at other scales, a flow or keypoint model)."""
    export = "crossview export onnx --model MODEL --size HxW --self-fuse -o FILE"
    if metadata.get("crossview.task") != "stereo":
        raise UserError(f"{path}: not a stereo network file (export one with `{export}`)")
    if "crossview.fusion" in metadata:
        raise UserError(f"{path}: a fused default's file, which holds the network as the SGBM "
                        f"fusion runs it; --self-fuse needs the network's own runs: `{export}`")
    size = metadata.get("crossview.size", "")
    if not metadata.get("crossview.padding", "").startswith("inside") or "x" not in size:
        raise UserError(f"{path}: a bare network file (no padding, any size); --self-fuse "
                        f"needs the network's runs as `crossview stereo --self-fuse` runs them: "
                        f"`{export}`")
    if "crossview.same_as" not in metadata:
        raise UserError(f"{path}: its crossview metadata is incomplete (no crossview.same_as); "
                        f"export it again: `{export}`")
    scales = metadata.get("crossview.self_fusion_scales")
    if scales is None:
        raise UserError(f"{path}: the network alone, one run; --self-fuse needs the runs it "
                        f"fuses (the pair and its mirror at each scale): `{export}`")
    if scales != scales_text(SELF_FUSION_SCALES):
        raise UserError(f"{path}: runs at the scales {scales} of the pair; this crossview "
                        f"self-fuses runs at {scales_text(SELF_FUSION_SCALES)}: export it "
                        f"again: `{export}`")
    h, w = size.split("x")
    return int(h), int(w)


def scales_text(scales: tuple[float, ...]) -> str:
    """``scales`` as a file's ``crossview.self_fusion_scales`` records them: ``"1 1.5"``."""
    return " ".join(f"{scale:g}" for scale in scales)


def self_fused_command(same_as: str) -> str:
    """The command whose answer :class:`SelfFusedStereo` gives, from the file's ``same_as``
    (the network alone's command)."""
    if " --no-fuse" in same_as:
        return same_as.replace(" --no-fuse", " --self-fuse")
    return f"{same_as} --self-fuse"
