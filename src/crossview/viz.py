"""Pictures of results: disparity with a colour bar, flow on the standard colour wheel,
consistency masks, self relative positions (the MatchAttention paper's Fig. 6 view), and
semantic matches (side-by-side images with match lines, the source warped into the target).

Every function takes numpy arrays or tensors and returns ``[H, W', 3]`` uint8 RGB arrays (or
``[H, W]`` for masks), ready for :func:`crossview.data.io.write_image`.
"""

from __future__ import annotations

import colorsys
import math

import numpy as np
import torch
import torch.nn.functional as F
from matplotlib import colormaps
from PIL import Image, ImageDraw

ArrayLike = np.ndarray | torch.Tensor

# Segment lengths of the Middlebury flow colour wheel (Baker et al., 2011):
# red-yellow, yellow-green, green-cyan, cyan-blue, blue-magenta, magenta-red.
_WHEEL_SEGMENTS = (15, 6, 4, 11, 13, 6)
# the colour-wheel key of flow pictures: white margin around it (px), its label's height (the
# default bitmap font's), and its radius's bounds (an eighth of the picture's height between them)
KEY_MARGIN = 4
_KEY_LABEL_HEIGHT = 12
KEY_MIN_RADIUS, KEY_MAX_RADIUS = 16, 64


def _numpy(x: ArrayLike) -> np.ndarray:
    return x.detach().float().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


def colour_wheel() -> np.ndarray:
    """The 55 colours of the Middlebury flow wheel, ``[55, 3]`` float in 0..255."""
    rows = []
    # (red, green, blue) per segment: 1 = full, "up" = rising ramp, "down" = falling ramp
    patterns = ((1, "up", 0), ("down", 1, 0), (0, 1, "up"), (0, "down", 1), ("up", 0, 1),
                (1, 0, "down"))
    for n, pattern in zip(_WHEEL_SEGMENTS, patterns, strict=True):
        for i in range(n):
            up = np.floor(255 * i / n)
            values = {0: 0.0, 1: 255.0, "up": up, "down": 255 - up}
            rows.append([values[c] for c in pattern])
    return np.array(rows, dtype=np.float64)


def flow_to_colour(flow: ArrayLike, max_flow: float | None = None, *,
                   key: bool = False) -> np.ndarray:
    """Flow ``[H, W, 2]`` or ``[2, H, W]`` (x, y px) on the standard colour wheel, ``[H, W, 3]``.

    Hue is the direction (right = red, up = violet/blue side, as in the Middlebury code),
    saturation the magnitude relative to ``max_flow`` (default: the largest magnitude); zero
    flow is white, and magnitudes beyond ``max_flow`` are darkened. With ``key``, the colour
    wheel that reads the picture (:func:`flow_colour_key`, labelled with ``max_flow``) is
    appended on the right, ``[max(H, key height), W + key width, 3]``; the flow's pixels are
    unchanged (rows below them, if the key is the taller, are white).
    """
    flow = _numpy(flow).astype(np.float64)
    if flow.ndim == 3 and flow.shape[0] == 2 and flow.shape[2] != 2:
        flow = flow.transpose(1, 2, 0)
    if flow.ndim != 3 or flow.shape[2] != 2:
        raise ValueError(f"flow must be [H, W, 2] or [2, H, W], got {flow.shape=}")
    if max_flow is not None and not (math.isfinite(max_flow) and max_flow > 0):
        raise ValueError(f"max_flow must be a positive number of pixels, got {max_flow=}")
    u, v = np.nan_to_num(flow[..., 0]), np.nan_to_num(flow[..., 1])
    radius = np.hypot(u, v)
    scale = max_flow if max_flow is not None else max(float(radius.max()), 1e-9)
    u, v, radius = u / scale, v / scale, radius / scale
    wheel = colour_wheel() / 255.0
    n = len(wheel)
    angle = np.arctan2(-v, -u) / np.pi
    fk = (angle + 1) / 2 * (n - 1)
    k0 = np.floor(fk).astype(int)
    k1 = (k0 + 1) % n
    frac = (fk - k0)[..., None]
    colour = (1 - frac) * wheel[k0] + frac * wheel[k1]
    inside = (radius <= 1)[..., None]
    colour = np.where(inside, 1 - radius[..., None] * (1 - colour), colour * 0.75)
    picture = np.floor(255 * colour).astype(np.uint8)
    if not key:
        return picture
    panel = flow_colour_key(scale, max(KEY_MIN_RADIUS, min(len(picture) // 8, KEY_MAX_RADIUS)))
    canvas = np.full((max(len(picture), len(panel)), picture.shape[1] + panel.shape[1], 3), 255,
                     np.uint8)
    canvas[:len(picture), :picture.shape[1]] = picture
    canvas[:len(panel), picture.shape[1]:] = panel
    return canvas


def flow_colour_key(max_flow: float, radius: int) -> np.ndarray:
    """The key of :func:`flow_to_colour`: the colour wheel as a disc of ``radius`` px on white,
    labelled ``max MAX_FLOW px`` below, as Middlebury flow pictures (Baker et al., 2011) show it.
    The disc's pixel at offset ``(dx, dy)`` from its centre, pixel ``(KEY_MARGIN + radius,
    KEY_MARGIN + radius)`` (x, y), has the colour of the flow ``(dx, dy) * max_flow / radius``:
    its direction is the flow's direction in the image (y down), its rim the magnitude
    ``max_flow`` (full colour). Returns ``[height, width, 3]`` uint8: the disc and the label
    under it, within margins of ``KEY_MARGIN`` px.

    Example:
        >>> key = flow_colour_key(4.0, radius=10)
        >>> key[KEY_MARGIN + 10, KEY_MARGIN + 20].tolist()  # the rim to the right: red
        [255, 0, 0]
    """
    if not (math.isfinite(max_flow) and max_flow > 0):
        raise ValueError(f"max_flow must be a positive number of pixels, got {max_flow=}")
    label = f"max {max_flow:.3g} px"
    text_width = math.ceil(ImageDraw.Draw(Image.new("RGB", (1, 1))).textlength(label))
    side = 2 * radius + 1
    label_top = KEY_MARGIN + side + 2
    canvas = Image.new("RGB", (max(side, text_width) + 2 * KEY_MARGIN,
                               label_top + _KEY_LABEL_HEIGHT + KEY_MARGIN), "white")
    dy, dx = np.mgrid[-radius:radius + 1, -radius:radius + 1].astype(np.float64)
    disc = flow_to_colour(np.stack((dx, dy), axis=-1) * (max_flow / radius), max_flow=max_flow)
    disc[np.hypot(dx, dy) > radius] = 255
    canvas.paste(Image.fromarray(disc), (KEY_MARGIN, KEY_MARGIN))
    ImageDraw.Draw(canvas).text((KEY_MARGIN, label_top), label, fill="black")
    return np.asarray(canvas)


def disparity_to_colour(disparity: ArrayLike, *, vmin: float | None = None,
                        vmax: float | None = None, cmap: str = "turbo",
                        colour_bar: bool = True) -> np.ndarray:
    """Disparity ``[H, W]`` (px) through ``cmap``; with ``colour_bar`` a labelled bar is appended
    on the right (``[H, W + bar, 3]``). The range defaults to the 1st..99th percentile."""
    disp = _numpy(disparity).astype(np.float64)
    if disp.ndim != 2:
        raise ValueError(f"disparity must be [H, W], got {disp.shape=}")
    finite = disp[np.isfinite(disp)]
    low = vmin if vmin is not None else (float(np.percentile(finite, 1)) if finite.size else 0.0)
    high = vmax if vmax is not None else (float(np.percentile(finite, 99)) if finite.size else 1.0)
    high = max(high, low + 1e-6)
    table = colormaps[cmap]
    picture = table(np.clip((np.nan_to_num(disp, nan=low) - low) / (high - low), 0, 1))
    picture = (picture[..., :3] * 255).astype(np.uint8)
    return _append_colour_bar(picture, table, low, high) if colour_bar else picture


def depth_to_colour(depth: ArrayLike, keep: ArrayLike, *, cmap: str = "turbo_r") -> np.ndarray:
    """Depth ``[H, W]`` (metres) of the ``keep`` pixels ``[H, W]`` bool through ``cmap`` (near
    red, far blue), the others black, with a colour bar labelled in metres appended on the
    right (``[H, W + bar, 3]``); the range is the kept depths' 1st..99th percentile."""
    depth, keep = _numpy(depth).astype(np.float64), _numpy(keep).astype(bool)
    kept = depth[keep]
    low, high = ((float(np.percentile(kept, 1)), float(np.percentile(kept, 99))) if kept.size
                 else (0.0, 1.0))
    picture = disparity_to_colour(np.where(keep, depth, np.nan), vmin=low, vmax=high, cmap=cmap)
    picture = picture.copy()
    picture[:, :depth.shape[1]][~keep] = 0
    return picture


def _append_colour_bar(picture: np.ndarray, table, low: float, high: float) -> np.ndarray:
    """A vertical bar (high at the top) with min / mid / max labels, right of ``picture``."""
    h = picture.shape[0]
    bar_w, label_w = max(8, h // 32), 48
    ramp = table(np.linspace(1, 0, h))[:, None, :3].repeat(bar_w, axis=1)
    canvas = Image.new("RGB", (picture.shape[1] + bar_w + label_w + 4, h), "white")
    canvas.paste(Image.fromarray(picture), (0, 0))
    canvas.paste(Image.fromarray((ramp * 255).astype(np.uint8)), (picture.shape[1] + 2, 0))
    draw = ImageDraw.Draw(canvas)
    x = picture.shape[1] + bar_w + 4
    for value, y in ((high, 0), ((low + high) / 2, h // 2 - 5), (low, h - 11)):
        draw.text((x, max(y, 0)), f"{value:.1f}", fill="black")
    return np.asarray(canvas)


def mask_to_image(mask: ArrayLike) -> np.ndarray:
    """Boolean mask ``[H, W]`` as uint8 0 / 255."""
    mask = _numpy(mask)
    if mask.ndim != 2:
        raise ValueError(f"mask must be [H, W], got {mask.shape=}")
    return np.where(mask.astype(bool), 255, 0).astype(np.uint8)


def self_rpos_picture(self_rpos: ArrayLike, image: ArrayLike | None = None, *,
                      step: int = 24) -> np.ndarray:
    """Where each pixel draws its information from (the paper's Fig. 6 view), ``[H, W, 3]``.

    ``self_rpos [H, W, 2]`` (px) is coloured on the flow wheel and blended with the grey
    ``image [H, W, 3]`` (if given); every ``step`` px an arrow runs from the pixel to the
    centre of its self-attention window. In occluded regions the arrows point to the visible
    surface the model copies its match from.
    """
    rpos = _numpy(self_rpos).astype(np.float64)
    if rpos.ndim != 3 or rpos.shape[2] != 2:
        raise ValueError(f"self_rpos must be [H, W, 2], got {rpos.shape=}")
    picture = flow_to_colour(rpos).astype(np.float64)
    if image is not None:
        grey = _numpy(image).astype(np.float64).mean(-1, keepdims=True)
        if grey.shape[:2] != rpos.shape[:2]:
            raise ValueError(f"image must match self_rpos: {grey.shape[:2]} vs {rpos.shape[:2]}")
        picture = 0.6 * picture + 0.4 * grey
    canvas = Image.fromarray(picture.astype(np.uint8))
    draw = ImageDraw.Draw(canvas)
    h, w = rpos.shape[:2]
    for y in range(step // 2, h, step):
        for x in range(step // 2, w, step):
            tx, ty = x + rpos[y, x, 0], y + rpos[y, x, 1]
            draw.line([(x, y), (tx, ty)], fill=(0, 0, 0), width=1)
            draw.ellipse([tx - 1.5, ty - 1.5, tx + 1.5, ty + 1.5], fill=(0, 0, 0))
    return np.asarray(canvas)


def _match_colour(i: int, n: int) -> tuple[int, int, int]:
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
        colour = _match_colour(i, n)
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
