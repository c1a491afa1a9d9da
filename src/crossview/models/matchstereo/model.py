"""MatchStereo / MatchFlow: ConvFormer encoder, initial correlation, hierarchical MatchDecoder.

The module layout (``encoder``, ``init_correlation_volume``, ``match_attentions``,
``up_decoders``, ``up_masks``) matches the published checkpoints key for key, so their state
dicts load with ``strict=True``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from crossview.models.matchstereo.config import MatchStereoConfig
from crossview.models.matchstereo.correlation import InitCorrelation
from crossview.models.matchstereo.decoder import MatchDecoderScale
from crossview.models.matchstereo.memory import inference_bytes
from crossview.models.matchstereo.pretrained_features import PretrainedFeatures
from crossview.nn.encoder import ConvFormer
from crossview.nn.upsample import UpConv, UpMask, convex_upsample

TASKS = ("stereo", "flow")


class MatchStereo(nn.Module):
    """MatchStereo (``task="stereo"``) and MatchFlow (``task="flow"``): one network, both tasks.

    Args:
        config: network shape and the paper's switches (:class:`MatchStereoConfig`).
        task: the default task of :meth:`forward` (the weights are trained for one task).

    Example:
        >>> model = MatchStereo(MatchStereoConfig(dims=(16, 32, 48, 64), heads=2,
        ...     encoder_depths=(1, 1, 1, 1), decoder_layers=(1, 1, 1, 1), encoder_head=0))
        >>> out = model.forward_fields(torch.rand(1, 3, 192, 192) * 255,
        ...                            torch.rand(1, 3, 192, 192) * 255)
        >>> out["field"].shape
        torch.Size([2, 192, 192, 2])
    """

    def __init__(self, config: MatchStereoConfig | None = None, task: str = "stereo") -> None:
        super().__init__()
        if task not in TASKS:
            raise ValueError(f"task must be one of {TASKS}, got {task!r}")
        self.config = config = config or MatchStereoConfig()
        self.task = task
        dims = config.decoder_dims
        self.encoder = ConvFormer(config.dims, config.encoder_depths, config.encoder_head)
        if config.pretrained_features:
            self.feature_adapter = PretrainedFeatures(config.dims, config.pretrained_features)
        self.init_correlation_volume = InitCorrelation(dims[0])
        options = dict(gating=config.gating, attn_to_proj=config.attn_to_proj,
                       noc_mask_embedding=config.noc_mask_embedding,
                       field_scale_init=config.field_scale_init,
                       noc_threshold=config.noc_threshold)
        self.match_attentions = nn.ModuleList(
            MatchDecoderScale(dim, depth, config.heads, radius, **options)
            for dim, depth, radius in zip(dims, config.decoder_layers, config.radii, strict=True))
        self.up_decoders = nn.ModuleList(
            [nn.Identity()] + [UpConv(dims[i - 1], dims[i]) for i in range(1, 4)])
        self.up_masks = nn.ModuleList(
            [nn.Identity()] + [UpMask(dims[i - 1], dims[i - 1], 2) for i in range(1, 4)]
            + [UpMask(dims[3], 2 * dims[3], 4)])

    def inference_bytes(self, batch: int, height: int, width: int, task: str) -> int:
        """Peak memory in bytes of an inference on ``batch`` pairs padded to ``height x width``
        px (:func:`crossview.models.matchstereo.memory.inference_bytes`)."""
        return inference_bytes(self.config, task, batch, height, width)

    def forward(self, img0: torch.Tensor, img1: torch.Tensor) -> dict[str, object]:
        """:meth:`forward_fields` with the model's own task."""
        return self.forward_fields(img0, img1, task=self.task)

    accepts_init_field = True  # low-resolution initialisation (crossview.models.dense)

    def min_shape(self, task: str) -> tuple[int, int]:
        """The least padded ``(H, W)`` this network takes for ``task``
        (:meth:`MatchStereoConfig.min_shape`)."""
        return self.config.min_shape(task)

    def forward_fields(self, img0: torch.Tensor, img1: torch.Tensor, task: str = "stereo",
                       init_field: torch.Tensor | None = None) -> dict[str, object]:
        """Relative-position fields of both views, every intermediate included.

        Args:
            img0: reference (left / first) images ``[B, 3, H, W]``, float, values 0..255; H and
                W multiples of 32 and at least ``config.min_size``.
            img1: target (right / second) images, same shape.
            task: ``"stereo"`` (y kept at 0, non-negative disparity search) or ``"flow"``.
            init_field: optional ``[2B, H/32, W/32, 2]`` initial field in 1/32 tokens (the
                low-resolution-initialisation path); skips the correlation.

        Returns:
            A dict; rows ``:B`` are the reference view, ``B:`` the target view:

            - ``init_field`` ``[2B, h, w, 2]``: the field the decoder starts from (1/32 tokens).
            - ``init_cv``: the filled softmax volume of the initial correlation, stereo
              ``[2B, D=w, h, w]``, flow ``[2B, h, w, h*w]``; ``None`` when ``init_field`` given.
            - ``fields``: every field in decoder order, each ``[2B, h_s, w_s, 2]`` in tokens of
              its scale; ``field_kinds`` the parallel list of ``"self"`` (after a layer's
              self-attention), ``"cross"`` (the layer's result) or ``"up"`` (after x2 convex
              upsampling between scales).
            - ``noc_masks``: per layer, the 0/1 non-occlusion mask ``[2B, h_s, w_s]`` the layer
              computed from its input field (parallel to the ``"cross"`` fields).
            - ``field`` ``[2B, H, W, 2]``: full-resolution field in pixels (x4 convex upsampling).
            - ``self_rpos`` ``[2B, H/4, W/4, 2]``: self relative positions at 1/4 (1/4 tokens),
              averaged over heads; ``self_rpos_up`` ``[2B, H, W, 2]`` the same upsampled x4
              bilinearly and multiplied by 4 (pixels).
            - ``cross_attn`` ``[2B, H/4, W/4, heads, (2r+2)^2]``: the last layer's
              cross-attention weights (BilinearSoftmax, where each pixel's match draws from;
              ``None`` without ``attn_to_proj``).

            Everything is differentiable in train mode (the in-decoder consistency check uses
            the detached field, as published).
        """
        if task not in TASKS:
            raise ValueError(f"task must be one of {TASKS}, got {task!r}")
        self._check_images(img0, img1, task)
        stereo = task == "stereo"
        images = torch.cat([img0, img1]) * (2.0 / 255.0) - 1.0
        features = self.encoder(images)
        if self.config.pretrained_features:
            features = [f + g for f, g in zip(features, self.feature_adapter(images), strict=True)]
        features = features[::-1]  # coarse (1/32) to fine (1/4)
        init_cv = None
        if init_field is None:
            init_field, init_cv = self.init_correlation_volume(features[0], task)
        elif init_field.shape != (*features[0].shape[:3], 2):
            raise ValueError(f"init_field must be [2B, H/32, W/32, 2] = "
                             f"{(*features[0].shape[:3], 2)}, got {init_field.shape=}")
        # positions stay at least float32 under reduced-precision autocast (bf16 would round
        # a 300-token offset to 2 tokens); layers keep them so through dtype promotion
        init_field = init_field.to(torch.promote_types(init_field.dtype, torch.float32))
        field, self_rpos, x = init_field, torch.zeros_like(init_field), features[0]
        fields: list[torch.Tensor] = []
        kinds: list[str] = []
        noc_masks: list[torch.Tensor] = []
        for i, scale in enumerate(self.match_attentions):
            if i > 0:
                mask = self.up_masks[i](x)
                field = convex_upsample(field, mask, 2)
                self_rpos = convex_upsample(self_rpos, mask, 2)
                x = self.up_decoders[i](x, features[i])
                fields.append(field)
                kinds.append("up")
            out = scale(x, self_rpos, field, stereo)
            x, self_rpos, field = out.x, out.self_rpos, out.field
            fields += out.fields
            kinds += out.kinds
            noc_masks += out.noc_masks
        full = convex_upsample(field, self.up_masks[4](x), 4)
        self_rpos_up = 4 * F.interpolate(self_rpos.permute(0, 3, 1, 2), scale_factor=4,
                                         mode="bilinear", align_corners=True).permute(0, 2, 3, 1)
        return {"init_field": init_field, "init_cv": init_cv, "fields": fields,
                "field_kinds": kinds, "noc_masks": noc_masks, "field": full,
                "self_rpos": self_rpos, "self_rpos_up": self_rpos_up, "cross_attn": out.attn}

    def _check_images(self, img0: torch.Tensor, img1: torch.Tensor, task: str) -> None:
        if img0.ndim != 4 or img0.shape[1] != 3 or img0.shape != img1.shape:
            raise ValueError(f"images must both be [B, 3, H, W], got {img0.shape=}, {img1.shape=}")
        h, w = img0.shape[-2:]
        least_h, least_w = self.config.min_shape(task)
        if h % 32 or w % 32 or h < least_h or w < least_w:
            raise ValueError(f"image sides must be multiples of 32 and at least {least_h}x"
                             f"{least_w} for {task}, got {img0.shape=} (crossview.api pads "
                             "automatically)")
