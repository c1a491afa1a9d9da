"""TransforMatcher: multi-layer correlation refined by match-to-match attention.

Pipeline for a pair of images ``[B, 3, S, S]`` (0..255, ``S = 16 * grid``, 240 by default):
backbone features of many layers -> multi-channel correlation ``[B, L, h, w, h, w]`` (Eq. 4) ->
one token per match, linear embedding of the ``L`` channels -> match-to-match layers with 4D
RoPE (Eq. 5-7) -> one score per match, added to the mean input correlation -> 4D bilinear x2
upsampling -> kernel soft-argmax (Eq. 10) -> dense map of target positions; keypoints are
transferred with the soft sampler (Eq. 11).

With ``extra_backbone`` (another ImageNet CNN of the same stage structure, e.g. EfficientNet-Lite2
beside Lite0) the correlation is the mean of the backbone's and the extra backbone's, the latter
resampled along depth to the backbone's layers (:func:`~.correlation.resample_layers`), so that a
refinement trained on the backbone alone reads it; the extra backbone stays frozen and is never
saved.

By default only the refinement (``head_state_dict``) is trained and shipped and the backbone
keeps its ImageNet weights. :meth:`TransforMatcher.tune_backbone` makes the backbone layers that
feed the correlation trainable (the paper fine-tunes them); a model whose backbone was tuned saves
and loads those layers with the refinement (:meth:`TransforMatcher.trained_state_dict`).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from crossview.attention.rope4d import match_positions, rope4d_angles, rope4d_rotation
from crossview.models.transformatcher.backbone import LAYER_STAGES, build_backbone
from crossview.models.transformatcher.correlation import (
    multilayer_correlation,
    resample_layers,
    upsample_correlation,
)
from crossview.models.transformatcher.layers import MatchToMatchLayer
from crossview.models.transformatcher.placement import FEATURES, placement_features
from crossview.models.transformatcher.softargmax import (
    hard_argmax,
    kernel_soft_argmax,
    soft_sample,
)

BACKBONE_LAYERS = {name: sum(stages) for name, stages in LAYER_STAGES.items()}
TASK = "semantic"  # the task recorded in exported weights (see crossview.models.weights)
EVAL_TAU = 0.05  # the soft sampler's temperature at inference and evaluation (the paper's)
INIT_BETA = 20.0  # initial soft-argmax inverse temperature (the correlation lies in [0, 1])


class MatchRefiner(nn.Module):
    """Match-to-match refinement of a correlation ``[B, L, h, w, h, w]`` -> ``[B, h, w, h, w]``.

    ``placement=True`` adds a linear embedding of each match's absolute position in the two
    images (:func:`~.placement.placement_features`, ours, not the paper's) to its token; it starts
    at zero, so weights trained without it load into it and compute the same scores."""

    def __init__(self, channels: int, dim: int = 16, depth: int = 6, heads: int = 8,
                 head_dim: int = 4, mlp_dim: int = 64, attention: str = "additive",
                 rope_base: float = 100.0, placement: bool = False) -> None:
        super().__init__()
        self.rope_base, self.inner = rope_base, heads * head_dim
        self._rotation_cache: tuple[tuple, Tensor] | None = None
        self.embed = nn.Linear(channels, dim)
        self.place = nn.Linear(FEATURES, dim) if placement else None
        if self.place is not None:
            nn.init.zeros_(self.place.weight)
            nn.init.zeros_(self.place.bias)
        self.layers = nn.ModuleList(MatchToMatchLayer(dim, heads, head_dim, mlp_dim, attention)
                                    for _ in range(depth))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, 1)
        # Start as the identity on the mean correlation, so training only adds what helps.
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)

    def _rotation(self, grid: tuple[int, int, int, int], device: torch.device) -> Tensor:
        """The 4D rotary rotation ``[T, inner / 2]`` of the matches of a ``grid = (hs, ws, ht,
        wt)`` correlation; kept for the last grid and device (it depends on nothing else, and
        recomputing it costs ~5 % of a 15 x 15 refinement on a CPU)."""
        def make() -> Tensor:
            return rope4d_rotation(rope4d_angles(match_positions(*grid, device=device),
                                                 self.inner, self.rope_base))

        if torch.compiler.is_compiling():
            return make()  # an export traces it: a kept tensor would become a graph constant
        key = (grid, device)
        if self._rotation_cache is None or self._rotation_cache[0] != key:
            # a normal tensor even when made under inference_mode, so that a later training
            # step can save it for backward
            with torch.inference_mode(False), torch.no_grad():
                self._rotation_cache = (key, make())
        return self._rotation_cache[1]

    def forward(self, corr: Tensor) -> Tensor:
        if corr.ndim != 6:
            raise ValueError(f"corr must be [B, L, hs, ws, ht, wt], got {corr.shape=}")
        b, _, hs, ws, ht, wt = corr.shape
        rotation = self._rotation((hs, ws, ht, wt), corr.device)
        x = self.embed(corr.flatten(2).transpose(1, 2))  # [B, T, dim]
        if self.place is not None:
            x = x + self.place(placement_features(hs, ws, ht, wt, corr.device).to(x.dtype))
        for layer in self.layers:
            x = layer(x, rotation)
        score = self.head(self.norm(x)).squeeze(-1).reshape(b, hs, ws, ht, wt)
        return score + corr.mean(dim=1)


class TransforMatcher(nn.Module):
    """The full model; :meth:`forward` returns a dict of correlations and dense target positions.
    It keeps the keypoint-matching contract
    (:class:`crossview.models.keypoints.contract.KeypointMatcher`).

    Example:
        >>> model = TransforMatcher().eval()
        >>> out = model(torch.rand(1, 3, 240, 240) * 255, torch.rand(1, 3, 240, 240) * 255)
        >>> out["coords"].shape
        torch.Size([1, 30, 30, 2])
    """

    eval_tau = EVAL_TAU

    def __init__(self, backbone: str = "efficientnet-lite0", backbone_weights: str | None = None,
                 grid: int = 15, upsample: int = 2, sigma: float = 10.0,
                 attention: str = "additive", depth: int = 6, dim: int = 16,
                 placement: bool = False, extra_backbone: str | None = None) -> None:
        super().__init__()
        self.grid, self.upsample, self.sigma = grid, upsample, sigma
        self.image_size = 16 * grid
        self.backbone_name = backbone
        self.backbone = build_backbone(backbone, backbone_weights)
        self.backbone.requires_grad_(False)
        self.extra_backbone_name = extra_backbone
        self.extra_backbone: nn.Module | None = None
        if extra_backbone is not None:
            if len(LAYER_STAGES.get(extra_backbone, ())) != len(LAYER_STAGES[backbone]):
                raise ValueError(f"extra_backbone must have the stages of {backbone} "
                                 f"(one of {sorted(LAYER_STAGES)} with "
                                 f"{len(LAYER_STAGES[backbone])} stages), got {extra_backbone!r}")
            self.extra_backbone = build_backbone(extra_backbone).requires_grad_(False)
        # True once the backbone's feature layers hold other weights than the ones it was built
        # with (tuned here, or loaded from a tuned file): they are then saved with the head.
        self.backbone_tuned = False
        self.refiner = MatchRefiner(BACKBONE_LAYERS[backbone], dim=dim, depth=depth,
                                    attention=attention, placement=placement)
        self.log_beta = nn.Parameter(torch.tensor(math.log(INIT_BETA)))

    def train(self, mode: bool = True) -> TransforMatcher:
        """Train mode for the refinement; the backbone always stays in eval mode, so its
        BatchNorm layers normalise with their ImageNet running statistics and never update
        them (also when the backbone is tuned: training batches of two pairs are far too small
        for batch statistics)."""
        super().train(mode)
        self.backbone.eval()
        if self.extra_backbone is not None:
            self.extra_backbone.eval()
        return self

    def _feeds_correlation(self, name: str) -> bool:
        """Whether backbone parameter/buffer ``name`` (no ``backbone.`` prefix) is used by its
        ``features`` (not only by the ImageNet classifier)."""
        return name.split(".", 1)[0] not in self.backbone.classifier_modules

    def tune_backbone(self) -> list[nn.Parameter]:
        """Make the backbone parameters that feed the correlation trainable (the classifier's
        stay frozen) and return them, e.g. for their own optimiser group. BatchNorm keeps its
        running statistics (see :meth:`train`); its affine weights train with the rest."""
        params = [p for name, p in self.backbone.named_parameters()
                  if self._feeds_correlation(name)]
        for p in params:
            p.requires_grad_(True)
        self.backbone_tuned = True
        return params

    def features(self, images: Tensor) -> list[list[Tensor]]:
        """The feature maps ``[B, C_l, H_l, W_l]`` of images ``[B, 3, S, S]`` (0..255): one list
        per backbone (the backbone's, then the extra backbone's, if any)."""
        if images.ndim != 4 or images.shape[1:] != (3, self.image_size, self.image_size):
            raise ValueError(f"images must be [B, 3, {self.image_size}, {self.image_size}], "
                             f"got {images.shape=}")
        trains = any(p.requires_grad for p in self.backbone.parameters())
        with torch.set_grad_enabled(torch.is_grad_enabled() and trains):
            feats = [self.backbone.features(images)]
        if self.extra_backbone is not None:
            with torch.no_grad():
                feats.append(self.extra_backbone.features(images))
        return feats

    def correlate(self, src: list[list[Tensor]], tgt: list[list[Tensor]]) -> Tensor:
        """Raw multi-channel correlation ``[B, L, g, g, g, g]`` of the :meth:`features` of two
        batches of images; with an extra backbone, the mean of the backbone's and the extra
        one's (resampled to the backbone's layers)."""
        size = (self.grid, self.grid)
        corr = multilayer_correlation(src[0], tgt[0], size)
        if self.extra_backbone is None:
            return corr
        extra = multilayer_correlation(src[1], tgt[1], size)
        return (corr + resample_layers(extra, LAYER_STAGES[self.extra_backbone_name],
                                       LAYER_STAGES[self.backbone_name])) / 2

    def correlation(self, src: Tensor, tgt: Tensor) -> Tensor:
        """Raw multi-channel correlation ``[B, L, g, g, g, g]`` of images ``[B, 3, S, S]``
        (both batches through each backbone at once)."""
        if src.shape != tgt.shape:
            raise ValueError(f"src and tgt must be equal [B, 3, {self.image_size}, "
                             f"{self.image_size}], got {src.shape=} {tgt.shape=}")
        b = src.shape[0]
        feats = self.features(torch.cat((src, tgt)))
        return self.correlate([[f[:b] for f in fs] for fs in feats],
                              [[f[b:] for f in fs] for fs in feats])

    def refine(self, corr: Tensor) -> dict[str, Tensor]:
        """Refine ``corr [B, L, g, g, g, g]``; returns ``refined`` (upsampled
        ``[B, G, G, G, G]``, ``G = upsample * g``) and ``coords [B, G, G, 2]``."""
        refined = upsample_correlation(self.refiner(corr), self.upsample)
        coords = kernel_soft_argmax(refined, self.sigma, self.log_beta.exp())
        return {"refined": refined, "coords": coords}

    def forward(self, src: Tensor, tgt: Tensor) -> dict[str, Tensor]:
        """Images ``[B, 3, S, S]`` in 0..255 -> ``corr`` ``[B, L, g, g, g, g]``, ``refined``,
        ``coords`` (normalised target ``(x, y)`` of each upsampled source cell, in the grid
        frame: transfer image points with :meth:`transfer`)."""
        corr = self.correlation(src, tgt)
        return {"corr": corr, **self.refine(corr)}

    def coords_both_ways(self, src: Tensor, tgt: Tensor) -> tuple[Tensor, Tensor]:
        """Images ``[B, 3, S, S]`` in 0..255 -> ``coords [B, G, G, 2]`` source -> target and
        target -> source. The second is the same correlation with the two images' axes swapped;
        both directions are refined as one batch."""
        corr = self.correlation(src, tgt)
        both = self.refine(torch.cat((corr, corr.permute(0, 1, 4, 5, 2, 3))))["coords"]
        forward, backward = both.chunk(2)
        return forward, backward

    @property
    def frame_shift(self) -> float:
        """Offset (normalised units) of the grid frame from the image frame.

        ``coords`` and the cell centres of :func:`~.softargmax.grid_centres` live in the *grid
        frame*, where cell ``j`` of the ``g``-cell grid is centred at ``(2 j + 1) / g - 1``, the
        centre of the ``16 x 16`` pixel block ``j``, i.e. pixel ``16 j + 7.5``. But every stride-2
        stage of the backbones centres its output cell ``i`` on input pixel ``2 i`` (symmetric
        padding), so feature cell ``j`` looks at pixel ``16 j``: a point at normalised image
        coordinate ``u`` sits at ``u + frame_shift`` in the grid frame,
        ``frame_shift = 2 * 7.5 / S = 1 / g - 1 / S`` (0.0625 at 240 px).
        """
        return 1.0 / self.grid - 1.0 / self.image_size

    def transfer(self, coords: Tensor, keypoints: Tensor, tau: float) -> Tensor:
        """Soft-sample (Eq. 11, temperature ``tau``) normalised image points ``keypoints
        [B, N, 2]`` through ``coords [B, G, G, 2]`` (the model's output, grid frame) -> their
        normalised target image points ``[B, N, 2]``, clamped to the image (the first grid-frame
        cells are centred half a cell outside it)."""
        shift = self.frame_shift
        return (soft_sample(coords, keypoints + shift, tau) - shift).clamp(-1.0, 1.0)

    def head_state_dict(self) -> dict[str, Tensor]:
        """The refinement's parameters (everything but the backbones)."""
        return {k: v.detach().clone() for k, v in self.state_dict().items()
                if not k.startswith(("backbone.", "extra_backbone."))}

    def backbone_state_dict(self) -> dict[str, Tensor]:
        """The backbone tensors that feed the correlation (parameters and BatchNorm buffers of
        every layer but the ImageNet classifier), keys prefixed ``backbone.``."""
        return {f"backbone.{k}": v.detach().clone() for k, v in self.backbone.state_dict().items()
                if self._feeds_correlation(k)}

    def trained_state_dict(self) -> dict[str, Tensor]:
        """What training changed: :meth:`head_state_dict`, plus :meth:`backbone_state_dict`
        when the backbone was tuned (:attr:`backbone_tuned`)."""
        return {**self.head_state_dict(),
                **(self.backbone_state_dict() if self.backbone_tuned else {})}

    def load_trained_state_dict(self, state: dict[str, Tensor], *, grow: bool = False) -> None:
        """Load what :meth:`trained_state_dict` saved: the refinement (strict on its keys) and,
        if ``state`` has ``backbone.`` keys, every tensor of :meth:`backbone_state_dict`
        (strict too; the model is then :attr:`backbone_tuned`). ``grow=True`` accepts weights
        trained without the placement embedding into a model with it (which then keeps its zero
        start). Raises ValueError naming the first missing / unexpected keys."""
        expected = set(self.head_state_dict())
        if grow:
            expected = {k for k in expected if not k.startswith("refiner.place.")} | (
                expected & set(state))
        tuned = has_tuned_backbone(state)
        if tuned:
            expected |= set(self.backbone_state_dict())
        if set(state) != expected:
            raise ValueError(f"weight keys differ: missing {sorted(expected - set(state))[:3]}, "
                             f"unexpected {sorted(set(state) - expected)[:3]}")
        self.load_state_dict(state, strict=False)
        self.backbone_tuned = self.backbone_tuned or tuned


def has_tuned_backbone(state: dict[str, Tensor]) -> bool:
    """Whether weights ``state`` (:meth:`TransforMatcher.trained_state_dict`) carry a tuned
    backbone."""
    return any(k.startswith("backbone.") for k in state)


def uses_placement(state: dict[str, Tensor]) -> bool:
    """Whether refinement weights ``state`` (:meth:`TransforMatcher.head_state_dict`) were trained
    with the placement embedding."""
    return "refiner.place.weight" in state


def raw_argmax_coords(corr: Tensor, upsample: int = 2) -> Tensor:
    """The no-refinement baseline: hard arg-max of the channel-mean correlation, upsampled like
    the model's output; ``corr [B, L, g, g, g, g]`` -> ``[B, G, G, 2]``."""
    return hard_argmax(upsample_correlation(corr.mean(dim=1), upsample))
