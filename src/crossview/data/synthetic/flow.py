"""Optical-flow pairs with independent camera and object motions, exact flow in both
directions and occlusion masks.

Frame 0 sees a layered scene (:mod:`crossview.data.synthetic.scene`) from the identity pose.
Between the frames the camera moves rigidly (rotation and translation, so near layers show
parallax) and every object moves by its own rigid motion about its centre (translation, spin in
the image plane and a small out-of-plane turn). Both frames are rendered from the same scene,
so the flow of a pixel is the exact forward projection of the point it sees. With probability
``street_probability`` the scene is a street (:mod:`crossview.data.synthetic.street`) and the
camera drives forward along it.

Motions are drawn to keep flow magnitudes below ``max_flow``: an object whose outline box would
move further is slowed down (its motion halved) until it fits, checked at 5x5 points spanning
the box (a turning plane's flow is not affine, so its maximum may lie between those points and
exceed ``max_flow`` slightly; in 80 samples at 128x256 none did).

Sample keys: ``image0``, ``image1``; ``flow`` (frame 0 -> 1 at frame-0 pixels) and
``flow_backward`` (1 -> 0 at frame-1 pixels), ``[H, W, 2]`` (x, y) in numpy and ``[2, H, W]``
as tensors; ``valid``/``valid1`` (a layer is seen) and ``valid_noc``/``valid_noc1`` (the
pixel's point is seen in the other frame: not occluded, inside the image).
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
    inverse_depth_at,
    plane_homography,
    project,
    render,
    rigid_about,
    visible,
)
from crossview.data.synthetic.street import corner_rays, street_layout, street_orientation


@dataclass(frozen=True)
class FlowConfig(SceneConfig):
    """Parameters of random optical-flow scenes (the common ones are those of
    :class:`~crossview.data.synthetic.config.SceneConfig`).

    Attributes:
        max_flow: bound on the flow magnitude in pixels; ``None`` means ``max(H, W) / 8``.
    """

    max_flow: float | None = None
    max_tilt: float = 40.0

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.max_flow is not None and self.max_flow <= 0:
            raise ValueError(f"max_flow must be positive, got {self.max_flow=}")

    @property
    def flow_limit(self) -> float:
        return self.max_flow if self.max_flow is not None else max(self.size) / 8


@dataclass(frozen=True)
class FlowScene:
    """A two-frame scene: ``motions[k]`` moves layer ``k`` in frame 1 (``None``: static)."""

    layers: list[Layer]
    camera0: Camera
    camera1: Camera
    motions: list[np.ndarray | None]


def _max_shift(layer: Layer, scene_cameras: tuple[Camera, Camera], motion: np.ndarray | None,
               size: tuple[int, int], top: float = 0.0) -> float:
    """Largest displacement of 5x5 points spanning the layer's outline box (for a background,
    the frame-0 image from row ``top`` down). A turning plane's flow is not affine (depth
    changes scale it), so the true maximum may lie between the points."""
    cam0, cam1 = scene_cameras
    h, w = size
    steps = np.linspace(-1.0, 1.0, 5)
    grid = np.stack(np.meshgrid(steps, steps)).reshape(2, -1)
    ones = np.ones(grid.shape[1])
    if layer.shape is None:  # background: plane points under a 5x5 grid over the frame-0 image
        hinv = np.linalg.inv(plane_homography(layer, cam0))
        pix = np.vstack([(grid[0] + 1) * (w - 1) / 2, top + (grid[1] + 1) * (h - 1 - top) / 2,
                         ones])
        uv = hinv @ pix
        uv = uv / uv[2]
    else:  # a 5x5 grid spanning the outline's box
        eu, ev = layer.shape.half_extents()
        uv = np.vstack([grid[0] * eu, grid[1] * ev, ones])
    p0 = plane_homography(layer, cam0) @ uv
    p1 = plane_homography(layer, cam1, motion) @ uv
    if np.any(p0[2] <= 0) or np.any(p1[2] <= 0):
        return np.inf
    return float(np.hypot(*(p1[:2] / p1[2] - p0[:2] / p0[2])).max())


def _scaled(axis_angle: np.ndarray, shift: np.ndarray, pivot: np.ndarray,
            factor: float) -> np.ndarray:
    return rigid_about(axis_angle * factor, shift * factor, pivot)


def _fitted_motion(faces: list[Layer], cameras: tuple[Camera, Camera], axis_angle: np.ndarray,
                   shift: np.ndarray, pivot: np.ndarray, size: tuple[int, int],
                   limit: float) -> tuple[bool, np.ndarray | None]:
    """An object's motion (rotation ``axis_angle`` about ``pivot``, then ``shift``) halved up to
    five times until none of its ``faces`` moves more than ``limit``: ``(True, motion)``;
    ``(True, None)`` if only standing still fits, ``(False, None)`` if even the camera motion
    alone moves a face too far."""
    for attempt in range(6):
        candidate = _scaled(axis_angle, shift, pivot, 0.5**attempt)
        if all(_max_shift(face, cameras, candidate, size) <= limit for face in faces):
            return True, candidate
    return all(_max_shift(face, cameras, None, size) <= limit for face in faces), None


def flow_scene(rng: np.random.Generator, config: FlowConfig, split: str = "train") -> FlowScene:
    """A random two-frame scene with camera and object motions."""
    h, w = config.size
    limit = config.flow_limit
    f = w * rng.uniform(*config.focal)
    cx = (w - 1) / 2 + rng.uniform(-0.05, 0.05) * w
    cy = (h - 1) / 2 + rng.uniform(-0.05, 0.05) * h
    k = np.array([[f, 0.0, cx], [0.0, f, cy], [0.0, 0.0, 1.0]])
    cam0 = Camera(k, np.eye(4))
    if config.street(rng):
        return _street(rng, config, split, k)
    z_bg = 10.0
    z_near = z_bg * 0.2

    # camera motion: each part alone shifts pixels by at most ~limit/4
    rot = rng.normal(size=3) * np.array([1.0, 1.0, 0.3])
    rot *= (limit / 4 / f) * rng.random() / np.linalg.norm(rot)
    move = rng.normal(size=3)
    move *= (limit / 4) * z_near / f * rng.random() / np.linalg.norm(move)
    corners = np.array([0.0, w - 1, 0.0, w - 1]), np.array([0.0, 0.0, h - 1, h - 1])
    background = planar_layer(rng, cam0, ((w - 1) / 2, (h - 1) / 2), z_bg, None,
                              tilt=random_tilt(rng, config.max_tilt), extent=float(2 * w),
                              split=split, photo_probability=config.photo_probability,
                              texel_scale=config.texel_scale)
    facing = replace(background, axes=np.diag([z_bg / f, z_bg / f, 0.0])[:, :2])

    def fits(layer: Layer, cam1: Camera) -> bool:
        """Seen in front of both cameras over the whole image, and slow enough."""
        return (all(inverse_depth_at(layer, c, *corners).min() > 1.0 / (3 * z_bg)
                    for c in (cam0, cam1))
                and _max_shift(layer, (cam0, cam1), None, config.size) <= limit / 2)

    for attempt in range(6):  # halve the camera motion until the background fits
        cam1 = Camera(k, _scaled(rot, move, np.zeros(3), 0.5**attempt))
        if fits(background, cam1):
            break
        if fits(facing, cam1):  # too slanted: the plane faces the camera
            background = facing
            break
    else:  # a static camera and a plane facing it
        cam1, background = Camera(k, np.eye(4)), facing
    layers: list[Layer] = [background]
    motions: list[np.ndarray | None] = [None]
    cameras = (cam0, cam1)

    for _ in range(int(rng.integers(config.objects[0], config.objects[1] + 1))):
        depth = z_near + (z_bg * 0.9 - z_near) * rng.random() ** 0.7
        pixel, shape = random_site(rng, config.size)
        layer = planar_layer(rng, cam0, pixel, depth, shape,
                             tilt=random_tilt(rng, config.max_tilt), split=split,
                             photo_probability=config.photo_probability,
                             texel_scale=config.texel_scale)
        radius_px = shape.extent()
        step = limit * rng.random() ** 1.5
        direction = rng.uniform(0.0, 2 * np.pi)
        shift = np.array([np.cos(direction), np.sin(direction), rng.normal() * 0.1])
        shift *= step * depth / f
        spin = rng.normal() * 0.25 * limit / max(radius_px, 1.0)
        turn = rng.normal(size=2) * 0.1
        axis_angle = np.array([turn[0], turn[1], spin])
        fits, motion = _fitted_motion([layer], cameras, axis_angle, shift, layer.origin,
                                      config.size, limit)
        if not fits:
            continue  # even the camera motion alone moves it too far: leave it out
        layers.append(layer)
        motions.append(motion)
    return FlowScene(layers, cam0, cam1, motions)


def _street(rng: np.random.Generator, config: FlowConfig, split: str,
            k: np.ndarray) -> FlowScene:
    """A street seen from a camera that drives forward (with a small turn), and cars that
    drive along it; parked cars, poles and the scenery stand still."""
    h, w = config.size
    limit = config.flow_limit
    f = float(k[0, 0])
    to_camera = street_orientation(rng, k, config.size)
    down, forward = to_camera[:, 1], to_camera[:, 2]
    rays = corner_rays(k, config.size)
    height = 1.0
    depth = height / (down @ rays[:, 2:])  # ground depth at the bottom corners [2]
    # a pure translation t moves a point at depth Z from p to foe + (p - foe) Z / (Z - t_z)
    # exactly (foe: the focus of expansion), so the flow there is |p - foe| t_z / (Z - t_z):
    # choose t_z for 40-90 % of the limit at the nearer bottom corner
    foe = (k @ forward)[:2] / forward[2]
    radius = np.hypot(np.array([0.0, w - 1]) - foe[0], h - 1 - foe[1])
    target = limit * rng.uniform(0.4, 0.9)
    move = forward * float((target * depth / (radius + target)).min()) / forward[2]
    turn = (down * rng.normal() + to_camera[:, 0] * 0.5 * rng.normal()) * (0.1 * limit / f)
    end = float(depth.min()) * rng.uniform(3.0, 10.0)
    street = street_layout(rng, config, k, to_camera, height, end, end * rng.uniform(2.0, 5.0),
                           near=0.8 * float(depth.min()), split=split)
    ground, sky = street.layers[:2]
    # the ground is checked from the row where it is a quarter of the sky's distance away
    # (farther up it moves less, and above the horizon it is not seen)
    ray_top = [np.linalg.solve(k, [x, 0.0, 1.0]) for x in (0.0, w - 1)]
    rows = [(4 * height / street.far - down @ r) / (down[1] / k[1, 1]) for r in ray_top]
    top = float(np.clip(max(rows), 0.0, h - 2))
    cam0 = Camera(k, np.eye(4))
    for attempt in range(6):  # halve the camera motion until the ground and the sky fit
        cam1 = Camera(k, _scaled(turn, -move, np.zeros(3), 0.5**attempt))
        if (_max_shift(ground, (cam0, cam1), None, config.size, top) <= limit
                and _max_shift(sky, (cam0, cam1), None, config.size) <= limit):
            break
    else:
        cam1 = Camera(k, np.eye(4))
    cameras = (cam0, cam1)
    # scenery and poles stand still: left out if the camera motion moves them too far
    layers = [ground, sky] + [layer for layer in street.layers[2:] + street.poles
                              if _max_shift(layer, cameras, None, config.size) <= limit]
    motions: list[np.ndarray | None] = [None] * len(layers)
    for faces in street.cars:  # half of them drive along the street, at most as fast as we do
        speed = 0.0 if rng.random() < 0.5 else rng.uniform(-1.0, 1.0)
        fits, motion = _fitted_motion(faces, cameras, np.zeros(3), move * speed, np.zeros(3),
                                      config.size, limit)
        if fits:
            layers += faces
            motions += [motion] * len(faces)
    return FlowScene(layers, cam0, cam1, motions)


def render_flow(scene: FlowScene, size: tuple[int, int]) -> Sample:
    """Render both frames and derive flow in both directions and occlusion masks."""
    h, w = size
    view0 = render(scene.layers, scene.camera0, size)
    view1 = render(scene.layers, scene.camera1, size, scene.motions)
    xs, ys = np.meshgrid(np.arange(w, dtype=np.float64), np.arange(h, dtype=np.float64))
    x1, y1, _ = project(scene.layers, view0, scene.camera1, scene.motions)
    x0, y0, _ = project(scene.layers, view1, scene.camera0)
    flow = np.stack([x1 - xs, y1 - ys], -1)
    flow_backward = np.stack([x0 - xs, y0 - ys], -1)
    return {
        "image0": view0.image, "image1": view1.image,
        "flow": np.nan_to_num(flow).astype(np.float32),
        "flow_backward": np.nan_to_num(flow_backward).astype(np.float32),
        "valid": view0.layer >= 0, "valid1": view1.layer >= 0,
        "valid_noc": visible(view1, view0.layer, x1, y1),
        "valid_noc1": visible(view0, view1.layer, x0, y0),
    }


def random_flow_pair(rng: np.random.Generator, config: FlowConfig | None = None,
                     split: str = "train") -> Sample:
    """One random optical-flow pair as a dict of numpy arrays (see the module docstring)."""
    config = config or FlowConfig()
    return render_flow(flow_scene(rng, config, split), config.size)


class SyntheticFlow(SyntheticDataset):
    """Torch dataset of random optical-flow pairs (``config``: a :class:`FlowConfig`); sample
    ``i`` depends only on ``(seed, split, i)``.

    Example:
        >>> s = SyntheticFlow(4, config=FlowConfig(size=(32, 48)))[1]
        >>> tuple(s["flow"].shape), tuple(s["flow_backward"].shape)
        ((2, 32, 48), (2, 32, 48))
    """

    kind = "flow"
    config_type = FlowConfig

    def generate(self, rng: np.random.Generator) -> Sample:
        return random_flow_pair(rng, self.config, self.split)
