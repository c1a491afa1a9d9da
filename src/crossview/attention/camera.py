"""Camera-conditioned attention: PRoPE, GTA, CaPE and 2D RoPE around torch's SDPA.

Every encoding is a per-token linear map ``T_t`` of the head channels (paper Eq. 15-19)::

    o_t = T_t  sum_t' softmax_t'(q_t^T T_t T_t'^-1 k_t' / sqrt(D))  T_t'^-1 v_t'

implemented by transforming the inputs of ``scaled_dot_product_attention`` (queries by
``T^T``, keys and values by ``T^-1``) and its output (by ``T``), so only relative transforms
``T_t T_t'^-1`` reach the scores. Per head of ``D`` channels (the public ``prope`` layout):

- channels ``[0, D/2)``: ``D/8`` blocks of 4 channels, each multiplied by a 4x4 camera matrix
  (PRoPE: the lifted projection P~ of :mod:`crossview.geometry.cameras`; GTA/CaPE: the
  world-to-camera SE(3) ``viewmat``);
- channels ``[D/2, 3D/4)``: RoPE on the integer patch x index, ``[3D/4, D)``: on the patch y
  index, split halves (channel i with i + D/8), frequencies ``100**(-i / (D/8))``.

``prope``: both parts on Q, K, V and O. ``gta``: the same with SE(3) poses (intrinsics ignored).
``cape``: SE(3) poses and RoPE on Q and K only. ``rope``: the RoPE part alone (camera channels
untouched). ``none``: plain SDPA. Tokens are ordered camera, then row, then column (x fastest).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from crossview.attention.rope import apply_rope, grid_positions, rope_coefficients
from crossview.geometry.cameras import (
    check_intrinsics,
    check_viewmats,
    invert_se3,
    lifted_projection,
    lifted_projection_inverse,
    normalize_intrinsics,
)

ENCODINGS = ("prope", "gta", "cape", "rope", "none")
ROPE_BASE = 100.0


def _apply_blocks(x: Tensor, mats: Tensor) -> Tensor:
    """Multiply each 4-channel block of ``x`` ``[B, H, T, 4m]`` by its camera's matrix.

    ``mats`` ``[B, C, 4, 4]`` with ``T`` a multiple of ``C``: token ``t`` uses camera
    ``t // (T / C)`` (per-token cameras are ``C == T``).
    """
    batch, heads, tokens, channels = x.shape
    cameras = mats.shape[1]
    blocks = x.reshape(batch, heads, cameras, (tokens // cameras) * (channels // 4), 4)
    return (blocks @ mats.transpose(-1, -2).unsqueeze(1)).reshape(x.shape)


@dataclass(frozen=True)
class CameraTransforms:
    """The per-token maps of one token set, computed once and reused by every attention call.

    Attributes:
        encoding: one of :data:`ENCODINGS`.
        tokens: the number of tokens ``T`` these transforms apply to.
        head_dim: the head dimension ``D`` they were built for.
        query_mats, key_mats, output_mats: ``[B, C, 4, 4]`` camera matrices applied to the
            camera channels of Q (``P^T``), of K and V (``P^-1``) and of the output (``P``);
            ``None`` when the encoding has no camera part.
        rope: ``(cos, sin)`` ``[B or 1, 1, T, 2, D/8]`` for the x (index 0) and y (index 1)
            RoPE channels; ``None`` for ``none``.
    """

    encoding: str
    tokens: int
    head_dim: int
    query_mats: Tensor | None = None
    key_mats: Tensor | None = None
    output_mats: Tensor | None = None
    rope: tuple[Tensor, Tensor] | None = None

    def _apply(self, x: Tensor, mats: Tensor | None, inverse_rope: bool) -> Tensor:
        if self.rope is None:
            return x
        half = self.head_dim // 2
        camera_part = x[..., :half]
        if mats is not None:
            camera_part = _apply_blocks(camera_part, mats.to(x.dtype))
        # the x and y RoPE quarters rotate in one call: [..., D/2] -> [..., 2 axes, D/4];
        # contiguous first: broadcasting cos/sin over a strided slice is ~50x slower on CPU
        cos, sin = (c.to(x.dtype) for c in self.rope)
        rope_part = apply_rope(x[..., half:].contiguous().unflatten(-1, (2, half // 2)), cos,
                               sin, inverse=inverse_rope)
        return torch.cat([camera_part, rope_part.flatten(-2)], dim=-1)

    def query(self, q: Tensor) -> Tensor:
        """Transform queries ``[B, heads, T, D]`` by ``T_t^T``."""
        return self._apply(q, self.query_mats, inverse_rope=False)

    def key(self, k: Tensor) -> Tensor:
        """Transform keys ``[B, heads, T, D]`` by ``T_t^-1``."""
        return self._apply(k, self.key_mats, inverse_rope=False)

    def value(self, v: Tensor) -> Tensor:
        """Transform values ``[B, heads, T, D]`` by ``T_t^-1`` (untouched for CaPE)."""
        if self.encoding == "cape":
            return v
        return self._apply(v, self.key_mats, inverse_rope=False)

    def output(self, o: Tensor) -> Tensor:
        """Transform attention outputs ``[B, heads, T, D]`` by ``T_t`` (untouched for CaPE)."""
        if self.encoding == "cape":
            return o
        return self._apply(o, self.output_mats, inverse_rope=True)


def check_head_dim(head_dim: int, encoding: str) -> None:
    """Raise ``ValueError`` unless ``encoding`` is known and ``head_dim`` fits its layout."""
    if encoding not in ENCODINGS:
        raise ValueError(f"unknown camera encoding {encoding!r}; choose one of {ENCODINGS}")
    if encoding != "none" and (head_dim <= 0 or head_dim % 8):
        raise ValueError(
            f"head_dim={head_dim} does not fit encoding={encoding!r}: it needs a positive "
            "multiple of 8 (D/2 channels in 4x4 camera blocks, then D/4 + D/4 RoPE channels "
            "in split-halves pairs)"
        )


def _token_positions(cameras: int, batch: int, patch_grid: tuple[int, int] | None,
                     positions: Tensor | None, device: torch.device) -> Tensor:
    if positions is None:
        if patch_grid is None:
            raise ValueError("camera_transforms needs patch_grid=(h, w) or explicit positions")
        return grid_positions(patch_grid, cameras, device=device)
    if positions.ndim not in (2, 3) or positions.shape[-1] != 2:
        raise ValueError(f"positions must be [T, 2] or [B, T, 2] (x, y), got {positions.shape=}")
    if positions.ndim == 3 and positions.shape[0] not in (1, batch):
        raise ValueError(f"positions batch must be 1 or the viewmats batch {batch}, got "
                         f"{positions.shape=}")
    if positions.shape[-2] % cameras:
        raise ValueError(
            f"{positions.shape[-2]} tokens do not split evenly over {cameras} cameras"
        )
    return positions


def camera_transforms(viewmats: Tensor, Ks: Tensor | None = None, *, head_dim: int,
                      encoding: str = "prope", image_size: tuple[int, int] | None = None,
                      patch_grid: tuple[int, int] | None = None,
                      positions: Tensor | None = None,
                      dtype: torch.dtype | None = None) -> CameraTransforms:
    """Build the per-token maps of one token set (cache them for repeated attention calls).

    Args:
        viewmats: world-to-camera ``[B, C, 4, 4]``; ``C`` may equal ``T`` (one camera per token).
        Ks: intrinsics in pixels ``[B, C, 3, 3]`` or ``None``. Used by ``prope`` only; without
            them ``prope`` uses the SE(3) poses (as the public ``prope`` package does).
        head_dim: channels per head ``D`` (a multiple of 8 unless ``encoding="none"``).
        encoding: one of :data:`ENCODINGS`.
        image_size: ``(height, width)`` in pixels, needed to normalise ``Ks``.
        patch_grid: ``(h, w)`` patches per camera; tokens are ordered camera, row, column.
        positions: instead of ``patch_grid``, integer patch indices (x, y) ``[T, 2]`` or
            ``[B, T, 2]``; ``T`` must be a multiple of ``C``, tokens grouped by camera.
        dtype: dtype of the stored maps (default: that of ``viewmats``).

    Returns:
        A :class:`CameraTransforms` for ``T`` tokens.
    """
    check_head_dim(head_dim, encoding)
    check_viewmats(viewmats)
    if viewmats.ndim != 4:
        raise ValueError(f"viewmats must be [B, C, 4, 4], got {viewmats.shape=}")
    batch, cameras = viewmats.shape[:2]
    dtype = dtype or viewmats.dtype
    positions = _token_positions(cameras, batch, patch_grid, positions, viewmats.device)
    tokens = positions.shape[-2]
    if encoding == "none":
        return CameraTransforms(encoding, tokens, head_dim)

    n = head_dim // 8
    cos, sin = rope_coefficients(positions, n, ROPE_BASE, dtype)  # [..., T, 2, n]
    rope = (cos.reshape(-1, 1, tokens, 2, n), sin.reshape(-1, 1, tokens, 2, n))
    if encoding == "rope":
        return CameraTransforms(encoding, tokens, head_dim, rope=rope)

    if encoding == "prope" and Ks is not None:
        check_intrinsics(Ks, "Ks")
        if Ks.shape[:2] != viewmats.shape[:2]:
            raise ValueError(f"Ks must match viewmats: got {Ks.shape=} and {viewmats.shape=}")
        if image_size is None:
            raise ValueError("prope with Ks needs image_size=(height, width) to normalise them")
        K_norm = normalize_intrinsics(Ks.to(viewmats.dtype), image_size)
        forward = lifted_projection(K_norm, viewmats)
        inverse = lifted_projection_inverse(K_norm, viewmats)
    else:
        forward, inverse = viewmats, invert_se3(viewmats)
    return CameraTransforms(
        encoding, tokens, head_dim,
        query_mats=forward.transpose(-1, -2).to(dtype), key_mats=inverse.to(dtype),
        output_mats=forward.to(dtype), rope=rope,
    )


def _check_qkv(q: Tensor, k: Tensor, v: Tensor) -> None:
    for name, x in (("q", q), ("k", k), ("v", v)):
        if not isinstance(x, Tensor):
            raise TypeError(f"{name} must be a tensor, got {type(x).__name__}")
        if x.ndim != 4:
            raise ValueError(f"{name} must be [B, heads, T, D], got {name}.shape={tuple(x.shape)}")
    if k.shape != v.shape or q.shape[:2] != k.shape[:2] or q.shape[-1] != k.shape[-1]:
        raise ValueError(
            "q, k, v must share B, heads and D, and k, v the same T: got "
            f"{q.shape=}, {k.shape=}, {v.shape=}"
        )


def _check_fits(transforms: CameraTransforms, x: Tensor, name: str) -> None:
    if transforms.tokens != x.shape[2] or transforms.head_dim != x.shape[3]:
        raise ValueError(
            f"the {name} cameras and patch grid give {transforms.tokens} tokens of head_dim "
            f"{transforms.head_dim}, but {name}.shape={tuple(x.shape)}"
        )
    maps = (transforms.key_mats, *(transforms.rope or ()))
    batches = {int(m.shape[0]) for m in maps if m is not None} - {1, x.shape[0]}
    if batches:
        raise ValueError(
            f"the {name} cameras (or positions) are a batch of {batches.pop()}, but "
            f"{name}.shape={tuple(x.shape)} (the batch must match or be 1)"
        )


def prope_attention(q: Tensor, k: Tensor, v: Tensor, *, viewmats: Tensor | None = None,
                    Ks: Tensor | None = None, image_size: tuple[int, int] | None = None,
                    patch_grid: tuple[int, int] | None = None, encoding: str = "prope",
                    positions: Tensor | None = None, kv_viewmats: Tensor | None = None,
                    kv_Ks: Tensor | None = None, kv_positions: Tensor | None = None,
                    transforms: CameraTransforms | None = None,
                    kv_transforms: CameraTransforms | None = None,
                    **sdpa_kwargs: Any) -> Tensor:
    """Camera-conditioned ``scaled_dot_product_attention``.

    Args:
        q: queries ``[B, heads, Tq, D]``; ``k``, ``v``: keys and values ``[B, heads, Tk, D]``.
        viewmats: world-to-camera ``[B, C, 4, 4]`` of the query tokens (``C`` may be ``Tq``).
        Ks: their intrinsics in pixels ``[B, C, 3, 3]``, or ``None``.
        image_size: ``(height, width)`` in pixels.
        patch_grid: ``(h, w)`` patches per camera; ``Tq = C * h * w`` ordered camera, row,
            column. Or give ``positions`` ``[Tq, 2]`` / ``[B, Tq, 2]`` (integer x, y).
        encoding: ``prope``, ``gta``, ``cape``, ``rope`` or ``none``.
        kv_viewmats, kv_Ks, kv_positions: the cameras of the key/value tokens for
            cross-attention between camera sets (default: the query cameras, self-attention).
        transforms, kv_transforms: precomputed :func:`camera_transforms` (instead of cameras).
        **sdpa_kwargs: passed to ``scaled_dot_product_attention`` (``attn_mask``,
            ``dropout_p``, ``is_causal``, ``scale``).

    Returns:
        ``[B, heads, Tq, D]``.

    Example:
        >>> q = k = v = torch.randn(1, 2, 2 * 4 * 4, 16)
        >>> cams = torch.eye(4).expand(1, 2, 4, 4)
        >>> Ks = torch.tensor([[32.0, 0, 16], [0, 32, 16], [0, 0, 1]]).expand(1, 2, 3, 3)
        >>> prope_attention(q, k, v, viewmats=cams, Ks=Ks, image_size=(32, 32),
        ...                 patch_grid=(4, 4)).shape
        torch.Size([1, 2, 32, 16])
    """
    _check_qkv(q, k, v)
    head_dim = q.shape[-1]
    if transforms is None:
        if viewmats is None:
            raise ValueError("prope_attention needs viewmats (or precomputed transforms=)")
        transforms = camera_transforms(viewmats, Ks, head_dim=head_dim, encoding=encoding,
                                       image_size=image_size, patch_grid=patch_grid,
                                       positions=positions, dtype=q.dtype)
    elif viewmats is not None or Ks is not None:
        raise ValueError("give either cameras (viewmats, Ks) or transforms=, not both")
    if kv_transforms is None:
        if kv_viewmats is None and kv_Ks is None and kv_positions is None:
            kv_transforms = transforms
        elif kv_viewmats is None or (kv_Ks is None) != (Ks is None):
            raise ValueError(
                "cross-attention needs kv_viewmats, and kv_Ks exactly when Ks are given"
            )
        else:
            kv_transforms = camera_transforms(kv_viewmats, kv_Ks, head_dim=head_dim,
                                              encoding=transforms.encoding,
                                              image_size=image_size, patch_grid=patch_grid,
                                              positions=kv_positions, dtype=k.dtype)
    if transforms.encoding != kv_transforms.encoding:
        raise ValueError(
            f"query and key transforms use different encodings: {transforms.encoding!r} and "
            f"{kv_transforms.encoding!r}"
        )
    _check_fits(transforms, q, "q")
    _check_fits(kv_transforms, k, "k")
    out = F.scaled_dot_product_attention(transforms.query(q), kv_transforms.key(k),
                                         kv_transforms.value(v), **sdpa_kwargs)
    return transforms.output(out)
