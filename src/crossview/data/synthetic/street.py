"""Street layouts: what a camera on a car sees.

A ground plane below the camera seen at a grazing angle, building fronts or rows of parked cars
along the sides (planes nearly perpendicular to the image plane), a far band of distant
buildings in front of a nearly textureless sky, thin vertical poles and box-like cars standing
on the ground. Every part is a :class:`~crossview.data.synthetic.scene.Layer`, so a street
renders, occludes and is labelled exactly like any other layered scene; the stereo and flow
generators choose the scale (camera height, sky distance) and the camera motion.

The layout is built in a *ground frame*: x right, y down, z forward along the street, the camera
centre at the origin and the ground at ``y = height``. The camera looks along the street with a
pitch that puts the horizon in the upper part of the image and a small roll
(:func:`street_orientation`); ``to_camera`` ``[3, 3]`` turns ground-frame vectors into the
coordinates of the identity camera (the world frame of the scene).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from crossview.data.synthetic.config import SceneConfig
from crossview.data.synthetic.objects import textured_layer
from crossview.data.synthetic.scene import Layer, Shape, rotation
from crossview.data.synthetic.textures import sky_texture

SKY_TEXTURE = 64
BELOW = 0.05  # parts reach this far (times the camera height) below the ground: no seam at it
_X, _Y, _Z = np.eye(3)


@dataclass(frozen=True)
class Street:
    """A street seen by the identity camera.

    Attributes:
        layers: the scenery: ground, sky, then the far band and side planes that were drawn.
        poles: thin vertical rectangles standing on the ground.
        cars: the faces of each car (back or front, then the side towards the street's axis
            when it is seen), which move together.
        to_camera: ``[3, 3]`` rotation from the ground frame to the camera frame.
        height: camera height above the ground.
        far: ground distance of the sky plane (no part of the street lies beyond it).
    """

    layers: list[Layer]
    poles: list[Layer]
    cars: list[list[Layer]]
    to_camera: np.ndarray
    height: float
    far: float


def street_orientation(rng: np.random.Generator, k: np.ndarray,
                       size: tuple[int, int]) -> np.ndarray:
    """A ``[3, 3]`` ground-to-camera rotation: a pitch that puts the horizon (on the principal
    column of ``k``) at 30-60 % of the image height, then a roll of up to 2 degrees."""
    horizon = rng.uniform(0.3, 0.6) * (size[0] - 1)
    pitch = np.arctan((k[1, 2] - horizon) / k[1, 1])
    roll = np.deg2rad(rng.uniform(-2.0, 2.0))
    return rotation([0.0, 0.0, roll]) @ rotation([pitch, 0.0, 0.0])


def corner_rays(k: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """``[3, 4]`` rays ``K^-1 p`` through the image corners (top left, top right, bottom left,
    bottom right); a plane ``n . X = c`` has inverse depth ``n . ray / c`` along them."""
    h, w = size
    corners = np.array([[0.0, w - 1, 0.0, w - 1], [0.0, 0.0, h - 1, h - 1], [1.0] * 4])
    return np.linalg.solve(k, corners)


def street_layout(rng: np.random.Generator, config: SceneConfig, k: np.ndarray,
                  to_camera: np.ndarray, height: float, far: float, near: float,
                  split: str = "train") -> Street:
    """A random street for the identity camera with intrinsics ``k``.

    ``height`` (camera above ground) and ``far`` (ground distance of the sky plane) set the
    scale. ``near`` is the smallest camera depth a bounded part may reach: side planes start
    farther away until they respect it, poles and cars that would not are left out. The number
    of poles and cars is drawn from ``config.objects``; textures follow ``config`` as for the
    other scenes.
    """
    h, w = config.size
    f = float(k[0, 0])
    options = {"split": split, "photo_probability": config.photo_probability,
               "texel_scale": config.texel_scale}

    def part(centre: np.ndarray, u: np.ndarray, v: np.ndarray, unit: float,
             half: tuple[float, float] | None = None) -> Layer:
        """A textured layer on the plane through ``centre`` spanned by ``u`` and ``v`` (ground
        frame, unit vectors), one plane unit ``unit`` long: the rectangle of half sizes
        ``half`` (along ``u``, ``v``) or, for ``None``, the whole plane."""
        shape = None
        if half is not None:
            a, b = half[0] / unit, half[1] / unit
            shape = Shape(radius=float(np.sqrt(a * b)), aspect=a / b, norm=np.inf)
        axes = to_camera @ np.column_stack([u, v]) * unit
        return textured_layer(rng, to_camera @ centre, axes, shape, extent=float(w), **options)

    def nearest(centre: np.ndarray, u: np.ndarray, v: np.ndarray,
                half: tuple[float, float]) -> float:
        """The smallest camera depth over the rectangle's corners."""
        signs = np.array([[-1.0, 1.0, -1.0, 1.0], [-1.0, -1.0, 1.0, 1.0]])
        corners = centre[:, None] + np.column_stack([u, v]) @ (signs * np.array(half)[:, None])
        return float((to_camera[2] @ corners).min())

    horizon = (k @ to_camera[:, 2])[1] / to_camera[2, 2]  # image row of the forward direction
    rays = corner_rays(k, config.size)
    bottom = height / float((to_camera[:, 1] @ rays[:, 2:]).max())  # nearest ground depth
    ground = part(np.array([0.0, height, bottom]), _X, _Z, bottom * rng.uniform(1.5, 4.0) / f)
    scale = SKY_TEXTURE / (1.5 * max(h, w))  # one sky texture spans 1.5 image sizes
    sky = Layer(to_camera @ (far * _Z), to_camera @ np.eye(3)[:, :2] * (far / f),
                sky_texture(rng, (SKY_TEXTURE, SKY_TEXTURE)),
                np.array([[scale, 0.0, SKY_TEXTURE / 2], [0.0, scale, SKY_TEXTURE / 2]]))
    layers = [ground, sky]
    base = height * (1 + BELOW)  # the lower edge of standing parts, just under the ground

    if rng.random() < 0.7:  # distant buildings or trees: a band from the ground over the horizon
        depth = 0.95 * far
        top = -rng.uniform(0.02, 0.25) * h * depth / f
        centre = np.array([0.0, (top + base) / 2, depth])
        half = (depth * w / f, (base - top) / 2)  # twice the image width: roll and turns fit
        if nearest(centre, _X, _Y, half) >= near:
            layers.append(part(centre, _X, _Y, depth / f, half))

    for side in (-1.0, 1.0):  # building fronts or a row of parked cars along the street
        if rng.random() >= 0.6:
            continue
        offset = rng.uniform(1.2, 5.0) * height
        # the near end meets the ground at a column up to 40 % of W outside the image
        edge = (w - 1) / 2 - rng.uniform(-0.4, 0.15) * w
        start = min(f * offset / edge, 0.5 * far)
        end = 0.9 * far if rng.random() < 0.7 else start + rng.uniform(0.2, 1.0) * (
            0.9 * far - start)
        if rng.random() < 0.6:  # a building: its top at the near end is at or above the image
            top = min((rng.uniform(-0.5, 0.2) * h - horizon) * start / f, -0.5 * height)
        else:  # parked cars about as high as the camera
            top = height - rng.uniform(0.8, 1.05) * height
        unit = start * rng.uniform(1.0, 3.0) / f
        for _ in range(10):  # move the near end away until the plane respects ``near``
            centre = np.array([side * offset, (top + base) / 2, (start + end) / 2])
            half = ((end - start) / 2, (base - top) / 2)
            if end - start > 0 and nearest(centre, _Z, _Y, half) >= near:
                layers.append(part(centre, _Z, _Y, unit, half))
                break
            start *= 1.25

    poles: list[Layer] = []
    cars: list[list[Layer]] = []
    closest = max(near, bottom)
    for _ in range(int(rng.integers(config.objects[0], config.objects[1] + 1))):
        depth = float(np.exp(rng.uniform(np.log(closest), np.log(max(0.5 * far, closest)))))
        x = rng.uniform(-0.9, 0.9) * depth * (w / 2) / f
        pole = rng.random() < 0.4
        if pole:  # a thin pole, 1.5-8 px wide, 1.5-4 camera heights tall
            width = rng.uniform(1.5, 8.0) * depth / f
            top = height - rng.uniform(1.5, 4.0) * height
            faces = [(np.array([x, (top + base) / 2, depth]), _X, _Y,
                      (width / 2, (base - top) / 2))]
        else:  # a car seen from behind or in front: a box face, and its side towards the axis
            width, tall, length = rng.uniform([1.0, 0.8, 2.3], [1.25, 1.05, 3.0]) * height
            top = height - tall
            faces = [(np.array([x, (top + base) / 2, depth]), _X, _Y,
                      (width / 2, (base - top) / 2))]
            if abs(x) > width / 2:
                side_x = x - np.sign(x) * width / 2
                faces.append((np.array([side_x, (top + base) / 2, depth + length / 2]), _Z, _Y,
                              (length / 2, (base - top) / 2)))
        if min(nearest(*face) for face in faces) < near:
            continue
        built = [part(c, u, v, depth / f, half) for c, u, v, half in faces]
        if pole:
            poles += built
        else:
            cars.append(built)
    return Street(layers, poles, cars, to_camera, height, far)
