"""Random scene content: outlines, textured planar layers placed in front of a camera."""

from __future__ import annotations

import numpy as np

from crossview.data.synthetic.scene import Camera, Layer, Shape, rotation
from crossview.data.synthetic.textures import random_texture

MAX_TEXTURE = 256
MAX_BACKGROUND_TEXTURE = 384  # backgrounds span the image: fewer visible mirror repeats


def random_shape(rng: np.random.Generator, radius: float) -> Shape:
    """A random star-shaped outline of about ``radius`` plane units."""
    harmonics = int(rng.integers(0, 4))
    amplitudes = rng.uniform(0.0, 0.35, harmonics) / max(harmonics, 1) ** 0.5
    return Shape(
        radius=radius,
        aspect=float(np.exp(rng.uniform(-0.9, 0.9))),
        angle=float(rng.uniform(0.0, np.pi)),
        norm=float(rng.choice([1.0, 2.0, 2.0, np.inf])),
        amplitudes=tuple(float(a) for a in amplitudes),
        phases=tuple(float(p) for p in rng.uniform(0.0, 2 * np.pi, harmonics)),
    )


def random_site(rng: np.random.Generator,
                size: tuple[int, int]) -> tuple[tuple[float, float], Shape]:
    """Where an object goes: a pixel (possibly a little outside the image) and its outline,
    with a radius log-uniform in 4%..35% of the shorter image side (at least 1.5 px)."""
    h, w = size
    pixel = (float(rng.uniform(-0.1, 1.1) * w), float(rng.uniform(-0.1, 1.1) * h))
    radius = max(1.5, min(h, w) * float(np.exp(rng.uniform(np.log(0.04), np.log(0.35)))))
    return pixel, random_shape(rng, radius)


def random_tilt(rng: np.random.Generator, max_degrees: float) -> np.ndarray:
    """A ``[3, 3]`` rotation about a random axis in the image plane, up to ``max_degrees``."""
    direction = rng.uniform(0.0, 2 * np.pi)
    angle = np.deg2rad(max_degrees) * np.sqrt(rng.random())
    return rotation([angle * np.cos(direction), angle * np.sin(direction), 0.0])


def textured_layer(rng: np.random.Generator, origin: np.ndarray, axes: np.ndarray,
                   shape: Shape | None, *, extent: float | None = None, split: str = "train",
                   photo_probability: float = 0.5,
                   texel_scale: tuple[float, float] = (0.5, 2.0)) -> Layer:
    """A layer on the plane ``origin + axes @ (u, v)`` with a random texture.

    ``extent`` (plane units) sizes the texture when the layer has no outline. The texture has
    ``texel_scale`` (log-uniform range) texels per plane unit, at a random rotation and offset:
    below 1 it is magnified (smooth), above 1 minified (detailed).
    """
    span = 2 * (shape.extent() if shape is not None else (extent or 64.0))
    scale = float(np.exp(rng.uniform(np.log(texel_scale[0]), np.log(texel_scale[1]))))
    limit = MAX_TEXTURE if shape is not None else MAX_BACKGROUND_TEXTURE
    side = int(np.clip(np.ceil(span * scale) + 2, 16, limit))
    texture = random_texture(rng, (side, side), split, photo_probability)
    angle = rng.uniform(0.0, 2 * np.pi)
    c, s = np.cos(angle) * scale, np.sin(angle) * scale
    offset = rng.uniform(0.0, side - 1, 2)
    texture_map = np.array([[c, -s, offset[0]], [s, c, offset[1]]])
    return Layer(np.asarray(origin, np.float64), np.asarray(axes, np.float64), texture,
                 texture_map, shape)


def planar_layer(rng: np.random.Generator, camera: Camera, pixel: tuple[float, float],
                 depth: float, shape: Shape | None, *, tilt: np.ndarray | None = None,
                 extent: float | None = None, split: str = "train",
                 photo_probability: float = 0.5,
                 texel_scale: tuple[float, float] = (0.5, 2.0)) -> Layer:
    """A textured plane through the point seen at ``pixel`` at ``depth`` in ``camera``.

    Untilted, the plane faces the camera and one plane unit is one pixel at ``pixel``
    (``u = x - pixel_x``, ``v = y - pixel_y`` for a camera with square pixels); ``tilt``
    (``[3, 3]``, camera frame) rotates it about that point. Texture options as in
    :func:`textured_layer`.
    """
    k = camera.K
    cam_to_world = np.linalg.inv(camera.world_to_camera)
    point_cam = depth * np.linalg.solve(k, np.array([pixel[0], pixel[1], 1.0]))
    axes_cam = np.diag([depth / k[0, 0], depth / k[1, 1], 0.0])[:, :2]
    if tilt is not None:
        axes_cam = tilt @ axes_cam
    origin = cam_to_world[:3, :3] @ point_cam + cam_to_world[:3, 3]
    axes = cam_to_world[:3, :3] @ axes_cam
    return textured_layer(rng, origin, axes, shape, extent=extent, split=split,
                          photo_probability=photo_probability, texel_scale=texel_scale)
