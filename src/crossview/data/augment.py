"""Training augmentation for stereo (as in RAFT-Stereo) and optical flow (as in RAFT).

Augmentors work on sample dicts of torch tensors (images ``float32 [3, H, W]`` in 0..255,
disparities ``[H, W]``, flows ``[2, H, W]``, masks ``bool [H, W]``, the keys of
:mod:`crossview.data.synthetic`) and draw every random number from the
``numpy.random.Generator`` they are called with, so ``augmentor(sample, rng)`` is a pure
function (a :class:`~crossview.data.synthetic.dataset.SyntheticDataset` passes a generator
derived from the sample index: augmented training data is reproducible and shardable).

Steps (defaults are the published values):
- colour jitter (brightness 0.4, contrast 0.4, saturation 0..1.4 (RAFT: 0.6..1.4), hue up to
  0.5/3.14 turn), the same for both images or, with probability ``asymmetric_probability``
  (0.2), independent;
- occlusion erasing: with probability 0.5, 1-2 rectangles of 50-100 px in the second image are
  filled with its mean colour (labels unchanged: they describe the scene, not the pixels);
- random scale ``2**U(min_scale, max_scale)``, stretched independently in x and y with
  probability 0.8 (``2**U(-0.2, 0.2)``), then a random crop; labels are resampled bilinearly with
  the images and multiplied by the scale along their axis (``focal_length`` by the x scale); a
  resampled mask is true only where all the pixels bilinear resampling reads were true;
- stereo only: a small vertical shift of the second image (up to ``max_y_jitter`` px, RAFT-Stereo's
  ``yjitter``), which makes the pair slightly unrectified; each view's labels stay registered
  with its image (``disparity`` with ``image0``, ``disparity1`` with ``image1``) and remain the
  horizontal disparities of the unshifted pair;
- flow only: random horizontal (0.5) and vertical (0.1) flips of both images and labels;
- optionally (``camera``, not in the published recipes), per-view sensor effects on the crop:
  exposure, tone, vignetting, blur, noise, monochrome rigs, 8-bit storage.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from crossview.data.camera_effects import CameraEffects, luma
from crossview.pixel_grid import to_grid_coords

Sample = dict[str, torch.Tensor]

# the entries that describe the pixels of image1 (the y jitter moves them with it)
SECOND_VIEW = ("image1", "disparity1", "valid1", "valid_noc1", "flow_backward")

def _hue_matrix(shift: float) -> torch.Tensor:
    """``[3, 3]`` RGB rotation about the grey axis by ``shift`` turns (hue shift in YIQ)."""
    to_yiq = torch.tensor([[0.299, 0.587, 0.114], [0.596, -0.274, -0.322],
                           [0.211, -0.523, 0.312]], dtype=torch.float64)
    angle = 2 * np.pi * shift
    c, s = np.cos(angle), np.sin(angle)
    rot = torch.tensor([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]], dtype=torch.float64)
    return (torch.linalg.inv(to_yiq) @ rot @ to_yiq).float()


@dataclass(frozen=True)
class JitterParams:
    """One draw of :class:`ColorJitter`: the step order (0 brightness, 1 contrast,
    2 saturation, 3 hue) and the factors."""

    order: tuple[int, ...]
    brightness: float
    contrast: float
    saturation: float
    hue: float


@dataclass(frozen=True)
class ColorJitter:
    """Random brightness, contrast, saturation and hue, in random order (as torchvision).

    ``brightness``/``contrast`` ``b`` draw a factor in ``[max(0, 1 - b), 1 + b]``;
    ``saturation`` is the factor range; ``hue`` is the largest shift in turns (``<= 0.5``),
    applied as a rotation about the grey axis in YIQ space.
    """

    brightness: float = 0.4
    contrast: float = 0.4
    saturation: tuple[float, float] = (0.0, 1.4)
    hue: float = 0.5 / 3.14

    def draw(self, rng: np.random.Generator) -> JitterParams:
        """The random parameters of one application."""
        return JitterParams(
            order=tuple(int(i) for i in rng.permutation(4)),
            brightness=float(rng.uniform(max(0.0, 1 - self.brightness), 1 + self.brightness)),
            contrast=float(rng.uniform(max(0.0, 1 - self.contrast), 1 + self.contrast)),
            saturation=float(rng.uniform(*self.saturation)),
            hue=float(rng.uniform(-self.hue, self.hue)),
        )

    @staticmethod
    def apply(image: torch.Tensor, params: JitterParams) -> torch.Tensor:
        """Apply drawn ``params`` to ``image [3, H, W]`` in 0..255; returns a new tensor."""
        if image.ndim != 3 or image.shape[0] != 3:
            raise ValueError(f"image must be [3, H, W], got {image.shape=}")
        out = image.float()
        for step in params.order:
            if step == 0:
                out = out * params.brightness
            elif step == 1:
                mean = luma(out).mean()
                out = (out - mean) * params.contrast + mean
            elif step == 2:
                grey = luma(out)
                out = (out - grey) * params.saturation + grey
            else:
                out = torch.einsum("ij,jhw->ihw", _hue_matrix(params.hue), out)
            out = out.clamp(0.0, 255.0)
        return out

    def __call__(self, image: torch.Tensor, rng: np.random.Generator) -> torch.Tensor:
        return self.apply(image, self.draw(rng))


def erase_rectangles(image: torch.Tensor, rng: np.random.Generator, *, probability: float = 0.5,
                     sizes: tuple[int, int] = (50, 100), count: tuple[int, int] = (1, 2)
                     ) -> torch.Tensor:
    """RAFT's occlusion eraser: fill random rectangles of ``image [3, H, W]`` with its mean
    colour (with ``probability``; ``count`` and ``sizes`` are inclusive ranges)."""
    if rng.random() >= probability:
        return image
    out = image.clone()
    mean = image.reshape(3, -1).mean(1)[:, None, None]
    _, h, w = image.shape
    for _ in range(int(rng.integers(count[0], count[1] + 1))):
        x0, y0 = int(rng.integers(0, w)), int(rng.integers(0, h))
        dx, dy = (int(d) for d in rng.integers(sizes[0], sizes[1] + 1, size=2))
        out[:, y0:y0 + dy, x0:x0 + dx] = mean
    return out


def _crop_grid(size: tuple[int, int], scaled: tuple[int, int], crop: tuple[int, int],
               top: int, left: int, flip_x: bool, flip_y: bool) -> torch.Tensor:
    """The ``grid_sample`` grid ``[1, ch, cw, 2]`` (``align_corners=True``) that reads, from an
    image of ``size``, the ``crop`` at ``(top, left)`` of that image resized to ``scaled`` (as
    ``F.interpolate(mode="bilinear", align_corners=False)``) and flipped as asked.

    Sampling only the crop costs its area, not the area of the whole resized image.
    """
    (h, w), (nh, nw), (ch, cw) = size, scaled, crop
    rows = torch.arange(top, top + ch, dtype=torch.float64)
    cols = torch.arange(left, left + cw, dtype=torch.float64)
    if flip_y:
        rows = nh - 1 - rows
    if flip_x:
        cols = nw - 1 - cols
    # F.interpolate's source of output pixel i is (i + 0.5) * in / out - 0.5, clamped
    ys = to_grid_coords(((rows + 0.5) * (h / nh) - 0.5).clamp(0, h - 1), h)
    xs = to_grid_coords(((cols + 0.5) * (w / nw) - 0.5).clamp(0, w - 1), w)
    gy, gx = torch.meshgrid(ys, xs, indexing="ij")
    return torch.stack([gx, gy], -1)[None].float()


def _sample(value: torch.Tensor, grid: torch.Tensor) -> torch.Tensor:
    """Bilinear samples of ``[C, H, W]`` or ``[H, W]`` on ``grid``; a bool mask stays true only
    where every pixel read was true."""
    squeeze = value.ndim == 2
    x = value[None, None] if squeeze else value[None]
    out = F.grid_sample(x.float(), grid, mode="bilinear", padding_mode="border",
                        align_corners=True)
    if value.dtype == torch.bool:
        out = out > 1.0 - 1e-4
    return out[0, 0] if squeeze else out[0]


def _label_scale(key: str, sx: float, sy: float) -> torch.Tensor | float | None:
    """How a label's values scale when the image is stretched by ``(sx, sy)``."""
    if key.startswith("disparity"):
        return sx
    if key.startswith("flow"):
        return torch.tensor([sx, sy]).view(2, 1, 1)
    return None


@dataclass(frozen=True)
class SpatialParams:
    """Drawn spatial parameters: target size before cropping, crop offsets, y jitter, flips."""

    size: tuple[int, int]
    top: int
    left: int
    y_jitter: int = 0
    flip_x: bool = False
    flip_y: bool = False


def _is_image(key: str) -> bool:
    return key.startswith("image")


def spatial_transform(sample: Sample, params: SpatialParams, crop: tuple[int, int]) -> Sample:
    """Resize every entry to ``params.size`` (label values scaled), flip, then crop ``crop``
    (computed as one bilinear sampling of the crop).

    ``image1`` and the labels of its pixels (:data:`SECOND_VIEW`) are cropped
    ``params.y_jitter`` rows lower (clamped to the image). Flips mirror
    images and labels and negate the flipped flow component. Scalars pass unchanged (except
    ``focal_length``, scaled with x). Non-occlusion masks (``valid_noc``, ``valid_noc1``) lose
    the pixels whose match now falls outside the crop.
    """
    h, w = next(v for k, v in sample.items() if _is_image(k)).shape[-2:]
    nh, nw = params.size
    sx, sy = nw / w, nh / h
    ch = crop[0]
    grids: dict[int, torch.Tensor] = {}
    out: Sample = {}
    for key, value in sample.items():
        if value.ndim < 2:
            out[key] = value * sx if key == "focal_length" else value
            continue
        if value.shape[-2:] != (h, w):  # e.g. keypoint lists: not a map this can resample
            raise ValueError(f"sample[{key!r}] is not an [..., H, W] map of the images' size "
                             f"{(h, w)}: {tuple(value.shape)}")
        top = params.top
        if key in SECOND_VIEW:  # image1 and its own labels stay registered
            top = int(np.clip(top + params.y_jitter, 0, nh - ch))
        if top not in grids:
            grids[top] = _crop_grid((h, w), (nh, nw), crop, top, params.left, params.flip_x,
                                    params.flip_y)
        v = _sample(value, grids[top])
        scale = _label_scale(key, sx, sy)
        if scale is not None:
            v = v * scale
        if key.startswith("flow") and (params.flip_x or params.flip_y):
            v = v * torch.tensor([-1.0 if params.flip_x else 1.0,
                                  -1.0 if params.flip_y else 1.0]).view(2, 1, 1)
        out[key] = v
    for mask_key, (label_key, sign) in _match_labels(out).items():
        if mask_key in out and label_key in out:
            out[mask_key] = out[mask_key] & _match_inside(out[label_key], sign)
    return out


def _match_labels(sample: Sample) -> dict[str, tuple[str, float]]:
    """Each non-occlusion mask and the label that gives a pixel's match in the other view
    (with the sign of a disparity): a pixel whose match left the crop is no longer seen."""
    if "flow" in sample or "flow_backward" in sample:
        return {"valid_noc": ("flow", 1.0), "valid_noc1": ("flow_backward", 1.0)}
    return {"valid_noc": ("disparity", -1.0), "valid_noc1": ("disparity1", 1.0)}


def _match_inside(label: torch.Tensor, sign: float) -> torch.Tensor:
    """Whether ``p + flow`` (``[2, H, W]``) or ``x + sign * d`` (``[H, W]``) is in the image."""
    h, w = label.shape[-2:]
    xs = torch.arange(w, dtype=label.dtype)
    if label.ndim == 2:
        x = xs + sign * label
        return (x >= 0) & (x <= w - 1)
    x = xs + label[0]
    y = torch.arange(h, dtype=label.dtype)[:, None] + label[1]
    return (x >= 0) & (x <= w - 1) & (y >= 0) & (y <= h - 1)


@dataclass(frozen=True)
class Augmentor:
    """RAFT / RAFT-Stereo training augmentation; call as ``augmentor(sample, rng)``.

    Attributes:
        crop: ``(H, W)`` of the output.
        min_scale, max_scale: log2 range of the random scale (RAFT-Stereo: -0.2, 0.4).
        stretch: log2 range of the extra x/y stretch, applied with ``stretch_probability``.
        spatial_probability: chance of rescaling at all (RAFT-Stereo: 1.0, RAFT: 0.8).
        color: the colour jitter; ``asymmetric_probability`` jitters the images independently.
        erase_probability: chance of erasing rectangles in ``image1``; ``erase_sizes`` is the
            inclusive range of their sides in pixels.
        max_y_jitter: stereo vertical shift of ``image1`` in pixels (0 disables).
        flip_x_probability, flip_y_probability: flow flips (keep 0 for stereo: a horizontal
            flip would turn a left image into a right one).
        camera: sensor effects per view (:mod:`crossview.data.camera_effects`), applied last
            to the cropped images, as a camera records the final pixels (None: off, the
            published recipes).
    """

    crop: tuple[int, int]
    min_scale: float = -0.2
    max_scale: float = 0.4
    stretch: float = 0.2
    stretch_probability: float = 0.8
    spatial_probability: float = 1.0
    color: ColorJitter | None = ColorJitter()
    asymmetric_probability: float = 0.2
    erase_probability: float = 0.5
    erase_sizes: tuple[int, int] = (50, 100)
    max_y_jitter: int = 0
    flip_x_probability: float = 0.0
    flip_y_probability: float = 0.0
    camera: CameraEffects | None = None

    def _spatial(self, rng: np.random.Generator, h: int, w: int) -> SpatialParams:
        ch, cw = self.crop
        # never smaller than the crop (plus RAFT's 8 px margin when possible)
        floor = max((ch + 8) / h, (cw + 8) / w)
        scale = 2 ** rng.uniform(self.min_scale, self.max_scale)
        sx = sy = scale
        if rng.random() < self.stretch_probability:
            sx *= 2 ** rng.uniform(-self.stretch, self.stretch)
            sy *= 2 ** rng.uniform(-self.stretch, self.stretch)
        if rng.random() >= self.spatial_probability:
            sx = sy = 1.0
        sx, sy = max(sx, floor, cw / w), max(sy, floor, ch / h)
        nh, nw = max(ch, round(h * sy)), max(cw, round(w * sx))
        y_jitter = int(rng.integers(-self.max_y_jitter, self.max_y_jitter + 1))
        return SpatialParams(
            size=(nh, nw),
            top=int(rng.integers(0, nh - ch + 1)),
            left=int(rng.integers(0, nw - cw + 1)),
            y_jitter=y_jitter,
            flip_x=bool(rng.random() < self.flip_x_probability),
            flip_y=bool(rng.random() < self.flip_y_probability),
        )

    def __call__(self, sample: Sample, rng: np.random.Generator) -> Sample:
        for key in ("image0", "image1"):
            if key not in sample or sample[key].ndim != 3 or sample[key].shape[0] != 3:
                shape = None if key not in sample else tuple(sample[key].shape)
                raise ValueError(f"sample[{key!r}] must be a [3, H, W] image, got {shape}")
        out = dict(sample)
        if self.color is not None:
            if rng.random() < self.asymmetric_probability:
                out["image0"] = self.color(out["image0"], rng)
                out["image1"] = self.color(out["image1"], rng)
            else:
                params = self.color.draw(rng)
                out["image0"] = self.color.apply(out["image0"], params)
                out["image1"] = self.color.apply(out["image1"], params)
        out["image1"] = erase_rectangles(out["image1"], rng, probability=self.erase_probability,
                                         sizes=self.erase_sizes)
        h, w = out["image0"].shape[-2:]
        out = spatial_transform(out, self._spatial(rng, h, w), self.crop)
        if self.camera is not None:
            out["image0"], out["image1"] = self.camera(out["image0"], out["image1"], rng)
        return out


def stereo_augmentor(crop: tuple[int, int], **overrides: object) -> Augmentor:
    """RAFT-Stereo's settings: scale 2**U(-0.2, 0.4), asymmetric colour 0.2, y jitter 2 px."""
    options: dict[str, object] = {"min_scale": -0.2, "max_scale": 0.4, "max_y_jitter": 2}
    options.update(overrides)
    return Augmentor(crop, **options)  # type: ignore[arg-type]


def flow_augmentor(crop: tuple[int, int], **overrides: object) -> Augmentor:
    """RAFT's settings: scale 2**U(-0.1, 1.0) with probability 0.8, flips 0.5 / 0.1,
    saturation 0.6..1.4."""
    options: dict[str, object] = {"min_scale": -0.1, "max_scale": 1.0, "spatial_probability": 0.8,
                                  "flip_x_probability": 0.5, "flip_y_probability": 0.1,
                                  "color": ColorJitter(saturation=(0.6, 1.4))}
    options.update(overrides)
    return Augmentor(crop, **options)  # type: ignore[arg-type]
