"""Pictures of a semantic match: side-by-side images with match lines, and the source image
warped into the target frame by the dense flow."""

from __future__ import annotations

import colorsys

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image, ImageDraw


def _colour(i: int, n: int) -> tuple[int, int, int]:
    r, g, b = colorsys.hsv_to_rgb(i / max(n, 1), 0.9, 1.0)
    return round(255 * r), round(255 * g), round(255 * b)


def match_lines(src: np.ndarray, tgt: np.ndarray, points: np.ndarray,
                transferred: np.ndarray) -> np.ndarray:
    """``src`` and ``tgt`` (``[H, W, 3]`` uint8) side by side, the target scaled to the source
    height, with a coloured line from each source point to its transferred target point;
    returns ``[Hs, Ws + W', 3]`` uint8. Points are pixel ``(x, y)`` ``[N, 2]``."""
    hs, ws = src.shape[:2]
    ht, wt = tgt.shape[:2]
    scale = hs / ht
    tgt_img = Image.fromarray(tgt).resize((max(1, round(wt * scale)), hs), Image.BILINEAR)
    canvas = Image.new("RGB", (ws + tgt_img.width, hs))
    canvas.paste(Image.fromarray(src), (0, 0))
    canvas.paste(tgt_img, (ws, 0))
    draw = ImageDraw.Draw(canvas)
    radius = max(2, round(hs / 120))
    n = len(points)
    for i, ((x0, y0), (x1, y1)) in enumerate(zip(points, transferred, strict=True)):
        colour = _colour(i, n)
        x1, y1 = ws + x1 * scale, y1 * scale
        draw.line([(x0, y0), (x1, y1)], fill=colour, width=max(1, radius // 2))
        for x, y in ((x0, y0), (x1, y1)):
            draw.ellipse([x - radius, y - radius, x + radius, y + radius], fill=colour,
                         outline=(0, 0, 0))
    return np.asarray(canvas)


def warp_source_to_target(src: np.ndarray, flow_backward: torch.Tensor) -> np.ndarray:
    """Backward-warp ``src [Hs, Ws, 3]`` uint8 into the target frame with the target -> source
    flow ``[2, Ht, Wt]`` (px): ``out[p] = src[p + flow_backward[p]]``; ``[Ht, Wt, 3]`` uint8."""
    hs, ws = src.shape[:2]
    _, ht, wt = flow_backward.shape
    ys, xs = torch.meshgrid(torch.arange(ht, dtype=torch.float32),
                            torch.arange(wt, dtype=torch.float32), indexing="ij")
    px = xs + flow_backward[0].float()
    py = ys + flow_backward[1].float()
    # Pixel centres at integers, the image spanning [-0.5, W - 0.5]: align_corners=False.
    grid = torch.stack(((2 * px + 1) / ws - 1, (2 * py + 1) / hs - 1), -1)[None]
    image = torch.from_numpy(np.ascontiguousarray(src)).permute(2, 0, 1)[None].float()
    out = F.grid_sample(image, grid, mode="bilinear", padding_mode="border", align_corners=False)
    return out[0].permute(1, 2, 0).round().clamp(0, 255).to(torch.uint8).numpy()
