"""The contract of a keypoint-matching (semantic correspondence) network: what inference,
evaluation, training and ONNX export call, and nothing else.

A family matches keypoints when its network implements :class:`KeypointMatcher`; it is then run
by :func:`crossview.models.keypoints.inference.match_pair` (``crossview.match_keypoints``,
``crossview match``), scored by its spec's predictor (``crossview eval``, e.g.
:func:`crossview.models.transformatcher.inference.keypoint_predictor`), validated by its recipe
(``crossview train``) and exported by :class:`crossview.export.modules.MatcherOutputs`
(``crossview export onnx``).

Positions are normalised ``[-1, 1]`` (x, y) (:mod:`crossview.models.keypoints.coordinates`).
A network's dense output ``coords [B, G, G, 2]`` is the normalised target position of each
cell of a ``G x G`` grid over the source image, in a *grid frame* that may be offset from the
image frame by ``frame_shift``: :meth:`KeypointMatcher.transfer` takes image points through it.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from torch import Tensor


@runtime_checkable
class KeypointMatcher(Protocol):
    """What a keypoint-matching network provides.

    ``image_size``: the side ``S`` of the square images it takes (callers resize to it).

    ``frame_shift``: the offset (normalised units) of the grid frame from the image frame (0:
    none).

    ``forward(src, tgt)``: images ``[B, 3, S, S]`` float 0..255 -> a dict holding ``coords
    [B, G, G, 2]`` (and whatever the family's training reads).

    ``coords_both_ways(src, tgt)``: images ``[B, 3, S, S]`` -> ``(coords source -> target,
    coords target -> source)``, ``[B, G, G, 2]`` each.

    ``transfer(coords, keypoints, tau)``: normalised image points ``keypoints [B, N, 2]``
    through ``coords [B, G, G, 2]`` -> their normalised target image points ``[B, N, 2]``;
    ``tau``: the soft sampler's temperature.

    ``eval_tau``: the temperature inference and evaluation transfer keypoints with.

    Its spec registers it for task ``"semantic"`` (``crossview.load_model`` sets ``task``).
    """

    image_size: int
    eval_tau: float

    @property
    def frame_shift(self) -> float: ...

    def coords_both_ways(self, src: Tensor, tgt: Tensor) -> tuple[Tensor, Tensor]: ...

    def transfer(self, coords: Tensor, keypoints: Tensor, tau: float) -> Tensor: ...


def is_keypoint_matcher(model: object) -> bool:
    """Whether ``model`` keeps the :class:`KeypointMatcher` contract."""
    return isinstance(model, KeypointMatcher)
