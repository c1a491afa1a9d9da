"""Layered scenes of textured planar patches, rendered exactly by inverse mapping.

A scene is a list of :class:`Layer` objects: planar patches in 3D, each with a texture painted
in its own plane coordinates ``(u, v)`` and an outline (:class:`Shape`, or none for an unbounded
background plane). A pinhole camera (intrinsics ``K [3, 3]``, world-to-camera ``[4, 4]``) sees a
plane through a homography ``G`` from ``(u, v, 1)`` to pixels, so every view is rendered by
*inverse mapping*: each pixel is sent through ``G^-1`` to plane coordinates and reads the texture
there. With ``G^-1`` scaled as ``M^-1 K^-1`` (``M = [R a_u, R a_v, R o + t]``) the third
homogeneous coordinate of ``G^-1 p`` is exactly the inverse depth ``1/Z`` of the pixel's point,
which orders the layers per pixel (a z-buffer): intersecting, slanted planes occlude correctly.

Because all views are rendered from one scene description with one interpolation rule (bilinear,
mirrored texture addressing), a pixel and its ground-truth match in another view read the same
texture point; ground truth (disparity, flow, depth) comes from the same plane coordinates by
forward projection (:func:`project`), and occlusion from comparing layer ids (:func:`visible`).

Pixel centres are at integer coordinates. Object motions (for optical flow) are ``[4, 4]``
rigid transforms applied to a layer before the camera.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from crossview.pixel_grid import to_grid_coords

_EPS = 1e-9


@dataclass(frozen=True)
class Shape:
    """A star-shaped outline around ``(u, v) = (0, 0)`` in plane coordinates.

    The point ``(u, v)`` is inside when its ``norm``-distance (1: diamond, 2: ellipse,
    ``inf``: rectangle) in the rotated, ``aspect``-stretched frame, divided by ``radius``, is at
    most ``1 + sum_k amplitudes[k] * cos((k + 2) * theta + phases[k])``.
    """

    radius: float
    aspect: float = 1.0
    angle: float = 0.0
    norm: float = 2.0
    amplitudes: tuple[float, ...] = ()
    phases: tuple[float, ...] = ()

    def half_extents(self) -> tuple[float, float]:
        """Bounds on ``|u|`` and ``|v|`` over the shape (its axis-aligned half box)."""
        k = self.aspect**0.5
        # the shape's frame axes, scaled: point = a * ra * (c, s) + b * rb * (-s, c)
        ra, rb = self.radius * k, self.radius / k
        scale = 1.0 + sum(abs(a) for a in self.amplitudes)  # the outline's largest radius
        c, s = abs(np.cos(self.angle)), abs(np.sin(self.angle))
        if self.norm == 1:  # diamond: extremes at the vertices
            eu, ev = max(ra * c, rb * s), max(ra * s, rb * c)
        elif self.norm == 2:  # ellipse
            eu, ev = float(np.hypot(ra * c, rb * s)), float(np.hypot(ra * s, rb * c))
        else:  # rectangle: extremes at the corners
            eu, ev = ra * c + rb * s, ra * s + rb * c
        return scale * eu, scale * ev

    def extent(self) -> float:
        """A bound on ``max(|u|, |v|)`` over the shape."""
        return max(self.half_extents())

    def contains(self, u: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Boolean mask of the points ``(u, v)`` (same-shape arrays) inside the outline."""
        c, s = np.cos(self.angle), np.sin(self.angle)
        k = self.aspect**0.5
        a = (c * u + s * v) / (self.radius * k)
        b = (c * v - s * u) * (k / self.radius)
        if self.norm == 1:
            q = np.abs(a) + np.abs(b)
        elif self.norm == 2:
            q = np.sqrt(a * a + b * b)
        else:
            q = np.maximum(np.abs(a), np.abs(b))
        if not self.amplitudes:
            return q <= 1.0
        # cos(k theta + phase) from the unit vector (cos theta, sin theta) by angle addition
        with np.errstate(divide="ignore", invalid="ignore"):
            r = np.sqrt(a * a + b * b)
            c1 = np.where(r > 0, a / r, 1.0)
            s1 = np.where(r > 0, b / r, 0.0)
        ck, sk = c1 * c1 - s1 * s1, 2 * c1 * s1  # k = 2
        bound = np.ones_like(q)
        for amp, phase in zip(self.amplitudes, self.phases, strict=True):
            bound += (amp * np.cos(phase)) * ck - (amp * np.sin(phase)) * sk
            ck, sk = ck * c1 - sk * s1, sk * c1 + ck * s1
        return q <= bound


@dataclass(frozen=True)
class Layer:
    """A textured planar patch.

    Attributes:
        origin: ``[3]`` world point at plane coordinates ``(0, 0)``.
        axes: ``[3, 2]`` world directions of ``u`` and ``v`` (their lengths set the plane unit).
        texture: ``[h, w, 3]`` float32 in 0..255.
        texture_map: ``[2, 3]`` affine map from ``(u, v, 1)`` to texture ``(column, row)``.
        shape: the outline, or ``None`` for an unbounded plane (a background).
    """

    origin: np.ndarray
    axes: np.ndarray
    texture: np.ndarray
    texture_map: np.ndarray
    shape: Shape | None = None

    @functools.cached_property
    def texture_tensor(self) -> torch.Tensor:
        """The texture as a contiguous ``[1, 3, h, w]`` float32 tensor (made once)."""
        chw = np.ascontiguousarray(self.texture.transpose(2, 0, 1), np.float32)
        return torch.from_numpy(chw)[None]


@dataclass(frozen=True)
class Camera:
    """A pinhole camera: intrinsics ``K [3, 3]`` in pixels, ``world_to_camera [4, 4]``."""

    K: np.ndarray
    world_to_camera: np.ndarray


@dataclass(frozen=True)
class Rendering:
    """One rendered view (all arrays ``[H, W]`` unless noted).

    Attributes:
        image: ``[H, W, 3]`` float32 in 0..255 (zeros where no layer is seen).
        inverse_depth: ``1/Z`` of the visible point, 0 where no layer is seen.
        layer: index of the visible layer, -1 where none.
        u, v: plane coordinates of the visible point on its layer.
    """

    image: np.ndarray
    inverse_depth: np.ndarray
    layer: np.ndarray
    u: np.ndarray
    v: np.ndarray


def translation(t: Sequence[float]) -> np.ndarray:
    """The ``[4, 4]`` rigid transform ``x -> x + t``."""
    m = np.eye(4)
    m[:3, 3] = t
    return m


def rotation(axis_angle: Sequence[float]) -> np.ndarray:
    """The ``[3, 3]`` rotation of an axis-angle vector (Rodrigues' formula)."""
    w = np.asarray(axis_angle, dtype=np.float64)
    angle = float(np.linalg.norm(w))
    if angle < 1e-12:
        return np.eye(3)
    k = w / angle
    kx = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    return np.eye(3) + np.sin(angle) * kx + (1 - np.cos(angle)) * (kx @ kx)


def rigid_about(axis_angle: Sequence[float], shift: Sequence[float],
                pivot: Sequence[float]) -> np.ndarray:
    """``[4, 4]`` rotation by ``axis_angle`` about ``pivot``, then translation by ``shift``."""
    m = np.eye(4)
    r = rotation(axis_angle)
    p = np.asarray(pivot, dtype=np.float64)
    m[:3, :3] = r
    m[:3, 3] = p - r @ p + np.asarray(shift, dtype=np.float64)
    return m


def plane_homography(layer: Layer, camera: Camera, motion: np.ndarray | None = None) -> np.ndarray:
    """``G [3, 3]``: plane coordinates ``(u, v, 1)`` to homogeneous pixels of ``camera``.

    ``motion`` (``[4, 4]``, object to world) moves the layer before the camera sees it.
    """
    e = camera.world_to_camera if motion is None else camera.world_to_camera @ motion
    r, t = e[:3, :3], e[:3, 3]
    m = np.column_stack([r @ layer.axes[:, 0], r @ layer.axes[:, 1], r @ layer.origin + t])
    return camera.K @ m


def inverse_depth_at(layer: Layer, camera: Camera, x: np.ndarray, y: np.ndarray,
                     motion: np.ndarray | None = None) -> np.ndarray:
    """``1/Z`` of the layer's plane (extended without bounds) seen at pixels ``(x, y)``.

    Non-positive where the pixel's ray misses the plane's front half-space.
    """
    h3 = np.linalg.inv(plane_homography(layer, camera, motion))[2]
    return h3[0] * x + h3[1] * y + h3[2]


def _box(layer: Layer, g: np.ndarray, size: tuple[int, int]) -> tuple[int, int, int, int] | None:
    """Pixel bounds ``(y0, y1, x0, x1)`` that contain the layer's image, ``None`` if empty."""
    h, w = size
    if layer.shape is None:
        return 0, h, 0, w
    eu, ev = layer.shape.half_extents()
    corners = g @ np.array([[-eu, eu, eu, -eu], [-ev, -ev, ev, ev], [1.0, 1.0, 1.0, 1.0]])
    if np.any(corners[2] <= _EPS):
        return 0, h, 0, w
    xs, ys = corners[0] / corners[2], corners[1] / corners[2]
    x0, x1 = max(0, int(np.floor(xs.min())) - 1), min(w, int(np.ceil(xs.max())) + 2)
    y0, y1 = max(0, int(np.floor(ys.min())) - 1), min(h, int(np.ceil(ys.max())) + 2)
    if x0 >= x1 or y0 >= y1:
        return None
    return y0, y1, x0, x1


def sample_texture(texture: np.ndarray | torch.Tensor, cols: np.ndarray,
                   rows: np.ndarray) -> np.ndarray:
    """Bilinear samples ``[N, 3]`` of a texture at ``(cols, rows)`` ``[N]``.

    ``texture`` is ``[h, w, 3]`` (numpy) or ``[1, 3, h, w]`` (torch, float32). Addressing is
    mirrored about the border texel centres (period ``2 (n - 1)``), so the texture extends
    continuously over the whole plane.
    """
    if isinstance(texture, np.ndarray):
        texture = torch.from_numpy(np.ascontiguousarray(texture.transpose(2, 0, 1),
                                                        np.float32))[None]
    h, w = texture.shape[-2:]
    grid = np.empty((1, 1, cols.size, 2), np.float32)
    grid[0, 0, :, 0] = to_grid_coords(cols, w)
    grid[0, 0, :, 1] = to_grid_coords(rows, h)
    out = F.grid_sample(texture, torch.from_numpy(grid), mode="bilinear",
                        padding_mode="reflection", align_corners=True)
    return out[0, :, 0].numpy().T


def render(layers: Sequence[Layer], camera: Camera, size: tuple[int, int],
           motions: Sequence[np.ndarray | None] | None = None) -> Rendering:
    """Render ``layers`` seen by ``camera`` into an image of ``size = (H, W)``.

    Each pixel shows the layer with the largest inverse depth among those whose outline covers
    it (ties keep the earlier layer). ``motions[k]`` (``[4, 4]`` or ``None``) moves layer ``k``.
    """
    h, w = size
    inv_depth = np.zeros((h, w), np.float32)
    ids = np.full((h, w), -1, np.int32)
    u_map = np.zeros((h, w), np.float32)
    v_map = np.zeros((h, w), np.float32)
    for k, layer in enumerate(layers):
        g = plane_homography(layer, camera, None if motions is None else motions[k])
        box = _box(layer, g, size)
        if box is None:
            continue
        y0, y1, x0, x1 = box
        hinv = np.linalg.inv(g)
        # float32 relative to the box corner: offsets stay small, so plane coordinates keep
        # ~1e-4 px precision at a fraction of float64's memory traffic
        c = hinv[:, 0] * x0 + hinv[:, 1] * y0 + hinv[:, 2]
        xs = np.arange(x1 - x0, dtype=np.float32)[None, :]
        ys = np.arange(y1 - y0, dtype=np.float32)[:, None]
        hp = [float(hinv[i, 0]) * xs + (float(hinv[i, 1]) * ys + float(c[i])) for i in range(3)]
        depth_key = hp[2]
        hit = depth_key > inv_depth[y0:y1, x0:x1]
        hit &= depth_key > _EPS
        with np.errstate(divide="ignore", invalid="ignore"):
            u = hp[0] / depth_key
            v = hp[1] / depth_key
        if layer.shape is not None:
            hit &= layer.shape.contains(u, v)
        np.copyto(inv_depth[y0:y1, x0:x1], depth_key, where=hit)
        np.copyto(ids[y0:y1, x0:x1], k, where=hit)
        np.copyto(u_map[y0:y1, x0:x1], u, where=hit)
        np.copyto(v_map[y0:y1, x0:x1], v, where=hit)
    image = np.zeros((h * w, 3), np.float32)
    order, ends = _by_layer(ids, len(layers))
    us_all, vs_all = u_map.ravel()[order], v_map.ravel()[order]
    for k, layer in enumerate(layers):
        start, stop = ends[k], ends[k + 1]
        if start == stop:
            continue
        a = layer.texture_map
        us, vs = us_all[start:stop], vs_all[start:stop]
        image[order[start:stop]] = sample_texture(
            layer.texture_tensor, float(a[0, 0]) * us + (float(a[0, 1]) * vs + float(a[0, 2])),
            float(a[1, 0]) * us + (float(a[1, 1]) * vs + float(a[1, 2])))
    np.clip(image, 0.0, 255.0, out=image)  # bilinear rounding may overshoot by ~1e-5
    return Rendering(image.reshape(h, w, 3), inv_depth, ids, u_map, v_map)


def _by_layer(ids: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
    """Pixel order grouping ``ids [H, W]`` by layer, and the group ends: layer ``k`` owns
    ``order[ends[k]:ends[k + 1]]`` (flat indices); pixels without a layer come first."""
    flat = ids.ravel()
    order = np.argsort(flat, kind="stable")
    return order, np.cumsum(np.bincount(flat + 1, minlength=count + 1))


def project(layers: Sequence[Layer], rendering: Rendering, camera: Camera,
            motions: Sequence[np.ndarray | None] | None = None
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Where each visible point of ``rendering`` lands in ``camera``: ``(x, y, inverse_depth)``.

    Each ``[H, W]`` float64; NaN where ``rendering`` shows no layer. ``motions`` are the layer
    motions of the *target* view (as for :func:`render`).
    """
    # one homography per layer, gathered per pixel (row 0: no layer -> NaN)
    table = np.full((len(layers) + 1, 9), np.nan)
    for k, layer in enumerate(layers):
        table[k + 1] = plane_homography(layer, camera,
                                        None if motions is None else motions[k]).ravel()
    g = table[rendering.layer + 1]
    u = rendering.u.astype(np.float64)
    v = rendering.v.astype(np.float64)
    # the point's camera z is the third coordinate because K's last row is (0, 0, 1)
    inverse = 1.0 / (g[..., 6] * u + g[..., 7] * v + g[..., 8])
    x = (g[..., 0] * u + g[..., 1] * v + g[..., 2]) * inverse
    y = (g[..., 3] * u + g[..., 4] * v + g[..., 5]) * inverse
    return x, y, inverse


def visible(target: Rendering, layer: np.ndarray, x: np.ndarray,
            y: np.ndarray | None = None) -> np.ndarray:
    """Whether points of layers ``layer`` at target pixels ``(x, y)`` are seen by ``target``.

    A point is visible when it lies inside the target image and the target shows its layer at
    all pixels that bilinear interpolation at ``(x, y)`` reads (so a backward warp there reads
    only that layer). All arrays ``[H, W]``; ``y=None`` means each point stays on its own row
    (rectified stereo). Returns a bool ``[H, W]`` mask. Rendering works in float32 (plane
    coordinates to ~1e-5 px); a neighbour read with such a weight does not change a warp, so
    positions within ``1e-4`` px of a pixel count as on it.
    """
    h, w = target.layer.shape
    tol = 1e-4
    with np.errstate(invalid="ignore"):  # NaN positions compare False: not visible
        ok = (layer >= 0) & (x > -tol) & (x < w - 1 + tol)
        if y is not None:
            ok &= (y > -tol) & (y < h - 1 + tol)
    flat = target.layer.ravel()
    rows = np.arange(h, dtype=np.int64)[:, None] * w
    index = []
    for coord, n, stride in ((x, w, 1), (y, h, w)):
        if coord is None:
            index.append((rows, None))
            continue
        c = np.where(ok, coord, 0.0).astype(np.float32)
        np.clip(c, 0.0, n - 1, out=c)
        base = np.floor(c + tol)
        step = (c - base) > tol
        i0 = base.astype(np.int64)
        index.append((i0 * stride, np.minimum(i0 + step, n - 1) * stride if step.any() else None))
    (x0, x1), (y0, y1) = index
    ok &= flat[y0 + x0] == layer
    for yy, xx in ((y0, x1), (y1, x0), (y1, x1)):
        if yy is not None and xx is not None:
            ok &= flat[yy + xx] == layer
    return ok
