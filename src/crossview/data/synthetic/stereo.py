"""Rectified stereo pairs with exact disparity for both views and occlusion masks.

A scene (:mod:`crossview.data.synthetic.scene`) of a slanted background plane and textured,
slanted planar objects (or, with probability ``street_probability``, a street:
:mod:`crossview.data.synthetic.street`) is seen by two cameras with the same intrinsics
(random focal length ``f``, pixels) whose centres differ by a random baseline ``B`` along x.
A point at depth ``Z`` has disparity ``f B / Z``: the left pixel ``x`` sees what the right
pixel ``x - d`` sees.

Sample keys (numpy from :func:`random_stereo_pair`, torch from :class:`SyntheticStereo`; the
names of the benchmark readers): ``image0``/``image1`` (left/right), ``disparity`` (left view),
``disparity1`` (right view), ``valid``/``valid1`` (a layer is seen: ground truth defined, left /
right), ``valid_noc``/``valid_noc1`` (also: the pixel's match is seen in the other view, not
occluded and inside the image), ``focal_length``, ``baseline``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from crossview.data.synthetic.config import SceneConfig
from crossview.data.synthetic.dataset import Sample, SyntheticDataset
from crossview.data.synthetic.objects import planar_layer, random_site, random_tilt
from crossview.data.synthetic.scene import (
    Camera,
    Layer,
    Shape,
    inverse_depth_at,
    render,
    translation,
    visible,
)
from crossview.data.synthetic.street import corner_rays, street_layout, street_orientation


@dataclass(frozen=True)
class StereoConfig(SceneConfig):
    """Parameters of random stereo scenes (the common ones are those of
    :class:`~crossview.data.synthetic.config.SceneConfig`).

    Attributes:
        max_disparity: largest disparity in pixels; ``None`` means ``W / 4``. Object disparities
            are ``d_bg + (max - d_bg) u^2`` at their centre (``u`` uniform), so most mass is small.
        baseline: baseline range (scene units).

    A slant (``max_tilt``) that would push a layer's disparity outside
    ``[0.25, max_disparity]`` is dropped: the plane faces the camera. Street scenes keep the
    same range: the ground reaches 30-80 % of ``max_disparity`` at the bottom corners, the
    street ends at a disparity 3-10x smaller, the sky is at 0.25-1 px, and poles, cars and
    side planes nearer than ``max_disparity`` allows are moved away or left out.
    """

    max_disparity: float | None = None
    baseline: tuple[float, float] = (0.05, 0.5)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.max_disparity is not None and self.max_disparity <= 1:
            raise ValueError(f"max_disparity must be > 1, got {self.max_disparity=}")
        if not 0 < self.baseline[0] <= self.baseline[1]:
            raise ValueError(f"baseline must be a positive range, got {self.baseline=}")

    @property
    def disparity_limit(self) -> float:
        return self.max_disparity if self.max_disparity is not None else self.size[1] / 4


def _disparity_range(layer: Layer, cameras: tuple[Camera, Camera], fb: float,
                     size: tuple[int, int]) -> tuple[float, float]:
    """Smallest and largest disparity a layer shows: over its outline box (disparity is affine
    in the pixels of a plane, so the box corners bound it), or over both images for an
    unbounded background."""
    if layer.shape is None:
        h, w = size
        xs, ys = np.array([0.0, w - 1, 0.0, w - 1]), np.array([0.0, 0.0, h - 1, h - 1])
        d = np.concatenate([fb * inverse_depth_at(layer, c, xs, ys) for c in cameras])
    else:  # rectified views see a point at the same depth: the left camera's z (world z)
        eu, ev = layer.shape.half_extents()
        uv = np.array([[-eu, eu, -eu, eu], [-ev, -ev, ev, ev]])
        z = layer.origin[2] + layer.axes[2] @ uv
        d = np.where(z > 0, fb / np.where(z > 0, z, 1.0), -np.inf)
    return float(d.min()), float(d.max())


def stereo_scene(rng: np.random.Generator, config: StereoConfig, split: str = "train"
                 ) -> tuple[list[Layer], Camera, Camera, float, float]:
    """A random scene and its rectified cameras: ``(layers, left, right, focal, baseline)``."""
    h, w = config.size
    dmax = config.disparity_limit
    f = w * rng.uniform(*config.focal)
    baseline = rng.uniform(*config.baseline)
    fb = f * baseline
    cx = (w - 1) / 2 + rng.uniform(-0.05, 0.05) * w
    cy = (h - 1) / 2 + rng.uniform(-0.05, 0.05) * h
    k = np.array([[f, 0.0, cx], [0.0, f, cy], [0.0, 0.0, 1.0]])
    left = Camera(k, np.eye(4))
    right = Camera(k, translation([-baseline, 0.0, 0.0]))
    if config.street(rng):
        return _street(rng, config, split, k, fb), left, right, f, baseline
    both = (left, right)

    def place(pixel: tuple[float, float], disparity: float, shape: Shape | None,
              hi: float) -> Layer:
        layer = planar_layer(rng, left, pixel, fb / disparity, shape,
                             tilt=random_tilt(rng, config.max_tilt), extent=float(w + dmax),
                             split=split, photo_probability=config.photo_probability,
                             texel_scale=config.texel_scale)
        lo_d, hi_d = _disparity_range(layer, both, fb, config.size)
        if lo_d < 0.25 or hi_d > hi:  # too slanted for the disparity range: face the camera
            layer = replace(layer, axes=np.diag([fb / disparity / f] * 2 + [0.0])[:, :2])
        return layer

    d_bg = max(0.5, dmax * rng.uniform(0.0, 0.12))
    layers = [place(((w - 1) / 2, (h - 1) / 2), d_bg, None, max(0.5 * dmax, 2 * d_bg))]
    for _ in range(int(rng.integers(config.objects[0], config.objects[1] + 1))):
        disparity = d_bg + (dmax - d_bg) * rng.random() ** 2
        pixel, shape = random_site(rng, config.size)
        layers.append(place(pixel, disparity, shape, dmax))
    return layers, left, right, f, baseline


def _street(rng: np.random.Generator, config: StereoConfig, split: str, k: np.ndarray,
            fb: float) -> list[Layer]:
    """The layers of a street seen by the rectified pair (left camera at the origin, right
    camera ``fb / f`` to its right), scaled so that disparities stay in
    ``[0.25, max_disparity]``."""
    dmax = config.disparity_limit
    baseline = fb / k[0, 0]
    to_camera = street_orientation(rng, k, config.size)
    down, forward = to_camera[:, 1], to_camera[:, 2]
    rays = corner_rays(k, config.size)
    # the ground n . X = height has inverse depth n . ray / height (left camera) and
    # n . ray / (height - baseline n_x) (right camera): its largest disparity is at a bottom
    # corner, at most ``bottom``
    bottom = dmax * rng.uniform(0.3, 0.8)
    height = fb * float((down @ rays).max()) / bottom + baseline * abs(down[0])
    # the street ends 3-10x farther than the nearest ground, at a disparity of at least 0.6
    end = fb / bottom * min(rng.uniform(3.0, 10.0), max(1.5, bottom / 0.6))
    # the sky plane forward . X = far likewise has a disparity of at least ``sky`` (>= 0.25)
    # everywhere; every visible point is nearer than the sky, so no disparity is below it
    sky = max(0.25, min(rng.uniform(0.3, 1.0), 0.5 * fb / end))
    far = fb * float((forward @ rays).min()) / sky - baseline * abs(forward[0])
    street = street_layout(rng, config, k, to_camera, height, end, far, fb / dmax, split)
    return street.layers + street.poles + [face for faces in street.cars for face in faces]


def render_stereo(layers: list[Layer], left: Camera, right: Camera, size: tuple[int, int],
                  focal_baseline: float) -> Sample:
    """Render both views of a rectified scene and derive disparities and occlusion masks."""
    w = size[1]
    view0 = render(layers, left, size)
    view1 = render(layers, right, size)
    disparity = (focal_baseline * view0.inverse_depth).astype(np.float32)
    disparity1 = (focal_baseline * view1.inverse_depth).astype(np.float32)
    xs = np.arange(w, dtype=np.float32)[None, :]
    noc = visible(view1, view0.layer, xs - disparity)
    noc1 = visible(view0, view1.layer, xs + disparity1)
    return {
        "image0": view0.image, "image1": view1.image,
        "disparity": disparity, "disparity1": disparity1,
        "valid": view0.layer >= 0, "valid1": view1.layer >= 0,
        "valid_noc": noc, "valid_noc1": noc1,
    }


def random_stereo_pair(rng: np.random.Generator, config: StereoConfig | None = None,
                       split: str = "train") -> Sample:
    """One random stereo pair as a dict of numpy arrays (images ``[H, W, 3]`` float32 0..255,
    labels and masks ``[H, W]``, plus scalar ``focal_length`` and ``baseline``)."""
    config = config or StereoConfig()
    layers, left, right, f, baseline = stereo_scene(rng, config, split)
    sample = render_stereo(layers, left, right, config.size, f * baseline)
    sample["focal_length"] = np.float32(f)
    sample["baseline"] = np.float32(baseline)
    return sample


class SyntheticStereo(SyntheticDataset):
    """Torch dataset of random stereo pairs (``config``: a :class:`StereoConfig`); sample ``i``
    depends only on ``(seed, split, i)``.

    Example:
        >>> ds = SyntheticStereo(10, seed=0, config=StereoConfig(size=(32, 48)))
        >>> s = ds[3]
        >>> tuple(s["image0"].shape), tuple(s["disparity"].shape), s["valid_noc"].dtype
        ((3, 32, 48), (32, 48), torch.bool)
    """

    kind = "stereo"
    config_type = StereoConfig

    def generate(self, rng: np.random.Generator) -> Sample:
        return random_stereo_pair(rng, self.config, self.split)
