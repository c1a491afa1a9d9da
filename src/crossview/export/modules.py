"""Export modules: a model wrapped to take two image tensors and return only its final outputs
(a tuple of tensors, as exporters want), instead of the dict of intermediate fields the models
return.

- :class:`DenseOutputs` (any dense network, :mod:`crossview.models.dense.contract`):
  ``field``, then ``disparity`` or ``flow``, then ``valid``;
- :class:`MatcherOutputs` (TransforMatcher): ``coords``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import nn

from crossview.geometry.consistency import noc_mask
from crossview.geometry.disparity import field_to_disparity
from crossview.models.dense.inference import (
    CONSISTENCY_THRESHOLD,
    network_fields,
    refine_fields,
)
from crossview.models.dense.self_fusion import self_fusion_sizes

if TYPE_CHECKING:
    from crossview.runtime.fused_file import FusedFile

INPUT_NAMES = ("image0", "image1")


class DenseOutputs(nn.Module):
    """A dense network (stereo or flow, :class:`crossview.models.dense.contract.DenseNetwork`)
    with its final outputs only.

    ``forward(image0, image1)``, images ``[B, 3, H, W]`` float 0..255, computes what
    :func:`crossview.estimate_disparity` / :func:`crossview.estimate_flow` compute for them
    (:func:`~crossview.models.dense.inference.network_fields`: padding to multiples of 32
    inside, the half-resolution pass with ``lri``; then the photometric refinement with
    ``refine``), or with ``bare`` the network alone (H and W multiples of 32, no padding, no
    low-resolution initialisation, no refinement: the shape-free graph of a dynamic export).
    With ``size = (h, w)`` the network runs on the pair resized to that size and its fields
    are resized back (:func:`~crossview.models.dense.inference.network_fields`'s fixed
    resolution, as a fusing run of a model with ``fused_network`` runs its network). ``fused``:
    the record of the fused run whose network the module is
    (:class:`crossview.runtime.fused_file.FusedFile`), which :mod:`crossview.runtime`
    completes with the row alignment and the SGBM fusion; its file's inputs are the pair at
    the record's working size, the right image's rows lined up. ``self_fuse`` (stereo): also
    the runs ``crossview stereo --self-fuse`` fuses, which
    :class:`crossview.runtime.SelfFusedStereo` fuses with numpy.
    Returns

    - ``field [2B, H, W, 2]``: both views' full-resolution fields in px (the first images'
      rows first);
    - ``disparity [B, H, W]`` (stereo, positive px) or ``flow [B, 2, H, W]`` (flow, (x, y)
      px) of the first images;
    - ``valid [B, H, W]`` bool: the first images' consistency mask (8 px, as
      :func:`crossview.estimate_disparity`);
    - with ``self_fuse``, ``fields [S, 2B, H, W, 2]`` and ``mirrors [S, 2B, H, W, 2]``: both
      views' fields at the pair's size of the runs on the pair and on the pair mirrored left
      to right with its images swapped (as that run gives them), one per scale of
      :data:`crossview.models.dense.self_fusion.SELF_FUSION_SCALES` (``fields[0]`` is
      ``field``).
    """

    def __init__(self, model: nn.Module, *, lri: bool = False, refine: bool = False,
                 bare: bool = False, size: tuple[int, int] | None = None,
                 fused: FusedFile | None = None, self_fuse: bool = False) -> None:
        super().__init__()
        if bare and (lri or refine or size is not None or fused is not None or self_fuse):
            raise ValueError(f"a bare network has no lri, refinement, size or fusion, got "
                             f"{lri=}, {refine=}, {size=}, {fused=}, {self_fuse=}")
        if self_fuse and (model.task != "stereo" or size is not None or fused is not None):
            raise ValueError(f"self_fuse runs a stereo network alone at the pair's size, got "
                             f"{model.task}, {size=}, {fused=}")
        self.model = model
        self.task = model.task
        self.lri, self.refine, self.bare, self.size, self.fused = lri, refine, bare, size, fused
        self.self_fuse = self_fuse
        self.output_names = ("field", "disparity" if self.task == "stereo" else "flow", "valid",
                             *(("fields", "mirrors") if self_fuse else ()))

    def forward(self, image0: torch.Tensor, image1: torch.Tensor) -> tuple[torch.Tensor, ...]:
        if self.bare:
            field = self.model.forward_fields(image0, image1, task=self.task)["field"]
        else:
            field = self._run(image0, image1, self.size)
        batch = image0.shape[0]
        first = field[:batch]
        main = field_to_disparity(first) if self.task == "stereo" else first.permute(0, 3, 1, 2)
        outputs = (field, main, noc_mask(field, CONSISTENCY_THRESHOLD)[:batch])
        if not self.self_fuse:
            return outputs
        sizes = self_fusion_sizes(tuple(image0.shape[-2:]))
        fields = [field, *(self._run(image0, image1, at) for at in sizes[1:])]
        mirrors = [self._run(image1.flip(-1), image0.flip(-1), at) for at in sizes]
        return (*outputs, torch.stack(fields), torch.stack(mirrors))

    def _run(self, image0: torch.Tensor, image1: torch.Tensor,
             size: tuple[int, int] | None) -> torch.Tensor:
        """Both views' fields ``[2B, H, W, 2]`` of the network (at ``size``, resized back),
        refined when :attr:`refine`."""
        field = network_fields(self.model, image0, image1, self.task, lri=self.lri,
                               size=size)[0]
        return refine_fields(image0, image1, field, self.task) if self.refine else field


class MatcherOutputs(nn.Module):
    """A keypoint matcher (:class:`~crossview.models.keypoints.contract.KeypointMatcher`, such
    as TransforMatcher) with its final output only: ``forward(image0, image1)``, images
    ``[B, 3, S, S]`` float 0..255 (S = the model's ``image_size``), returns ``coords
    [B, G, G, 2]``: the normalised target (x, y) of every source cell (grid frame, see
    :meth:`~crossview.models.keypoints.contract.KeypointMatcher.transfer`)."""

    output_names = ("coords",)

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, image0: torch.Tensor, image1: torch.Tensor) -> tuple[torch.Tensor]:
        return (self.model(image0, image1)["coords"],)
