"""Multi-view depth from posed, unrectified views: the depth study's transformer.

Every view enters as patch tokens of its image (plus, for the raymap conditionings, its
per-pixel rays); one stack of self-attention blocks runs over all tokens of all views with no
mask, and a linear head turns each token into the log-depth of its patch's pixels, in the
token's own camera frame. Nothing but the camera conditioning tells the network how the views
relate: without it (``conditioning="none"``) depth in units of the baseline is unknowable.

Poses are re-expressed in the frame of view 0 at unit scale
(:func:`crossview.geometry.cameras.normalize_poses`): the network predicts depth in units of
that scale, and the output is converted back to the input's world units, so the prediction is
invariant to the choice of world frame and scale for every conditioning.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from crossview.geometry.cameras import Cameras, normalize_poses
from crossview.models.multiview.model import (
    ATTENTION,
    CONDITIONINGS,
    NO_CAMERAS,
    RAY_CHANNELS,
    Block,
    MultiViewConfig,
    check_config,
    patchify,
    token_rays,
    unpatchify,
)

DEPTH_CONDITIONINGS = (*CONDITIONINGS, NO_CAMERAS)
INITIAL_DEPTH = 5.0  # head bias: a typical depth in baseline units of the study's scenes


class MultiViewDepth(nn.Module):
    """Depth of every view from ``V`` posed views.

    Example:
        >>> model = MultiViewDepth(MultiViewConfig(depth=1, patch=8))
        >>> K = torch.tensor([[32.0, 0, 16], [0, 32, 16], [0, 0, 1]]).expand(1, 2, 3, 3)
        >>> poses = torch.eye(4).repeat(1, 2, 1, 1)
        >>> poses[0, 1, 0, 3] = -1.0
        >>> model(torch.zeros(1, 2, 3, 32, 32), K, poses).shape
        torch.Size([1, 2, 32, 32])
    """

    # forward's tensors, as depth samples name them (crossview.models.multiview.contract)
    inputs = ("images", "K", "viewmats")

    def __init__(self, config: MultiViewConfig) -> None:
        super().__init__()
        check_config(config, DEPTH_CONDITIONINGS)
        self.config = config
        self.encoding = ATTENTION[config.conditioning]
        pixels = config.patch * config.patch
        channels = 3 + RAY_CHANNELS.get(config.conditioning, 0)
        self.embed = nn.Linear(pixels * channels, config.width)
        self.blocks = nn.ModuleList(
            Block(config.width, config.heads, self.encoding, config.mlp_ratio)
            for _ in range(config.depth)
        )
        self.norm = nn.LayerNorm(config.width)
        self.head = nn.Linear(config.width, pixels)
        nn.init.constant_(self.head.bias, math.log(INITIAL_DEPTH))

    def forward(self, images: Tensor, K: Tensor, viewmats: Tensor) -> Tensor:
        """Depth of every view.

        Args:
            images: ``[B, V, 3, H, W]`` float in 0..255.
            K: intrinsics in pixels ``[B, V, 3, 3]`` (pixel centres at +0.5).
            viewmats: world-to-camera ``[B, V, 4, 4]``; view 0's centre must differ from
                another view's (the baseline sets the scale).

        Returns:
            ``[B, V, H, W]``: camera z of each pixel's point, in the units of ``viewmats``.
        """
        config = self.config
        if images.ndim != 5 or images.shape[2:] != (3, *config.image_size):
            raise ValueError(f"images must be [B, V, 3, {config.image_size[0]}, "
                             f"{config.image_size[1]}], got {images.shape=}")
        views = images.shape[1]
        normalized, scale = normalize_poses(viewmats)
        cameras = Cameras(K, normalized, config.image_size)
        pixels = images.permute(0, 1, 3, 4, 2) / 127.5 - 1.0
        rays = token_rays(config.conditioning, cameras)
        x = self.embed(patchify(torch.cat([pixels, rays], dim=-1), config.patch))
        transforms = self.blocks[0].attention.transforms(
            normalized, K, image_size=config.image_size, patch_grid=config.grid)
        for block in self.blocks:
            x = block(x, transforms, None)
        log_depth = self.head(self.norm(x))
        depth = unpatchify(log_depth.exp(), views, config.image_size, config.patch)[..., 0]
        return depth / scale[:, None, None, None]
