"""Start a deeper MatchStereo / MatchFlow from a trained shallower one, computing the same.

More blocks add capacity where a small network stops improving. Given the weights of a network
that differs from ``model`` only by fewer MatchAttention layers per decoder scale and/or fewer
ConvFormer blocks per encoder stage, :func:`grow_into` copies every trained parameter and makes
each extra block (the trained ones come first in every scale or stage) the identity:

- a decoder MatchAttentionLayer's three residual outputs (the self- and cross-MatchAttention
  projections and the ConvGLU's last linear map) are zeroed;
- an encoder MetaFormerBlock's two residual outputs (the separable convolution's last linear
  map and the MLP's last linear map) are zeroed.

A model may also gain a module that starts as the identity by construction (see
:data:`GROWABLE_MODULES`: the hybrid encoder's adapted pretrained features, whose last layer is
zero); its parameters keep the model's own initial values.

So ``model`` returns exactly the trained network's fields (function-preserving growth, as in
Net2Net, Chen et al., ICLR 2016) and training continues from there. ``crossview train CONFIG
--init-weights W --grow`` does this with the config's ``model.overrides.decoder_layers`` and
``encoder_depths``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import torch
from torch import nn

from crossview.errors import UserError

# Residual blocks that may be appended, by state-dict key pattern (group 1: scale or stage,
# group 2: block index, group 3: the parameter inside the block), and the parameters that make
# such a block the identity when zero.
GROWABLE_BLOCKS = {
    "decoder": (re.compile(r"match_attentions\.(\d+)\.layers\.(\d+)\.(.+)"),
                ("match_attention_self.proj.weight", "match_attention_cross.proj.weight",
                 "mlp.fc2.weight", "mlp.fc2.bias")),
    "encoder": (re.compile(r"encoder\.stages\.(\d+)\.(\d+)\.(.+)"),
                ("token_mixer.pwconv2.weight", "mlp.fc2.weight")),
}

# Modules (state-dict key prefixes) that compute zero until trained, so a network may gain them.
GROWABLE_MODULES = ("feature_adapter.",)


def trained_depths(state: Mapping[str, torch.Tensor],
                   part: str = "decoder") -> dict[int, int]:
    """Blocks per scale (``part="decoder"``) or per encoder stage (``"encoder"``) in a
    MatchStereo state dict: ``{scale or stage: block count}``."""
    pattern, _ = GROWABLE_BLOCKS[part]
    depths: dict[int, int] = {}
    for key in state:
        if match := pattern.fullmatch(key):
            group, block = int(match[1]), int(match[2])
            depths[group] = max(depths.get(group, 0), block + 1)
    return depths


def _new_block_value(key: str, value: torch.Tensor, old: Mapping[str, dict[int, int]],
                     new_modules: tuple[str, ...]) -> torch.Tensor | None:
    """The starting value of ``key`` if it belongs to an appended block or module, else None."""
    if key.startswith(new_modules):
        return value
    for part, (pattern, residual_outputs) in GROWABLE_BLOCKS.items():
        match = pattern.fullmatch(key)
        if match is not None and int(match[2]) >= old[part].get(int(match[1]), 0):
            return torch.zeros_like(value) if match[3] in residual_outputs else value
    return None


def grow_into(model: nn.Module, state: Mapping[str, torch.Tensor],
              source: str = "weights") -> None:
    """Load ``state`` (a shallower network's weights) into the deeper ``model`` in place.

    Raises :class:`UserError` naming the first offending key unless ``state`` holds exactly
    ``model``'s parameters (same shapes) minus whole blocks at the end of decoder scales or
    encoder stages, keeping at least one trained block wherever ``model`` has blocks.
    """
    old = {part: trained_depths(state, part) for part in GROWABLE_BLOCKS}
    new_modules = tuple(p for p in GROWABLE_MODULES if not any(k.startswith(p) for k in state))
    target = model.state_dict()
    for part in GROWABLE_BLOCKS:
        for group in trained_depths(target, part):
            if group not in old[part]:
                kind = "scale" if part == "decoder" else "stage"
                raise UserError(f"{source}: cannot grow into this model, no trained block of "
                                f"{part} {kind} {group} (--grow only appends blocks)")
    unexpected = sorted(set(state) - set(target))
    if unexpected:
        raise UserError(f"{source}: cannot grow into this model, unexpected key {unexpected[0]}")
    grown = {}
    for key, value in target.items():
        new_value = _new_block_value(key, value, old, new_modules)
        if new_value is not None:
            grown[key] = new_value
        elif key not in state:
            raise UserError(f"{source}: cannot grow into this model, missing key {key}")
        elif state[key].shape != value.shape:
            raise UserError(f"{source}: cannot grow into this model, {key} has shape "
                            f"{tuple(state[key].shape)}, the model {tuple(value.shape)}")
        else:
            grown[key] = state[key]
    model.load_state_dict(grown)
