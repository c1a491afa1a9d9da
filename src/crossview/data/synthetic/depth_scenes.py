"""Posed, unrectified views with exact depth for the multi-view depth study (the
``multiview-depth`` training recipe, :mod:`crossview.train.recipes.multiview_depth`).

A scene is a textured background plane behind the origin and 2-5 textured planar objects
spread in depth between the cameras and the background (:func:`depth_layers`), so that the
views' parallax (several pixels at 32x32 between the nearest object and the background) lets a
model resolve depth by matching. Objects farther from the cameras are drawn proportionally
larger, with proportionally coarser textures, so that their size and texture in the image say
little about their depth. The cameras are placed so that the angle between the reference
view's direction and every other view's is drawn from ``separation`` (degrees): view 0 sits on
a 20° cap around the -z axis, the others are it turned by that angle about a random axis, each
at its own distance, looking at its own point near the origin, with its own zoom (log-uniform,
focal ``0.6 W x zoom``). A scene therefore fixes depth only through its cameras: the baseline
is random and the depth of a view is only defined in units of it.

The renderer puts pixel centres at integer coordinates; crossview's cameras put them at
``+0.5``. Intrinsics returned here are converted (principal point + 0.5).
"""

from __future__ import annotations

import numpy as np
import torch

from crossview.data.synthetic.multiview import look_at
from crossview.data.synthetic.objects import random_shape, random_tilt, textured_layer
from crossview.data.synthetic.scene import Camera, Layer, render, rotation

BASE_FOCAL = 0.6  # focal length at zoom 1, as a multiple of the image width
DISTANCE = (3.0, 4.5)  # camera distance to the origin (scene units)
OBJECTS = (2, 5)  # planar objects per scene
OBJECT_Z = (-2.0, 0.8)  # world z of the objects' centres (cameras at z ~ -3.75, background
#                         behind the origin at z 1.2..2)
_TO_CROSSVIEW = np.array([[1.0, 0.0, 0.5], [0.0, 1.0, 0.5], [0.0, 0.0, 1.0]])


def depth_layers(rng: np.random.Generator, size: tuple[int, int], split: str) -> list[Layer]:
    """The layers of one scene: a background plane (z 1.2..2, tilted up to 20°) and
    :data:`OBJECTS` planar objects centred at world z from :data:`OBJECT_Z`, tilted up to 30°.

    An object at distance ``s x 3.75`` from a typical camera (``s`` from its z) has its
    lateral offset, outline (radius 12-30 % of the image side) and texture scaled by ``s``, so
    it covers about the same part of the image wherever it is in depth.
    """
    h, w = size
    typical = float(np.mean(DISTANCE))
    unit = typical / (w * BASE_FOCAL * 1.25)  # a plane unit: about a pixel at the origin, zoom 1.25
    layers = [textured_layer(rng, np.array([0.0, 0.0, rng.uniform(1.2, 2.0)]),
                             random_tilt(rng, 20.0) @ np.diag([unit, unit, 0.0])[:, :2], None,
                             extent=float(4 * max(h, w)), split=split)]
    for _ in range(int(rng.integers(OBJECTS[0], OBJECTS[1] + 1))):
        z = rng.uniform(*OBJECT_Z)
        s = (typical + z) / typical
        centre = np.array([*(rng.uniform(-0.7, 0.7, 2) * s), z])
        radius = min(h, w) * float(np.exp(rng.uniform(np.log(0.12), np.log(0.3))))
        axes = random_tilt(rng, 30.0) @ np.diag([unit * s, unit * s, 0.0])[:, :2]
        layers.append(textured_layer(rng, centre, axes, random_shape(rng, radius),
                                     split=split))
    return layers


def _directions(rng: np.random.Generator, views: int,
                separation: tuple[float, float]) -> list[np.ndarray]:
    """Unit viewing directions (from the origin to the camera): the first on a 20° cap around
    -z, each other one the first turned by an angle from ``separation`` (degrees)."""
    first = random_tilt(rng, 20.0) @ np.array([0.0, 0.0, -1.0])
    out = [first]
    for _ in range(views - 1):
        axis = np.cross(first, rng.normal(size=3))
        axis /= np.linalg.norm(axis)
        angle = np.deg2rad(rng.uniform(*separation))
        out.append(rotation(axis * angle) @ first)
    return out


def _cameras(rng: np.random.Generator, directions: list[np.ndarray],
             focals: np.ndarray, size: tuple[int, int]) -> list[Camera]:
    h, w = size
    cameras = []
    for direction, focal in zip(directions, focals, strict=True):
        k = np.array([[focal, 0.0, (w - 1) / 2 + rng.uniform(-0.05, 0.05) * w],
                      [0.0, focal * rng.uniform(0.95, 1.05),
                       (h - 1) / 2 + rng.uniform(-0.05, 0.05) * h],
                      [0.0, 0.0, 1.0]])
        position = direction * rng.uniform(*DISTANCE)
        cameras.append(Camera(k, look_at(position, rng.uniform(-0.2, 0.2, 3),
                                         rng.uniform(-0.15, 0.15))))
    return cameras


def _zoom_focals(rng: np.random.Generator, views: int, zoom: tuple[float, float],
                 width: int) -> np.ndarray:
    return BASE_FOCAL * width * np.exp(rng.uniform(np.log(zoom[0]), np.log(zoom[1]), views))


def _render(layers: list[Layer], cameras: list[Camera], size: tuple[int, int]
            ) -> dict[str, np.ndarray]:
    views = [render(layers, c, size) for c in cameras]
    valid = np.stack([v.layer >= 0 for v in views])
    inverse = np.stack([v.inverse_depth for v in views])
    return {"images": np.stack([v.image for v in views]).transpose(0, 3, 1, 2),
            "K": np.stack([_TO_CROSSVIEW @ c.K for c in cameras]),
            "viewmats": np.stack([c.world_to_camera for c in cameras]),
            "depth": np.where(valid, 1.0 / np.where(valid, inverse, 1.0), 0.0),
            "valid": valid}


def make_depth_scenes(count: int, views: int, zoom: tuple[float, float],
                      separation: tuple[float, float], seed: int,
                      size: tuple[int, int] = (32, 32), split: str = "train",
                      variants: dict[str, tuple[tuple[float, float], tuple[float, float]]]
                      | None = None) -> dict[str, dict[str, torch.Tensor]]:
    """Render ``count`` scenes of ``views`` views (zoom and separation ranges as described in
    the module docstring).

    Returns ``{"main": scenes}`` and, for every ``name: (zoom, separation)`` of ``variants``,
    ``name: scenes`` of the same scenes (objects, textures) seen by newly drawn cameras with
    those ranges. ``scenes``: ``images [N, V, 3, H, W]`` (float32, 0..255), ``K [N, V, 3, 3]``
    (pixels, centres at +0.5), ``viewmats [N, V, 4, 4]`` (world-to-camera), ``depth
    [N, V, H, W]`` (camera z, 0 where nothing is seen) and ``valid [N, V, H, W]`` (bool).
    """
    settings = {"main": (zoom, separation), **(variants or {})}
    rng = np.random.default_rng(seed)
    out: dict[str, dict[str, list[np.ndarray]]] = {name: {} for name in settings}
    for _ in range(count):
        layers = depth_layers(rng, size, split)
        for name, (z, s) in settings.items():
            cameras = _cameras(rng, _directions(rng, views, s),
                               _zoom_focals(rng, views, z, size[1]), size)
            for key, value in _render(layers, cameras, size).items():
                out[name].setdefault(key, []).append(value)
    return {name: {key: torch.from_numpy(np.stack(value)) if key == "valid"
                   else torch.from_numpy(np.stack(value)).float()
                   for key, value in arrays.items()}
            for name, arrays in out.items()}
