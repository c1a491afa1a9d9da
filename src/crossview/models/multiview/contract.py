"""The contract of a multi-view network: what training, validation and the camera studies
call, and nothing else.

A multi-view network takes a batch of posed views, by name (:attr:`MultiViewNetwork.inputs`,
the keys its task's samples use), and predicts something for every view it is asked about:
the target images of novel-view synthesis
(:class:`~crossview.models.multiview.model.MultiViewTransformer`) or the depth of every view
(:class:`~crossview.models.multiview.depth.MultiViewDepth`). Its recipe trains it
(``crossview train``: :mod:`crossview.train.recipes.novel_view`,
:mod:`~crossview.train.recipes.multiview_depth`), validates it with :func:`view_predictor` and
exports its :attr:`~MultiViewNetwork.config` with the weights.

Views are ``[B, V, 3, H, W]`` float 0..255 with ``(H, W)`` the config's ``image_size``;
intrinsics ``[B, V, 3, 3]`` in pixels; poses world-to-camera ``[B, V, 4, 4]``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable

import numpy as np
import torch
from torch import Tensor

from crossview.models.multiview.model import MultiViewConfig


@runtime_checkable
class MultiViewNetwork(Protocol):
    """What a multi-view network provides.

    ``inputs``: the names of :meth:`forward`'s tensors, in order (novel-view:
    ``context_images``, ``context_K``, ``context_viewmats``, ``target_K``,
    ``target_viewmats``; depth: ``images``, ``K``, ``viewmats``).

    ``forward(*tensors)``: those tensors, batched -> the prediction ``[B, V', ...]`` of each
    view asked about (novel-view: the target images ``[B, Vt, 3, H, W]`` 0..255; depth:
    ``[B, V, H, W]``).

    ``config``: its sizes and camera conditioning (:class:`MultiViewConfig`).

    Its spec registers it for task ``"novel-view"`` or ``"multiview-depth"``
    (``crossview.load_model`` sets ``task``).
    """

    config: MultiViewConfig
    inputs: tuple[str, ...]

    def forward(self, *tensors: Tensor) -> Tensor: ...


def is_multiview(model: object) -> bool:
    """Whether ``model`` keeps the :class:`MultiViewNetwork` contract."""
    return isinstance(model, MultiViewNetwork)


def view_predictor(model: MultiViewNetwork, device: torch.device | str = "cpu"
                   ) -> Callable[[Mapping[str, Any]], np.ndarray]:
    """A ``crossview.eval`` predictor: a sample (numpy, unbatched, holding ``model.inputs``)
    -> the network's prediction for it, ``[V', ...]`` float32 numpy."""
    if not is_multiview(model):
        raise TypeError(f"{type(model).__name__} is no multi-view network (it keeps no "
                        "MultiViewNetwork contract)")

    def predict(sample: Mapping[str, Any]) -> np.ndarray:
        inputs = (torch.as_tensor(np.asarray(sample[key], np.float32))[None].to(device)
                  for key in model.inputs)
        return model(*inputs)[0].float().cpu().numpy()

    return predict
