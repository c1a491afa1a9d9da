"""Random smooth warps of photographs with dense correspondence, for semantic matching.

A random crop of a scikit-image photograph (training or held-out split, see
:mod:`crossview.data.synthetic.textures`) is seen twice: ``image1`` through a mild random
homography ``H1``, ``image0`` through a stronger homography ``H0`` composed with a random
thin-plate-spline (TPS) deformation ``T``. Both are backward maps from output pixels to crop
coordinates, so the correspondence of an ``image0`` pixel ``p`` is exact:
``p1 = H1^-1(H0(T(p)))`` and ``flow[p] = p1 - p`` (``image0`` -> ``image1``). ``valid`` marks
pixels whose match lies inside ``image1`` and whose source lies inside the photograph.
Photometric changes (independent colour jitter of both images) come last.

Sample keys: ``image0``, ``image1``, ``flow`` (``[H, W, 2]`` numpy, ``[2, H, W]`` tensor),
``valid``, and with ``num_keypoints > 0`` also ``keypoints0``/``keypoints1`` ``[N, 2]`` (x, y):
matching points drawn from valid pixels (:func:`sample_keypoints`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from crossview.data.augment import ColorJitter
from crossview.data.synthetic.dataset import Sample, SyntheticDataset
from crossview.data.synthetic.scene import sample_texture
from crossview.data.synthetic.textures import image_names, load_image


def homography_from_points(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """The ``[3, 3]`` homography mapping 4 points ``src [4, 2]`` to ``dst [4, 2]`` (DLT)."""
    if src.shape != (4, 2) or dst.shape != (4, 2):
        raise ValueError(f"need 4 point pairs, got {src.shape=}, {dst.shape=}")
    rows = []
    for (x, y), (u, v) in zip(src, dst, strict=True):
        rows.append([x, y, 1, 0, 0, 0, -u * x, -u * y])
        rows.append([0, 0, 0, x, y, 1, -v * x, -v * y])
    h = np.linalg.solve(np.array(rows, dtype=np.float64), dst.reshape(-1).astype(np.float64))
    return np.append(h, 1.0).reshape(3, 3)


def apply_homography(h: np.ndarray, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``h [3, 3]`` applied to points ``(x, y)`` (arrays of one shape)."""
    w = h[2, 0] * x + h[2, 1] * y + h[2, 2]
    return (h[0, 0] * x + h[0, 1] * y + h[0, 2]) / w, (h[1, 0] * x + h[1, 1] * y + h[1, 2]) / w


def _tps_kernel(r2: np.ndarray) -> np.ndarray:
    """``U(r) = r^2 log r^2`` from squared distances (0 at r = 0)."""
    return np.where(r2 > 0, r2 * np.log(np.maximum(r2, 1e-300)), 0.0)


@dataclass(frozen=True)
class ThinPlateSpline:
    """A 2D thin-plate spline ``p -> p + d(p)`` interpolating ``displacements [N, 2]`` at
    ``controls [N, 2]`` (``d`` = affine part + radial ``U`` terms, minimal bending energy)."""

    controls: np.ndarray
    weights: np.ndarray  # [N + 3, 2]: radial weights, then affine coefficients (1, x, y)

    @classmethod
    def fit(cls, controls: np.ndarray, displacements: np.ndarray) -> ThinPlateSpline:
        n = len(controls)
        k = _tps_kernel(((controls[:, None] - controls[None]) ** 2).sum(-1))
        p = np.column_stack([np.ones(n), controls])
        system = np.zeros((n + 3, n + 3))
        system[:n, :n], system[:n, n:], system[n:, :n] = k, p, p.T
        rhs = np.zeros((n + 3, 2))
        rhs[:n] = displacements
        return cls(controls, np.linalg.solve(system, rhs))

    def __call__(self, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        n = len(self.controls)
        a = self.weights[n:]
        dx = a[0, 0] + a[1, 0] * x + a[2, 0] * y
        dy = a[0, 1] + a[1, 1] * x + a[2, 1] * y
        for (cx, cy), (wx, wy) in zip(self.controls, self.weights[:n], strict=True):
            u = _tps_kernel((x - cx) ** 2 + (y - cy) ** 2)
            dx = dx + wx * u
            dy = dy + wy * u
        return x + dx, y + dy


@dataclass(frozen=True)
class WarpConfig:
    """Parameters of random warps.

    Attributes:
        size: ``(H, W)`` of both images.
        homography: corner jitter of ``H0`` as a fraction of the size (``H1`` gets half).
        tps: standard deviation of the TPS control-point displacements, fraction of the size.
        tps_grid: the TPS control points form a ``tps_grid x tps_grid`` grid.
        crop: range of the photograph crop side as a fraction of its shorter side.
        photometric: jitter the colours of both images independently.
        num_keypoints: keypoint pairs per sample (0: none).
        shift: largest translation of ``image0``'s view per axis, as a fraction of the size:
            ``H0`` is followed by a uniform random offset in ``+-shift * (W - 1, H - 1)`` crop
            units, so content crosses the image sides and keypoints near them get larger
            displacements. 0 (the default) draws no offset and no random number, so the
            default stream is unchanged.
    """

    size: tuple[int, int] = (240, 240)
    homography: float = 0.12
    tps: float = 0.04
    tps_grid: int = 4
    crop: tuple[float, float] = (0.4, 0.9)
    photometric: bool = True
    num_keypoints: int = 0
    shift: float = 0.0

    def __post_init__(self) -> None:
        if min(self.size) < 2:
            raise ValueError(f"size must be at least 2x2, got {self.size=}")
        if self.tps_grid < 2:
            raise ValueError(f"tps_grid must be >= 2, got {self.tps_grid=}")
        if not 0 < self.crop[0] <= self.crop[1] <= 1:
            raise ValueError(f"crop must be a range in (0, 1], got {self.crop=}")
        if not 0 <= self.shift < 1:
            raise ValueError(f"shift must be in [0, 1) (a fraction of the size), got "
                             f"{self.shift=}")


def _random_homography(rng: np.random.Generator, size: tuple[int, int],
                       strength: float) -> np.ndarray:
    h, w = size
    corners = np.array([[0.0, 0.0], [w - 1, 0.0], [w - 1, h - 1], [0.0, h - 1]])
    jitter = rng.uniform(-strength, strength, (4, 2)) * np.array([w - 1, h - 1])
    return homography_from_points(corners, corners + jitter)


def sample_keypoints(flow: np.ndarray, valid: np.ndarray, count: int,
                     rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``count`` matching keypoints ``(kps0 [N, 2], kps1 [N, 2])`` (x, y), float32.

    Draws distinct valid pixels of ``image0`` (with replacement only if there are fewer valid
    pixels than ``count``) and their matches ``p + flow[p]`` in ``image1``. ``flow`` is
    ``[H, W, 2]``, ``valid`` ``[H, W]`` bool.
    """
    ys, xs = np.nonzero(valid)
    if len(xs) == 0:
        raise ValueError("no valid pixel to draw keypoints from")
    pick = rng.choice(len(xs), size=count, replace=len(xs) < count)
    kps0 = np.stack([xs[pick], ys[pick]], -1).astype(np.float32)
    return kps0, kps0 + flow[ys[pick], xs[pick]].astype(np.float32)


def random_warp_pair(rng: np.random.Generator, config: WarpConfig | None = None,
                     split: str = "train") -> Sample:
    """One warped pair of a photograph of ``split`` (see the module docstring)."""
    config = config or WarpConfig()
    h, w = config.size
    names = image_names(split)
    photo = load_image(names[int(rng.integers(len(names)))])
    ph, pw = photo.shape[:2]
    # the crop: output pixel (x, y) -> photograph (x0 + s x, y0 + s y)
    side = rng.uniform(*config.crop) * min(ph, pw)
    s = side / max(h, w)
    x0 = rng.uniform(0, pw - 1 - s * (w - 1))
    y0 = rng.uniform(0, ph - 1 - s * (h - 1))
    sx = sy = s  # photograph pixels per crop unit
    if s > 1:  # minify once with an antialiasing filter, so both views sample the same content
        photo = torch.nn.functional.interpolate(
            torch.from_numpy(np.ascontiguousarray(photo.transpose(2, 0, 1)))[None],
            size=(max(2, round(ph / s)), max(2, round(pw / s))), mode="bilinear",
            antialias=True, align_corners=False)[0].numpy().transpose(1, 2, 0)
        # align_corners=False: photograph x maps to (x + 0.5) * small_w / pw - 0.5
        kx, ky = photo.shape[1] / pw, photo.shape[0] / ph
        x0, y0, sx, sy = (x0 + 0.5) * kx - 0.5, (y0 + 0.5) * ky - 0.5, s * kx, s * ky
        ph, pw = photo.shape[:2]
    h0 = _random_homography(rng, config.size, config.homography)
    h1 = _random_homography(rng, config.size, config.homography / 2)
    g = np.linspace(0.0, 1.0, config.tps_grid)
    controls = np.stack(np.meshgrid(g * (w - 1), g * (h - 1)), -1).reshape(-1, 2)
    tps = ThinPlateSpline.fit(controls, rng.normal(0.0, config.tps, controls.shape)
                              * np.array([w - 1, h - 1]))
    if config.shift > 0:  # drawn after the geometry: same photograph, crop, H0, H1 and TPS
        dx, dy = rng.uniform(-config.shift, config.shift, 2) * np.array([w - 1, h - 1])
        h0 = np.array([[1.0, 0.0, dx], [0.0, 1.0, dy], [0.0, 0.0, 1.0]]) @ h0
    xs, ys = np.meshgrid(np.arange(w, dtype=np.float64), np.arange(h, dtype=np.float64))
    qx, qy = apply_homography(h0, *tps(xs, ys))  # image0 pixel -> crop coordinates
    p1x, p1y = apply_homography(np.linalg.inv(h1), qx, qy)
    rx, ry = apply_homography(h1, xs, ys)  # image1 pixel -> crop coordinates

    def look(cx: np.ndarray, cy: np.ndarray) -> np.ndarray:
        return sample_texture(photo, x0 + sx * cx.ravel(), y0 + sy * cy.ravel()).reshape(h, w, 3)

    image0, image1 = look(qx, qy), look(rx, ry)
    inside_photo = ((x0 + sx * qx >= 0) & (x0 + sx * qx <= pw - 1)
                    & (y0 + sy * qy >= 0) & (y0 + sy * qy <= ph - 1))
    valid = inside_photo & (p1x >= 0) & (p1x <= w - 1) & (p1y >= 0) & (p1y <= h - 1)
    if config.photometric:
        jitter = ColorJitter(saturation=(0.6, 1.4))
        image0, image1 = (jitter(torch.from_numpy(im).permute(2, 0, 1), rng).permute(1, 2, 0)
                          .numpy() for im in (image0, image1))
    flow = np.stack([p1x - xs, p1y - ys], -1).astype(np.float32)
    sample: Sample = {"image0": image0, "image1": image1, "flow": flow, "valid": valid}
    if config.num_keypoints > 0:
        sample["keypoints0"], sample["keypoints1"] = sample_keypoints(
            flow, valid, config.num_keypoints, rng)
    return sample


class SyntheticWarps(SyntheticDataset):
    """Torch dataset of warped photograph pairs (``config``: a :class:`WarpConfig`); sample
    ``i`` depends only on ``(seed, split, i)``. ``split="heldout"`` uses only the held-out
    photographs."""

    kind = "warp"
    config_type = WarpConfig

    def generate(self, rng: np.random.Generator) -> Sample:
        return random_warp_pair(rng, self.config, self.split)
