"""Start a deeper MatchStereo / MatchFlow from a trained shallower one, computing the same.

More decoder layers per scale add capacity where a small network stops improving. Given the
weights of a network that differs from ``model`` only by fewer MatchAttention layers per
decoder scale, :func:`grow_into` copies every trained parameter and makes each extra layer (the
trained ones come first in every scale) the identity: its three residual outputs (the self- and
cross-MatchAttention projections and the ConvGLU's last linear map) are zeroed, so ``model``
returns exactly the trained network's fields (function-preserving growth, as in Net2Net, Chen et
al., ICLR 2016) and training continues from there. ``crossview train CONFIG --init-weights W
--grow`` does this with the config's ``model.overrides.decoder_layers``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import torch
from torch import nn

from crossview.errors import UserError

# The residual branches of a MatchAttentionLayer: with these zero the layer is the identity.
RESIDUAL_OUTPUTS = ("match_attention_self.proj.weight", "match_attention_cross.proj.weight",
                    "mlp.fc2.weight", "mlp.fc2.bias")
_LAYER_KEY = re.compile(r"match_attentions\.(\d+)\.layers\.(\d+)\.(.+)")


def trained_depths(state: Mapping[str, torch.Tensor]) -> dict[int, int]:
    """Decoder layers per scale in a MatchStereo state dict: ``{scale: layer count}``."""
    depths: dict[int, int] = {}
    for key in state:
        if match := _LAYER_KEY.fullmatch(key):
            scale, layer = int(match[1]), int(match[2])
            depths[scale] = max(depths.get(scale, 0), layer + 1)
    return depths


def grow_into(model: nn.Module, state: Mapping[str, torch.Tensor],
              source: str = "weights") -> None:
    """Load ``state`` (a shallower network's weights) into the deeper ``model`` in place.

    Raises :class:`UserError` naming the first offending key unless ``state`` holds exactly
    ``model``'s parameters (same shapes) minus whole decoder layers at the end of each scale.
    """
    old = trained_depths(state)
    target = model.state_dict()
    unexpected = sorted(set(state) - set(target))
    if unexpected:
        raise UserError(f"{source}: cannot grow into this model, unexpected key {unexpected[0]}")
    grown = {}
    for key, value in target.items():
        match = _LAYER_KEY.fullmatch(key)
        is_new = match is not None and int(match[2]) >= old.get(int(match[1]), 0)
        if is_new:
            grown[key] = torch.zeros_like(value) if match[3] in RESIDUAL_OUTPUTS else value
        elif key not in state:
            raise UserError(f"{source}: cannot grow into this model, missing key {key}")
        elif state[key].shape != value.shape:
            raise UserError(f"{source}: cannot grow into this model, {key} has shape "
                            f"{tuple(state[key].shape)}, the model {tuple(value.shape)}")
        else:
            grown[key] = state[key]
    model.load_state_dict(grown)
