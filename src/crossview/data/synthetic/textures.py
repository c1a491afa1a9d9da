"""Textures for synthetic scenes: procedural noise, skies and the photographs scikit-image ships.

Every texture is an ``[h, w, 3]`` float32 array in 0..255. Randomness comes only from the
``numpy.random.Generator`` passed in, so a texture is a pure function of that generator's state.

The scikit-image images are split once, by name, into a training set and a held-out set
(:data:`HELDOUT_IMAGES`); held-out benchmarks and held-out warps draw only from the held-out set
and training data only from the training set, so no held-out photograph is ever trained on.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import skimage.data
import torch
import torch.nn.functional as F
from PIL import Image

# Photographs and scans shipped inside the scikit-image wheel (no download needed). Not
# motorcycle_left.png: the Middlebury motorcycle pair is a real test scene, so none of its pixels
# may be trained on (the bundled weights were trained before it was removed; docs/synthetic.md).
TRAIN_IMAGES = (
    "astronaut.png", "brick.png", "camera.png", "coins.png", "grass.png", "gravel.png",
    "moon.png", "page.png", "text.png", "hubble_deep_field.jpg", "ihc.png", "color.png",
    "microaneurysms.png", "cell.png", "clock_motion.png",
)
HELDOUT_IMAGES = ("chelsea.png", "coffee.png", "rocket.jpg", "retina.jpg")
SPLITS = ("train", "heldout")


def _check_split(split: str) -> None:
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")


@functools.cache
def load_image(name: str) -> np.ndarray:
    """A scikit-image data file as an ``[H, W, 3]`` float32 RGB array in 0..255 (cached)."""
    path = Path(skimage.data.__file__).parent / name
    with Image.open(path) as image:
        rgb = np.asarray(image.convert("RGB"), dtype=np.float32)
    rgb.setflags(write=False)
    return rgb


def image_names(split: str) -> tuple[str, ...]:
    """The scikit-image file names of ``split`` (``"train"`` or ``"heldout"``)."""
    _check_split(split)
    return TRAIN_IMAGES if split == "train" else HELDOUT_IMAGES


def _upsample(grid: np.ndarray, size: tuple[int, int], mode: str = "bicubic") -> np.ndarray:
    """Upsampling (bicubic or bilinear) of a ``[C, h, w]`` grid to ``[C, *size]``."""
    t = torch.from_numpy(np.ascontiguousarray(grid, dtype=np.float32))[None]
    return F.interpolate(t, size=size, mode=mode, align_corners=True)[0].numpy()


def value_noise(rng: np.random.Generator, size: tuple[int, int], channels: int = 1, *,
                octaves: int = 4, base_cells: int = 3, persistence: float = 0.55) -> np.ndarray:
    """Multi-octave value noise ``[channels, h, w]`` with zero mean and unit-ish std.

    Octave ``o`` adds a random grid of ``base_cells * 2**o`` cells (along the longer side),
    weighted by ``persistence**o``; the sum is built coarse to fine (bicubic upsampling, add the
    next octave) so only the last step works at full size.
    """
    h, w = size
    longer = max(h, w)

    def cells(n: int) -> tuple[int, int]:
        n = min(n, longer)
        return max(2, round(n * h / longer) + 1), max(2, round(n * w / longer) + 1)

    total = rng.standard_normal((channels, *cells(base_cells))).astype(np.float32)
    for octave in range(1, octaves):
        grid = cells(base_cells * 2**octave)
        total = _upsample(total, grid) + persistence**octave * rng.standard_normal(
            (channels, *grid)).astype(np.float32)
    # the finest grid is already dense: bilinear suffices for the last (full-size) step
    total = _upsample(total, size, "bilinear" if octaves > 1 else "bicubic")
    total -= total.mean()
    return total / max(float(total.std()), 1e-6)


def _palette(rng: np.random.Generator, field: np.ndarray, colours: int) -> np.ndarray:
    """Map a scalar field ``[h, w]`` through a random piecewise-linear colour ramp."""
    stops = np.sort(rng.uniform(-2.0, 2.0, colours))
    stops[0], stops[-1] = -3.0, 3.0
    rgb = rng.uniform(0.0, 255.0, (colours, 3))
    return np.stack([np.interp(field, stops, rgb[:, c]) for c in range(3)], -1)


def noise_texture(rng: np.random.Generator, size: tuple[int, int]) -> np.ndarray:
    """Coloured fractal noise, ``[h, w, 3]`` float32 in 0..255."""
    octaves = int(rng.integers(3, 7))
    field = value_noise(rng, size, octaves=octaves, base_cells=int(rng.integers(2, 6)),
                        persistence=float(rng.uniform(0.4, 0.75)))[0]
    rgb = _palette(rng, field, int(rng.integers(2, 6)))
    detail = value_noise(rng, size, 1, octaves=2, base_cells=max(size) // 8 + 1)[0]
    rgb += (rng.uniform(0.0, 25.0) * detail)[..., None]
    return np.clip(rgb, 0.0, 255.0).astype(np.float32)


def stripe_texture(rng: np.random.Generator, size: tuple[int, int]) -> np.ndarray:
    """Sinusoidal stripes or checks with noise-warped phase, ``[h, w, 3]`` float32 in 0..255."""
    h, w = size
    ys, xs = np.mgrid[0:h, 0:w].astype(np.float32)
    period = rng.uniform(4.0, 24.0)
    angle = rng.uniform(0.0, np.pi)
    warp = value_noise(rng, size, octaves=3)[0] * rng.uniform(0.0, 3.0)
    phase = (np.cos(angle) * xs + np.sin(angle) * ys) * (2 * np.pi / period) + warp
    wave = np.sin(phase)
    if rng.random() < 0.4:  # checks: product with a perpendicular wave
        wave = wave * np.sin((-np.sin(angle) * xs + np.cos(angle) * ys) * (2 * np.pi / period))
    sharp = rng.uniform(1.0, 4.0)
    field = np.tanh(sharp * wave) / np.tanh(sharp) * 2.0
    return np.clip(_palette(rng, field, 2), 0.0, 255.0).astype(np.float32)


def photo_texture(rng: np.random.Generator, size: tuple[int, int], split: str) -> np.ndarray:
    """A random crop of a scikit-image photograph of ``split`` with a random colour mix."""
    names = image_names(split)
    image = load_image(names[int(rng.integers(len(names)))])
    h, w = size
    ih, iw = image.shape[:2]
    ch, cw = min(h, ih), min(w, iw)
    y0 = int(rng.integers(ih - ch + 1))
    x0 = int(rng.integers(iw - cw + 1))
    crop = image[y0:y0 + ch, x0:x0 + cw]
    if (ch, cw) != (h, w):
        crop = _upsample(crop.transpose(2, 0, 1), size).transpose(1, 2, 0)
    mix = np.eye(3) * rng.uniform(0.6, 1.2, 3) + rng.uniform(-0.25, 0.25, (3, 3))
    rgb = crop @ mix.T.astype(np.float32) + rng.uniform(-30.0, 30.0, 3).astype(np.float32)
    return np.clip(rgb, 0.0, 255.0).astype(np.float32)


def fade_rows(texture: np.ndarray, footprint: np.ndarray) -> np.ndarray:
    """``texture`` ``[h, w, 3]`` with row ``r`` low-passed to ``footprint[r]`` texels.

    A texture seen at a grazing angle is minified more with every row farther away; without
    anti-aliasing its detail turns into noise that no warp reproduces. Each row is blended
    from the two mip-map levels (area averages over powers of two, upsampled bilinearly)
    around ``log2 footprint``; a footprint of at most 1 keeps the row as it is.
    """
    h, w = texture.shape[:2]
    level = np.log2(np.clip(footprint, 1.0, float(min(h, w))))
    full = torch.from_numpy(np.ascontiguousarray(texture.transpose(2, 0, 1), np.float32))[None]
    levels = [full[0]]
    for k in range(1, int(np.ceil(level.max())) + 1):
        small = F.interpolate(full, size=(max(1, h >> k), max(1, w >> k)), mode="area")
        levels.append(F.interpolate(small, size=(h, w), mode="bilinear",
                                    align_corners=False)[0])
    stack = torch.stack(levels).numpy()  # [levels, 3, h, w]
    lo = np.floor(level).astype(np.int64)
    hi = np.minimum(lo + 1, len(levels) - 1)
    frac = (level - lo).astype(np.float32)[:, None]
    rows = np.arange(h)
    out = stack[lo, :, rows] * (1 - frac)[:, None] + stack[hi, :, rows] * frac[:, None]
    return np.ascontiguousarray(out.transpose(0, 2, 1), np.float32)  # [h, 3, w] -> [h, w, 3]


def sky_texture(rng: np.random.Generator, size: tuple[int, int]) -> np.ndarray:
    """A nearly textureless sky, ``[h, w, 3]`` float32 in 0..255: a flat blue or grey colour,
    a vertical brightness ramp and faint large-scale clouds (flat with probability 0.3)."""
    h, w = size
    if rng.random() < 0.5:  # clear: blue, brighter towards the horizon (the bottom rows)
        colour = rng.uniform([90.0, 130.0, 180.0], [170.0, 200.0, 250.0])
    else:  # overcast: grey to white
        colour = np.full(3, rng.uniform(150.0, 245.0)) + rng.uniform(-8.0, 8.0, 3)
    ramp = rng.uniform(0.0, 40.0) * np.linspace(0.0, 1.0, h, dtype=np.float32)[:, None, None]
    rgb = np.broadcast_to(colour.astype(np.float32), (h, w, 3)) + ramp
    if rng.random() >= 0.3:
        clouds = value_noise(rng, size, octaves=2, base_cells=2)[0]
        rgb = rgb + (rng.uniform(0.0, 8.0) * clouds)[..., None]
    return np.clip(rgb, 0.0, 255.0).astype(np.float32)


def random_texture(rng: np.random.Generator, size: tuple[int, int], split: str = "train",
                   photo_probability: float = 0.5) -> np.ndarray:
    """One texture ``[h, w, 3]`` float32 in 0..255: a photograph crop, noise or stripes."""
    _check_split(split)
    u = rng.random()
    if u < photo_probability:
        return photo_texture(rng, size, split)
    if u < photo_probability + (1.0 - photo_probability) * 0.75:
        return noise_texture(rng, size)
    return stripe_texture(rng, size)
