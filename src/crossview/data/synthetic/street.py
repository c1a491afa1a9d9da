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
from crossview.data.synthetic.objects import MAX_BACKGROUND_TEXTURE, textured_layer
from crossview.data.synthetic.scene import Layer, Shape, rotation
from crossview.data.synthetic.textures import fade_rows, random_texture, sky_texture

SKY_TEXTURE = 64
BELOW = 0.05  # parts reach this far (times the camera height) below the ground: no seam at it
_X, _Y, _Z = np.eye(3)


@dataclass(frozen=True)
class Street:
    """A street seen by the identity camera.

    Attributes:
        layers: the scenery: ground, sky, then the street's end and the side planes that
            were drawn.
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
                  to_camera: np.ndarray, height: float, end: float, far: float, near: float,
                  split: str = "train") -> Street:
    """A random street for the identity camera with intrinsics ``k``.

    ``height`` (camera above ground), ``end`` (ground distance where the street ends in a band
    of distant buildings or trees) and ``far`` (of the sky plane, beyond ``end``) set the
    scale. ``near`` is the smallest camera depth a bounded part may reach: side planes start
    farther away until they respect it, poles and cars that would not are left out. The number
    of poles and cars is drawn from ``config.objects``; textures follow ``config`` as for the
    other scenes.

    Planes seen at a grazing angle are foreshortened: along the street a pixel covers
    ``Z^2 / (f d)`` at distance ``Z`` from a plane ``d`` away (across, ``Z / f``). Their plane
    units follow that at a reference distance between the near and the far end, so a texture
    is magnified near the camera and minified at most about 10x at the street's end (the
    engine has no anti-aliasing: stronger minification is noise that a warp cannot reproduce).
    """
    h, w = config.size
    f = float(k[0, 0])
    options = {"split": split, "photo_probability": config.photo_probability,
               "texel_scale": config.texel_scale}

    def part(centre: np.ndarray, u: np.ndarray, v: np.ndarray, units: tuple[float, float],
             half: tuple[float, float] | None = None) -> Layer:
        """A textured layer on the plane through ``centre`` spanned by ``u`` and ``v`` (ground
        frame, unit vectors) with plane units ``units`` long: the rectangle of half sizes
        ``half`` (along ``u``, ``v``) or, for ``None``, the whole plane."""
        shape = None
        if half is not None:
            a, b = half[0] / units[0], half[1] / units[1]
            shape = Shape(radius=float(np.sqrt(a * b)), aspect=a / b, norm=np.inf)
        axes = to_camera @ np.column_stack([u * units[0], v * units[1]])
        return textured_layer(rng, to_camera @ centre, axes, shape, extent=float(w), **options)

    def nearest(centre: np.ndarray, u: np.ndarray, v: np.ndarray,
                half: tuple[float, float]) -> float:
        """The smallest camera depth over the rectangle's corners."""
        signs = np.array([[-1.0, 1.0, -1.0, 1.0], [-1.0, -1.0, 1.0, 1.0]])
        corners = centre[:, None] + np.column_stack([u, v]) @ (signs * np.array(half)[:, None])
        return float((to_camera[2] @ corners).min())

    def grazing(distance: float, reference: float) -> tuple[float, float]:
        """Plane units (along the street, across) of a plane ``distance`` from the camera's
        line of travel: one pixel's footprint at ``reference`` ahead."""
        return reference**2 / (f * distance), reference / f

    horizon = (k @ to_camera[:, 2])[1] / to_camera[2, 2]  # image row of the forward direction
    rays = corner_rays(k, config.size)
    bottom = height / float((to_camera[:, 1] @ rays[:, 2:]).max())  # nearest ground depth
    # the ground: texture rows run along the street from 0.8 ``bottom`` to ``end`` without
    # repeating, each row low-passed so that a pixel covers at most ``texel`` texels of detail
    # (``texel_scale``: below 1 smooth, above 1 detailed, as for the other layers; column
    # steps cover ``Z / f`` across, row steps ``Z^2 / (f height)`` along and, off the
    # principal column, as much across)
    first = 0.8 * bottom
    side = MAX_BACKGROUND_TEXTURE
    along = (end - first) / (side - 1)
    texel = np.exp(rng.uniform(*np.log(config.texel_scale)))
    across = bottom / f / texel
    z = first + along * np.arange(side)
    footprint = np.maximum(z**2 / (f * height) / along,
                           z / f * (1 + 0.25 * w / f * z / height) / across) / texel
    texture = fade_rows(random_texture(rng, (side, side), split, config.photo_probability),
                        footprint)
    ground = Layer(to_camera @ np.array([0.0, height, first]),
                   to_camera @ np.column_stack([_X * across, _Z * along]), texture,
                   np.array([[1.0, 0.0, rng.uniform(0.0, side - 1)], [0.0, 1.0, 0.0]]))
    scale = SKY_TEXTURE / (1.5 * max(h, w))  # one sky texture spans 1.5 image sizes
    sky = Layer(to_camera @ (far * _Z), to_camera @ np.eye(3)[:, :2] * (far / f),
                sky_texture(rng, (SKY_TEXTURE, SKY_TEXTURE)),
                np.array([[scale, 0.0, SKY_TEXTURE / 2], [0.0, scale, SKY_TEXTURE / 2]]))
    layers = [ground, sky]
    base = height * (1 + BELOW)  # the lower edge of standing parts, just under the ground

    # the street's end: distant buildings or trees, a band from the ground to 0-25 % of the
    # image height over the horizon, twice the image width (roll and turns stay covered)
    top = -rng.uniform(0.0, 0.25) * h * end / f
    centre = np.array([0.0, (top + base) / 2, end])
    half = (end * w / f, (base - top) / 2)
    if nearest(centre, _X, _Y, half) >= near:
        layers.append(part(centre, _X, _Y, (end / f, end / f), half))

    for side in (-1.0, 1.0):  # building fronts or a row of parked cars along the street
        if rng.random() >= 0.6:
            continue
        offset = rng.uniform(1.2, 5.0) * height
        # the near end meets the ground at a column up to 40 % of W outside the image
        edge = (w - 1) / 2 - rng.uniform(-0.4, 0.15) * w
        start = min(f * offset / edge, 0.5 * end)
        stop = end if rng.random() < 0.7 else start + rng.uniform(0.2, 1.0) * (end - start)
        if rng.random() < 0.6:  # a building: its top at the near end is at or above the image
            top = min((rng.uniform(-0.5, 0.2) * h - horizon) * start / f, -0.5 * height)
        else:  # parked cars about as high as the camera
            top = height - rng.uniform(0.8, 1.05) * height
        units = grazing(offset, float(np.sqrt(start * stop)))
        for _ in range(10):  # move the near end away until the plane respects ``near``
            centre = np.array([side * offset, (top + base) / 2, (start + stop) / 2])
            half = ((stop - start) / 2, (base - top) / 2)
            if stop - start > 0 and nearest(centre, _Z, _Y, half) >= near:
                layers.append(part(centre, _Z, _Y, units, half))
                break
            start *= 1.25

    poles: list[Layer] = []
    cars: list[list[Layer]] = []
    closest = max(near, bottom)
    for _ in range(int(rng.integers(config.objects[0], config.objects[1] + 1))):
        depth = float(np.exp(rng.uniform(np.log(closest), np.log(max(0.8 * end, closest)))))
        x = rng.uniform(-0.9, 0.9) * depth * (w / 2) / f
        facing = (depth / f, depth / f)
        pole = rng.random() < 0.4
        if pole:  # a thin pole, 1.5-8 px wide, 1.5-4 camera heights tall
            width = rng.uniform(1.5, 8.0) * depth / f
            top = height - rng.uniform(1.5, 4.0) * height
            faces = [(np.array([x, (top + base) / 2, depth]), _X, _Y,
                      (width / 2, (base - top) / 2), facing)]
        else:  # a car seen from behind or in front: a box face, and its side towards the axis
            width, tall, length = rng.uniform([1.0, 0.8, 2.3], [1.25, 1.05, 3.0]) * height
            top = height - tall
            faces = [(np.array([x, (top + base) / 2, depth]), _X, _Y,
                      (width / 2, (base - top) / 2), facing)]
            if abs(x) > width / 2:
                side_x = x - np.sign(x) * width / 2
                faces.append((np.array([side_x, (top + base) / 2, depth + length / 2]), _Z, _Y,
                              (length / 2, (base - top) / 2),
                              grazing(max(abs(side_x), 0.1 * depth), depth)))
        if min(nearest(*face[:4]) for face in faces) < near:
            continue
        built = [part(c, u, v, units, half) for c, u, v, half, units in faces]
        if pole:
            poles += built
        else:
            cars.append(built)
    return Street(layers, poles, cars, to_camera, height, far)
