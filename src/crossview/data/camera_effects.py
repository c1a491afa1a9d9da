"""What a real camera does to an image that a clean synthetic render lacks.

A rendered pair is noise-free, perfectly focused, equally exposed in both views and in colour.
Real pairs are not: each camera of a rig meters its own exposure (ETH3D's two views differ by
up to a stop), many rigs are monochrome (KITTI 2012, ETH3D), lenses fall off towards the
corners and defocus, sensors add read noise and shot noise, and images are stored in 8 bits.
Trained only on clean renders, a matcher learns to trust pixel-exact photometry; these effects
teach it not to. Each is drawn per view (the two cameras of a rig differ), except the choice of
monochrome, which holds for the whole rig.

Images are ``float32 [3, H, W]`` in 0..255 (the project's convention); the effects change only
pixel values, never geometry, so labels stay exact.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

# ITU-R BT.601 luma (the weights torchvision's colour jitter uses for grey): how a monochrome
# sensor's response is approximated from RGB
LUMA_WEIGHTS = (0.299, 0.587, 0.114)


def luma(image: torch.Tensor) -> torch.Tensor:
    """Grey level ``[..., 1, H, W]`` of RGB images ``[..., 3, H, W]`` (e.g. ``[3, H, W]`` or a
    batch ``[N, 3, H, W]``)."""
    r, g, b = LUMA_WEIGHTS
    channel = image.unbind(-3)
    return (channel[0] * r + channel[1] * g + channel[2] * b).unsqueeze(-3)


@dataclass(frozen=True)
class ViewEffects:
    """One view's drawn effects: gain (linear factor), tone exponent, vignetting strength at
    the corners, blur sigma (px, 0: none), read-noise std and shot-noise scale (grey levels)."""

    gain: float
    gamma: float
    vignetting: float
    blur_sigma: float
    read_noise: float
    shot_noise: float


@dataclass(frozen=True)
class CameraEffects:
    """Random camera effects for an image pair; call as ``effects(image0, image1, rng)``.

    Attributes:
        exposure: log2 range of each view's gain (``2**U(-e, e)``), drawn independently per
            view.
        gamma: range of each view's tone exponent (``255 * (x / 255) ** g``).
        vignetting: largest relative fall-off at the image corners (``1 - v r^2``, ``r`` = 1 at
            the corners), drawn per view in ``[0, vignetting]``.
        blur_probability, blur_sigma: chance and sigma range (px) of a Gaussian defocus blur.
        noise_probability: chance that a view gets sensor noise: read noise with std in
            ``read_noise`` and shot noise ``shot_noise * sqrt(value / 255)`` (grey levels).
        grey_probability: chance that the rig is monochrome (both views grey, three equal
            channels).
        quantise: round to 8-bit levels at the end, as a stored photograph is.
    """

    exposure: float = 0.5
    gamma: tuple[float, float] = (0.8, 1.25)
    vignetting: float = 0.3
    blur_probability: float = 0.3
    blur_sigma: tuple[float, float] = (0.3, 1.2)
    noise_probability: float = 0.7
    read_noise: tuple[float, float] = (0.5, 4.0)
    shot_noise: tuple[float, float] = (0.0, 4.0)
    grey_probability: float = 0.2
    quantise: bool = True

    def __post_init__(self) -> None:
        for name in ("blur_probability", "noise_probability", "grey_probability"):
            value = getattr(self, name)
            if not 0 <= value <= 1:
                raise ValueError(f"{name} must be in [0, 1], got {value}")
        for name in ("gamma", "blur_sigma", "read_noise", "shot_noise"):
            lo, hi = getattr(self, name)
            if not 0 <= lo <= hi:
                raise ValueError(f"{name} must be a range 0 <= lo <= hi, got {(lo, hi)}")
        if self.gamma[0] <= 0:
            raise ValueError(f"gamma must be positive, got {self.gamma}")
        if self.exposure < 0 or not 0 <= self.vignetting < 1:
            raise ValueError(f"exposure must be >= 0 and vignetting in [0, 1), got "
                             f"{self.exposure=}, {self.vignetting=}")

    def draw(self, rng: np.random.Generator) -> ViewEffects:
        """One view's effects."""
        blur = float(rng.uniform(*self.blur_sigma)) if rng.random() < self.blur_probability else 0.0
        noisy = rng.random() < self.noise_probability
        return ViewEffects(
            gain=float(2 ** rng.uniform(-self.exposure, self.exposure)),
            gamma=float(rng.uniform(*self.gamma)),
            vignetting=float(rng.uniform(0.0, self.vignetting)),
            blur_sigma=blur,
            read_noise=float(rng.uniform(*self.read_noise)) if noisy else 0.0,
            shot_noise=float(rng.uniform(*self.shot_noise)) if noisy else 0.0,
        )

    def apply(self, image: torch.Tensor, view: ViewEffects, grey: bool,
              rng: np.random.Generator) -> torch.Tensor:
        """``image [3, H, W]`` (0..255) as camera ``view`` records it; noise is drawn from
        ``rng``. Returns a new float32 tensor in 0..255."""
        if image.ndim != 3 or image.shape[0] != 3:
            raise ValueError(f"image must be [3, H, W], got {tuple(image.shape)}")
        out = image.float()
        if grey:
            out = luma(out).expand(3, -1, -1)
        out = 255.0 * (out * (view.gain / 255.0)).clamp(0.0, 1.0) ** view.gamma
        if view.vignetting > 0:
            out = out * _falloff(out.shape[-2:], view.vignetting)
        if view.blur_sigma > 0:
            out = _gaussian_blur(out, view.blur_sigma)
        if view.read_noise > 0 or view.shot_noise > 0:
            std = view.read_noise + view.shot_noise * (out.clamp(min=0.0) / 255.0).sqrt()
            # one noise field for the three channels of a monochrome sensor
            shape = (1, *out.shape[-2:]) if grey else tuple(out.shape)
            noise = torch.from_numpy(rng.standard_normal(shape).astype(np.float32))
            out = out + std * noise
        out = out.clamp(0.0, 255.0)
        return out.round() if self.quantise else out

    def __call__(self, image0: torch.Tensor, image1: torch.Tensor,
                 rng: np.random.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """Both views of a pair, each with its own drawn effects."""
        grey = bool(rng.random() < self.grey_probability)
        return (self.apply(image0, self.draw(rng), grey, rng),
                self.apply(image1, self.draw(rng), grey, rng))


def _falloff(size: torch.Size | tuple[int, int], strength: float) -> torch.Tensor:
    """``[H, W]`` radial gain ``1 - strength r^2``, ``r`` = 0 at the centre, 1 at corners."""
    h, w = size
    y = torch.linspace(-1.0, 1.0, h)[:, None]
    x = torch.linspace(-1.0, 1.0, w)[None, :]
    return 1.0 - strength * (x * x + y * y) / 2.0


def _gaussian_blur(image: torch.Tensor, sigma: float) -> torch.Tensor:
    """Separable Gaussian blur of ``[C, H, W]`` (reflected borders, radius ``ceil(3 sigma)``)."""
    radius = max(1, int(np.ceil(3 * sigma)))
    taps = torch.arange(-radius, radius + 1, dtype=torch.float32)
    kernel = torch.exp(-0.5 * (taps / sigma) ** 2)
    kernel = kernel / kernel.sum()
    c = image.shape[0]
    x = F.pad(image[None], (radius, radius, radius, radius), mode="reflect")
    x = F.conv2d(x, kernel.view(1, 1, 1, -1).expand(c, 1, 1, -1), groups=c)
    x = F.conv2d(x, kernel.view(1, 1, -1, 1).expand(c, 1, -1, 1), groups=c)
    return x[0]
