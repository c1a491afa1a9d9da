"""Multi-head attention whose scores see the cameras: a module around ``prope_attention``."""

from __future__ import annotations

from torch import Tensor, nn

from crossview.attention.camera import (
    CameraTransforms,
    camera_transforms,
    check_head_dim,
    prope_attention,
)


class CameraAttention(nn.Module):
    """Self- or cross-attention over multi-view tokens with a camera encoding.

    The encoding adds no parameters: the module holds only the Q, K/V and output projections.
    Build the per-camera maps once with :meth:`transforms` and pass them to every layer.

    Args:
        dim: token width; ``dim / heads`` must fit the encoding (a multiple of 8).
        heads: number of heads.
        encoding: ``prope``, ``gta``, ``cape``, ``rope`` or ``none``.
        bias: whether the projections have a bias.
        dropout: attention dropout probability (training only).

    Example:
        >>> import torch
        >>> attn = CameraAttention(64, 4)
        >>> cams = torch.eye(4).expand(1, 2, 4, 4)
        >>> t = attn.transforms(cams, patch_grid=(3, 3))
        >>> attn(torch.randn(1, 18, 64), t).shape
        torch.Size([1, 18, 64])
    """

    def __init__(self, dim: int, heads: int, encoding: str = "prope", *, bias: bool = True,
                 dropout: float = 0.0) -> None:
        super().__init__()
        if heads <= 0 or dim % heads:
            raise ValueError(f"dim={dim} must be a positive multiple of heads={heads}")
        check_head_dim(dim // heads, encoding)
        self.heads, self.head_dim = heads, dim // heads
        self.encoding, self.dropout = encoding, dropout
        self.to_q = nn.Linear(dim, dim, bias=bias)
        self.to_kv = nn.Linear(dim, 2 * dim, bias=bias)
        self.proj = nn.Linear(dim, dim, bias=bias)

    def transforms(self, viewmats: Tensor, Ks: Tensor | None = None, *,
                   image_size: tuple[int, int] | None = None,
                   patch_grid: tuple[int, int] | None = None,
                   positions: Tensor | None = None) -> CameraTransforms:
        """The per-camera maps of one token set for this module's head size and encoding."""
        return camera_transforms(viewmats, Ks, head_dim=self.head_dim, encoding=self.encoding,
                                 image_size=image_size, patch_grid=patch_grid,
                                 positions=positions)

    def _split(self, x: Tensor) -> Tensor:
        batch, tokens, _ = x.shape
        return x.reshape(batch, tokens, self.heads, self.head_dim).transpose(1, 2)

    def forward(self, x: Tensor, transforms: CameraTransforms, context: Tensor | None = None,
                context_transforms: CameraTransforms | None = None,
                attn_mask: Tensor | None = None) -> Tensor:
        """Attend from ``x`` ``[B, T, dim]`` to ``context`` ``[B, S, dim]`` (default: ``x``).

        Returns ``[B, T, dim]``.
        """
        if x.ndim != 3:
            raise ValueError(f"x must be [B, T, dim], got {x.shape=}")
        if context is None:
            context, context_transforms = x, transforms
        elif context_transforms is None:
            raise ValueError("cross-attention needs context_transforms for the context cameras")
        for given in (transforms, context_transforms):
            if given.encoding != self.encoding:
                raise ValueError(
                    f"transforms use {given.encoding!r}, this module {self.encoding!r}"
                )
        q = self._split(self.to_q(x))
        k, v = (self._split(part) for part in self.to_kv(context).chunk(2, dim=-1))
        out = prope_attention(q, k, v, transforms=transforms, kv_transforms=context_transforms,
                              attn_mask=attn_mask,
                              dropout_p=self.dropout if self.training else 0.0)
        return self.proj(out.transpose(1, 2).reshape(x.shape[0], x.shape[1], -1))

