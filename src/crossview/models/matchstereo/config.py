"""Configuration of MatchStereo / MatchFlow models (published variants and smaller ones)."""

from __future__ import annotations

from dataclasses import dataclass

from crossview.settings import SettingError, check, setting

REGRESSION_WINDOW = 5  # k of the initial windowed regression (tokens at 1/32)


@dataclass(frozen=True)
class MatchStereoConfig:
    """Everything that shapes a MatchStereo / MatchFlow network.

    Attributes:
        dims: encoder channels per stage, fine to coarse (1/4, 1/8, 1/16, 1/32). The decoder
            uses them reversed (coarse to fine).
        encoder_depths: ConvFormer blocks per encoder stage.
        decoder_layers: MatchAttention layers per decoder scale, coarse to fine (1/32 .. 1/4).
        radii: MatchAttention window radius per decoder scale, coarse to fine.
        heads: attention heads at every scale (each head has ``C / heads`` channels).
        attn_to_proj: feed the cross-attention weights to the output projection (Eq. 10-11).
        gating: gate the cross-attention output with ``SiLU(linear(x))``.
        noc_mask_embedding: append the running non-occlusion mask as a self-attention input.
        field_scale_init: initial value of each layer's learnable field scale.
        noc_threshold: L1 threshold (tokens) of the in-decoder consistency check.
        encoder_head: size of the unused classification head that published checkpoints carry
            (0 to drop it in new models).
        pretrained_features: ``""`` (the published design) or ``"efficientnet-lite0"``: add
            adapted frozen ImageNet features to every encoder scale (a crossview hybrid model,
            :mod:`crossview.models.matchstereo.pretrained_features`).

    Every field is type- and range-checked on construction
    (:class:`crossview.settings.SettingError`, a ``ValueError``, naming the field:
    ``heads must be int, got 'two'``).

    The published defaults are MatchStereo-T; see :data:`VARIANTS` for S and B. Smaller models
    for tests or fast training just change these fields, e.g.
    ``MatchStereoConfig(dims=(16, 32, 48, 64), encoder_depths=(1, 1, 1, 1),
    decoder_layers=(1, 1, 1, 1), heads=2, encoder_head=0)``.
    """

    dims: tuple[int, int, int, int] = setting((32, 64, 128, 160), low=1)
    encoder_depths: tuple[int, int, int, int] = setting((2, 2, 6, 2), low=0)
    decoder_layers: tuple[int, int, int, int] = setting((8, 8, 8, 2), low=0)
    radii: tuple[int, int, int, int] = setting((2, 2, 1, 1), low=0)
    heads: int = setting(4, low=1)
    attn_to_proj: bool = True
    gating: bool = True
    noc_mask_embedding: bool = True
    field_scale_init: float = setting(0.1, low=0, low_open=True)  # fields are divided by it
    noc_threshold: float = setting(2.0, low=0, low_open=True)
    encoder_head: int = setting(1000, low=0)
    pretrained_features: str = setting("", choices=("", "efficientnet-lite0"))

    def __post_init__(self) -> None:
        check(self)
        if any(dim % self.heads for dim in self.dims):
            raise SettingError(f"dims must each divide by heads={self.heads}, got {self.dims}")

    @property
    def decoder_dims(self) -> tuple[int, ...]:
        """Decoder channels per scale, coarse (1/32) to fine (1/4)."""
        return tuple(reversed(self.dims))

    @property
    def min_size(self) -> int:
        """Smallest padded map side (px) for MatchAttention: ``2r + 2`` tokens at every scale."""
        return max(s * (2 * r + 2) for s, r in zip((32, 16, 8, 4), self.radii, strict=True))

    def min_shape(self, task: str) -> tuple[int, int]:
        """Smallest padded ``(H, W)`` in px for ``task``.

        Besides :attr:`min_size`, the initial regression's k = 5 window needs 5 tokens at 1/32
        along the width (stereo searches along rows) or along both sides (flow).
        """
        regression = max(self.min_size, 32 * REGRESSION_WINDOW)
        return (regression if task == "flow" else self.min_size), regression


VARIANTS: dict[str, MatchStereoConfig] = {
    "tiny": MatchStereoConfig(dims=(32, 64, 128, 160)),
    "small": MatchStereoConfig(dims=(64, 128, 160, 320)),
    "base": MatchStereoConfig(dims=(128, 256, 320, 512)),
}
