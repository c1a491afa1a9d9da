"""A small LVSM-style decoder-only transformer for novel view synthesis, any camera conditioning.

Context views enter as patch tokens of their image; target views as patch tokens with no image.
One stack of self-attention blocks runs over all tokens (context tokens attend to context
tokens, each target's tokens to the context and to themselves, so targets never see each other)
and a linear head turns each target token back into a patch of RGB.

The cameras reach the model in one of six ways (``CONDITIONINGS``):

- ``plucker``: the per-pixel Plücker raymap ``[d, o x d]`` concatenated to each patch
  (token level, the LVSM baseline), plain attention;
- ``naive``: the per-pixel raymap ``[o, d]`` concatenated, plain attention;
- ``cape``, ``gta``, ``prope``: no token-level camera input, the encoding of the same name in
  every attention layer (:func:`crossview.attention.camera.prope_attention`);
- ``prope+camray``: PRoPE in attention plus the per-pixel camera-frame rays ``K^-1 [u, v, 1]``
  concatenated to each patch.

Poses are first re-expressed in the frame of the first context view at unit scale
(:func:`crossview.geometry.cameras.normalize_poses`), so every variant is invariant to the
choice of world frame.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from crossview.attention.camera import CameraTransforms
from crossview.geometry.cameras import Cameras, normalize_poses
from crossview.geometry.raymaps import camray_map, naive_raymap, plucker_raymap
from crossview.nn.camera_attention import CameraAttention

CONDITIONINGS = ("plucker", "naive", "cape", "gta", "prope", "prope+camray")
NO_CAMERAS = "none"  # the camera-blind baseline of the depth study: no conditioning at all
RAY_CHANNELS = {"plucker": 6, "naive": 6, "prope+camray": 3}
ATTENTION = {"plucker": "none", "naive": "none", "cape": "cape", "gta": "gta",
             "prope": "prope", "prope+camray": "prope", NO_CAMERAS: "none"}


@dataclass(frozen=True)
class MultiViewConfig:
    """Sizes of :class:`MultiViewTransformer` (``image_size`` is ``(height, width)``)."""

    conditioning: str = "prope"
    image_size: tuple[int, int] = (32, 32)
    patch: int = 8
    width: int = 64
    depth: int = 4
    heads: int = 4
    mlp_ratio: int = 4

    @property
    def grid(self) -> tuple[int, int]:
        return self.image_size[0] // self.patch, self.image_size[1] // self.patch


class Block(nn.Module):
    """Pre-norm transformer block: camera attention, then an MLP."""

    def __init__(self, width: int, heads: int, encoding: str, mlp_ratio: int) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(width)
        self.attention = CameraAttention(width, heads, encoding, bias=False)
        self.norm2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, mlp_ratio * width), nn.GELU(),
                                 nn.Linear(mlp_ratio * width, width))

    def forward(self, x: Tensor, transforms: CameraTransforms, mask: Tensor | None) -> Tensor:
        x = x + self.attention(self.norm1(x), transforms, attn_mask=mask)
        return x + self.mlp(self.norm2(x))


def patchify(maps: Tensor, patch: int) -> Tensor:
    """``[B, V, H, W, C]`` channel-last maps -> ``[B, V * h * w, patch * patch * C]`` tokens.

    Tokens are ordered view, patch row, patch column; channels within a patch row-major.
    """
    b, v, height, width, c = maps.shape
    h, w = height // patch, width // patch
    tiles = maps.reshape(b, v, h, patch, w, patch, c).permute(0, 1, 2, 4, 3, 5, 6)
    return tiles.reshape(b, v * h * w, patch * patch * c)


def unpatchify(tokens: Tensor, views: int, image_size: tuple[int, int], patch: int) -> Tensor:
    """Inverse of :func:`patchify`: ``[B, V * h * w, p * p * C]`` -> ``[B, V, H, W, C]``."""
    b = tokens.shape[0]
    height, width = image_size
    h, w = height // patch, width // patch
    c = tokens.shape[-1] // (patch * patch)
    tiles = tokens.reshape(b, views, h, w, patch, patch, c).permute(0, 1, 2, 4, 3, 5, 6)
    return tiles.reshape(b, views, height, width, c)


def token_rays(conditioning: str, cameras: Cameras) -> Tensor:
    """Per-pixel token-level camera input ``[B, V, H, W, C]`` of ``conditioning`` for
    ``cameras`` (batch ``[B, V]``); ``C = 0`` for the attention-only conditionings."""
    if conditioning == "plucker":
        return plucker_raymap(cameras)
    if conditioning == "naive":
        return naive_raymap(cameras)
    if conditioning == "prope+camray":
        return camray_map(cameras)
    return cameras.K.new_zeros(*cameras.K.shape[:2], *cameras.image_size, 0)


def check_config(config: MultiViewConfig, conditionings: tuple[str, ...]) -> None:
    """``ValueError`` unless ``config.conditioning`` is one of ``conditionings`` and the
    image divides into patches."""
    if config.conditioning not in conditionings:
        raise ValueError(f"conditioning must be one of {conditionings}, got "
                         f"{config.conditioning!r}")
    if config.image_size[0] % config.patch or config.image_size[1] % config.patch:
        raise ValueError(f"image_size {config.image_size} must divide by patch "
                         f"{config.patch}")


class MultiViewTransformer(nn.Module):
    """Novel view synthesis from posed context views.

    Example:
        >>> model = MultiViewTransformer(MultiViewConfig(depth=1))
        >>> K = torch.tensor([[32.0, 0, 16], [0, 32, 16], [0, 0, 1]]).expand(1, 3, 3, 3)
        >>> poses = torch.eye(4).expand(1, 3, 4, 4)
        >>> out = model(torch.zeros(1, 2, 3, 32, 32), K[:, :2], poses[:, :2], K[:, 2:],
        ...             poses[:, 2:])
        >>> out.shape
        torch.Size([1, 1, 3, 32, 32])
    """

    # forward's tensors, as novel-view samples name them (crossview.models.multiview.contract)
    inputs = ("context_images", "context_K", "context_viewmats", "target_K", "target_viewmats")

    def __init__(self, config: MultiViewConfig) -> None:
        super().__init__()
        check_config(config, CONDITIONINGS)
        self.config = config
        self.encoding = ATTENTION[config.conditioning]
        ray_channels = RAY_CHANNELS.get(config.conditioning, 0)
        pixels = config.patch * config.patch
        self.embed_context = nn.Linear(pixels * (3 + ray_channels), config.width)
        self.embed_target = nn.Linear(pixels * max(ray_channels, 1), config.width)
        self.blocks = nn.ModuleList(
            Block(config.width, config.heads, self.encoding, config.mlp_ratio)
            for _ in range(config.depth)
        )
        self.norm = nn.LayerNorm(config.width)
        self.head = nn.Linear(config.width, pixels * 3)

    def _mask(self, context: int, targets: int, device: torch.device) -> Tensor:
        per_view = self.config.grid[0] * self.config.grid[1]
        view = torch.arange(context + targets, device=device).repeat_interleave(per_view)
        is_context = view < context
        return is_context[None, :] | (view[:, None] == view[None, :])

    def forward(self, context_images: Tensor, context_K: Tensor, context_viewmats: Tensor,
                target_K: Tensor, target_viewmats: Tensor) -> Tensor:
        """Render the target views.

        Args:
            context_images: ``[B, Vc, 3, H, W]`` float in 0..255.
            context_K, target_K: intrinsics in pixels ``[B, Vc, 3, 3]``, ``[B, Vt, 3, 3]``.
            context_viewmats, target_viewmats: world-to-camera ``[B, Vc, 4, 4]``,
                ``[B, Vt, 4, 4]``.

        Returns:
            ``[B, Vt, 3, H, W]`` in 0..255.
        """
        config = self.config
        n_context = context_images.shape[1]
        n_target = target_K.shape[1]
        if context_images.shape[2:] != (3, *config.image_size):
            raise ValueError(f"context_images must be [B, V, 3, {config.image_size[0]}, "
                             f"{config.image_size[1]}], got {context_images.shape=}")
        viewmats, _ = normalize_poses(torch.cat([context_viewmats, target_viewmats], dim=1))
        cameras = Cameras(torch.cat([context_K, target_K], dim=1), viewmats, config.image_size)
        rays = token_rays(config.conditioning, cameras)
        pixels = context_images.permute(0, 1, 3, 4, 2) / 127.5 - 1.0
        context = patchify(torch.cat([pixels, rays[:, :n_context]], dim=-1), config.patch)
        target_rays = rays[:, n_context:]
        if target_rays.shape[-1] == 0:
            target_rays = target_rays.new_zeros(*target_rays.shape[:-1], 1)
        target = patchify(target_rays, config.patch)
        x = torch.cat([self.embed_context(context), self.embed_target(target)], dim=1)
        transforms = self.blocks[0].attention.transforms(
            viewmats, cameras.K, image_size=config.image_size, patch_grid=config.grid)
        mask = self._mask(n_context, n_target, x.device)
        for block in self.blocks:
            x = block(x, transforms, mask)
        out = self.head(self.norm(x[:, context.shape[1]:]))
        images = unpatchify(torch.sigmoid(out), n_target, config.image_size, config.patch)
        return 255.0 * images.permute(0, 1, 4, 2, 3)
