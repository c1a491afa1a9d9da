"""Posed multi-view scenes: several cameras with their own intrinsics (zoom, principal point,
slightly non-square pixels) and poses around one layered scene, with exact depth per view.

The scene is a textured background plane behind textured planar objects near the world
origin. Cameras sit on a sphere cap around the origin (within ``orbit`` degrees of the -z axis)
and look at a point near it, with a small roll. Camera conventions are those of
:mod:`crossview.geometry.cameras`: intrinsics ``K`` in pixels, ``viewmats`` world-to-camera,
OpenCV axes (x right, y down, z forward).

Pixel centres are at integer coordinates here (``x`` is the column index, as everywhere in
the engine); :mod:`crossview.geometry.cameras` puts them at ``+0.5``, so add 0.5 to ``cx`` and
``cy`` before using ``K`` there.

Sample keys: ``images`` (``[V, H, W, 3]`` numpy, ``[V, 3, H, W]`` tensor, 0..255), ``depth``
``[V, H, W]`` (camera z of the visible point, 0 where nothing is seen), ``valid`` ``[V, H, W]``,
``K`` ``[V, 3, 3]``, ``viewmats`` ``[V, 4, 4]``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from crossview.data.synthetic.config import SceneConfig
from crossview.data.synthetic.dataset import Sample, SyntheticDataset
from crossview.data.synthetic.objects import random_shape, random_tilt, textured_layer
from crossview.data.synthetic.scene import Camera, Layer, render, rotation


@dataclass(frozen=True)
class MultiViewConfig(SceneConfig):
    """Parameters of random posed multi-view scenes (the common ones are those of
    :class:`~crossview.data.synthetic.config.SceneConfig`; ``focal`` is drawn per view).

    Attributes:
        views: number of cameras ``V``.
        orbit: largest angle in degrees between a camera's direction and the -z axis.
        distance: range of camera distances to the origin (scene units).
    """

    size: tuple[int, int] = (64, 64)
    objects: tuple[int, int] = (3, 8)
    focal: tuple[float, float] = (0.7, 1.6)
    views: int = 4
    orbit: float = 30.0
    distance: tuple[float, float] = (3.0, 4.5)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.views < 1:
            raise ValueError(f"views must be >= 1, got {self.views=}")
        if not 0 <= self.orbit < 50:
            raise ValueError(f"orbit must be in [0, 50) degrees, got {self.orbit=}")
        if not 0 < self.distance[0] <= self.distance[1]:
            raise ValueError(f"distance must be a positive range, got {self.distance=}")
        if self.street_probability != 0:
            raise ValueError("street_probability must be 0 for multi-view scenes (no street "
                             f"layout), got {self.street_probability=}")


def look_at(position: np.ndarray, target: np.ndarray, roll: float = 0.0) -> np.ndarray:
    """World-to-camera ``[4, 4]`` of a camera at ``position`` looking at ``target``.

    OpenCV axes; the camera's y axis points as close to world +y ("down") as possible, then the
    camera turns by ``roll`` radians about its viewing axis.
    """
    z = target - position
    z = z / np.linalg.norm(z)
    x = np.cross([0.0, 1.0, 0.0], z)
    x = x / np.linalg.norm(x)
    y = np.cross(z, x)
    r = rotation([0.0, 0.0, roll]) @ np.stack([x, y, z])
    m = np.eye(4)
    m[:3, :3] = r
    m[:3, 3] = -r @ position
    return m


def multiview_scene(rng: np.random.Generator, config: MultiViewConfig, split: str = "train"
                    ) -> tuple[list[Layer], list[Camera]]:
    """A random scene and its ``V`` cameras."""
    h, w = config.size
    cameras = []
    for _ in range(config.views):
        f = w * rng.uniform(*config.focal)
        k = np.array([[f, 0.0, (w - 1) / 2 + rng.uniform(-0.05, 0.05) * w],
                      [0.0, f * rng.uniform(0.95, 1.05),
                       (h - 1) / 2 + rng.uniform(-0.05, 0.05) * h],
                      [0.0, 0.0, 1.0]])
        direction = random_tilt(rng, config.orbit) @ np.array([0.0, 0.0, -1.0])
        position = direction * rng.uniform(*config.distance)
        target = rng.uniform(-0.2, 0.2, 3)
        cameras.append(Camera(k, look_at(position, target, rng.uniform(-0.15, 0.15))))
    # one plane unit is about one pixel at the origin in a typical view
    unit = np.mean(config.distance) / (w * np.mean(config.focal))
    background = textured_layer(rng, np.array([0.0, 0.0, rng.uniform(1.2, 2.0)]),
                                random_tilt(rng, 20.0) @ np.diag([unit, unit, 0.0])[:, :2],
                                None, extent=float(4 * max(h, w)), split=split,
                                photo_probability=config.photo_probability,
                                texel_scale=config.texel_scale)
    layers = [background]
    for _ in range(int(rng.integers(config.objects[0], config.objects[1] + 1))):
        radius = min(h, w) * float(np.exp(rng.uniform(np.log(0.08), np.log(0.35))))
        axes = random_tilt(rng, config.max_tilt) @ np.diag([unit, unit, 0.0])[:, :2]
        layers.append(textured_layer(rng, rng.uniform(-0.8, 0.8, 3), axes,
                                     random_shape(rng, radius), split=split,
                                     photo_probability=config.photo_probability,
                                     texel_scale=config.texel_scale))
    return layers, cameras


def random_multiview(rng: np.random.Generator, config: MultiViewConfig | None = None,
                     split: str = "train") -> Sample:
    """One posed multi-view sample as numpy arrays (see the module docstring)."""
    config = config or MultiViewConfig()
    layers, cameras = multiview_scene(rng, config, split)
    views = [render(layers, camera, config.size) for camera in cameras]
    inverse = np.stack([v.inverse_depth for v in views])
    valid = np.stack([v.layer >= 0 for v in views])
    return {
        "images": np.stack([v.image for v in views]),
        "depth": np.where(valid, 1.0 / np.where(valid, inverse, 1.0), 0.0).astype(np.float32),
        "valid": valid,
        "K": np.stack([c.K for c in cameras]).astype(np.float32),
        "viewmats": np.stack([c.world_to_camera for c in cameras]).astype(np.float32),
    }


class SyntheticMultiView(SyntheticDataset):
    """Torch dataset of posed multi-view scenes (``config``: a :class:`MultiViewConfig`);
    sample ``i`` depends only on ``(seed, split, i)``.

    Example:
        >>> s = SyntheticMultiView(2, config=MultiViewConfig(size=(32, 32), views=3))[0]
        >>> tuple(s["images"].shape), tuple(s["K"].shape), tuple(s["viewmats"].shape)
        ((3, 3, 32, 32), (3, 3, 3), (3, 4, 4))
    """

    kind = "multiview"
    config_type = MultiViewConfig

    def generate(self, rng: np.random.Generator) -> Sample:
        return random_multiview(rng, self.config, self.split)
