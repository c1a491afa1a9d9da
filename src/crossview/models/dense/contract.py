"""The contract of a dense (stereo / optical flow) network: what inference, evaluation,
training and ONNX export call, and nothing else.

A family is dense when its network implements :class:`DenseNetwork`; it is then run by
:func:`crossview.models.dense.inference.predict_fields` (``crossview.estimate_disparity`` /
``estimate_flow``, ``crossview stereo`` / ``flow``), scored by
:func:`~crossview.models.dense.inference.dense_predictor` (``crossview eval``), trained by the
field recipe (``crossview train``, :mod:`crossview.train.recipes.fields`) and exported by
:class:`crossview.export.modules.DenseOutputs` (``crossview export onnx``).

Fields are channel-last relative positions ``[N, H, W, 2]`` in pixels, (x, y): for stereo
the left view's field is ``(-disparity, 0)``, the right view's ``(+disparity, 0)``; for flow
the forward flow of the first frame and the backward flow of the second.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import torch


@runtime_checkable
class DenseNetwork(Protocol):
    """What a stereo / flow network provides.

    ``forward_fields(img0, img1, *, task, init_field=None)`` takes two image batches
    ``[B, 3, H, W]`` float 0..255 whose sides are multiples of 32 and at least
    :meth:`min_shape` (inference pads to them) and returns a dict holding

    - ``field [2B, H, W, 2]`` (required): both views' full-resolution fields in px, the first
      images' rows first (the second images' fields look back at the first);
    - ``self_rpos_up [2B, H, W, 2]`` (optional): where each pixel draws its information from
      (px); absent: every pixel from itself (zeros);
    - ``cross_attn`` (optional): the last cross-attention weights ``[2B, H/4, W/4, K]``, for
      the confidence's attention peak; absent: the confidence is the consistency alone;
    - for training (optional, each read by the loss term of that name,
      :func:`crossview.train.losses.training_loss`): ``init_field`` / ``init_cv`` (``init``),
      ``fields`` and ``field_kinds`` (intermediate fields, ``self`` and ``cross``).

    ``init_field`` ``[2B, H/32, W/32, 2]`` (in 32 px cells) is the field a low-resolution
    pass found; it is passed only to networks with ``accepts_init_field = True``.

    ``min_shape(task)``: the least padded ``(H, W)`` the network takes for ``task``.

    ``task``: ``"stereo"`` or ``"flow"`` (set by the registry when a model is loaded).

    Optional attributes: ``inference_bytes(batch, H, W, task)``, the memory a run needs
    (checked before it starts; absent: not checked); ``accepts_init_field`` (``True``: the
    half-resolution pass of low-resolution initialisation may run; absent: ``lri`` is refused).
    """

    task: str

    def forward_fields(self, img0: torch.Tensor, img1: torch.Tensor, *, task: str,
                       init_field: torch.Tensor | None = None) -> dict[str, torch.Tensor]: ...

    def min_shape(self, task: str) -> tuple[int, int]: ...


def is_dense(model: object) -> bool:
    """Whether ``model`` keeps the :class:`DenseNetwork` contract."""
    return isinstance(model, DenseNetwork)
