"""Pinhole cameras: intrinsics normalisation, the lifted 4x4 projection P~ and its inverse.

Conventions (those of the public ``prope`` package, so its models move over unchanged):

- ``K`` ``[..., 3, 3]`` are intrinsics in pixels, ``[[fx, s, cx], [0, fy, cy], [0, 0, 1]]``.
- ``viewmats`` ``[..., 4, 4]`` are world-to-camera (``x_cam = viewmat @ x_world``), OpenCV axes
  (x right, y down, z forward).
- ``image_size`` is ``(height, width)`` in pixels, in that order everywhere in crossview.
- Normalised intrinsics map pixels to ``u / W - 0.5, v / H - 0.5``:
  ``fx / W, fy / H, cx / W - 0.5, cy / H - 0.5`` (x divides by the width, y by the height).
- The lifted projection (paper Eq. 3-4) is ``P~ = [[K_norm, 0], [0, 1]] @ viewmat``, an
  image-from-world map in homogeneous 4D; its inverse is computed analytically,
  ``P~^-1 = viewmat^-1 @ [[K_norm^-1, 0], [0, 1]]``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


def check_intrinsics(K: Tensor, name: str = "K") -> None:
    """Raise ``ValueError``/``TypeError`` unless ``K`` is a float ``[..., 3, 3]`` tensor."""
    if not isinstance(K, Tensor):
        raise TypeError(f"{name} must be a tensor, got {type(K).__name__}")
    if K.ndim < 2 or K.shape[-2:] != (3, 3):
        raise ValueError(f"{name} must have shape [..., 3, 3], got {name}.shape={tuple(K.shape)}")
    if not K.is_floating_point():
        raise TypeError(f"{name} must be a float tensor, got {name}.dtype={K.dtype}")


def check_viewmats(viewmats: Tensor, name: str = "viewmats") -> None:
    """Raise ``ValueError``/``TypeError`` unless ``viewmats`` is a float ``[..., 4, 4]`` tensor."""
    if not isinstance(viewmats, Tensor):
        raise TypeError(f"{name} must be a tensor, got {type(viewmats).__name__}")
    if viewmats.ndim < 2 or viewmats.shape[-2:] != (4, 4):
        raise ValueError(
            f"{name} must have shape [..., 4, 4], got {name}.shape={tuple(viewmats.shape)}"
        )
    if not viewmats.is_floating_point():
        raise TypeError(f"{name} must be a float tensor, got {name}.dtype={viewmats.dtype}")


def _check_image_size(image_size: tuple[int, int]) -> tuple[int, int]:
    if len(image_size) != 2 or min(image_size) <= 0:
        raise ValueError(f"image_size must be (height, width) > 0, got {image_size=}")
    return int(image_size[0]), int(image_size[1])


def normalize_intrinsics(K: Tensor, image_size: tuple[int, int]) -> Tensor:
    """Intrinsics in pixels ``[..., 3, 3]`` -> normalised intrinsics ``[..., 3, 3]``.

    ``fx / W, s / W, cx / W - 0.5`` on the first row, ``fy / H, cy / H - 0.5`` on the second,
    with ``image_size = (H, W)``: the map from pixels to ``(u / W - 0.5, v / H - 0.5)`` composed
    with ``K``.
    """
    check_intrinsics(K)
    height, width = _check_image_size(image_size)
    to_unit = torch.tensor(
        [[1.0 / width, 0.0, -0.5], [0.0, 1.0 / height, -0.5], [0.0, 0.0, 1.0]],
        dtype=K.dtype, device=K.device,
    )
    return to_unit @ K


def invert_intrinsics(K: Tensor) -> Tensor:
    """Analytic inverse of intrinsics ``[..., 3, 3]`` of the form ``[[fx, s, cx], [0, fy, cy],
    [0, 0, 1]]`` (skew allowed). Only those five entries are read: the lower triangle and
    ``K[..., 2, 2]`` are taken to be 0 and 1, not checked."""
    check_intrinsics(K)
    fx, s, cx = K[..., 0, 0], K[..., 0, 1], K[..., 0, 2]
    fy, cy = K[..., 1, 1], K[..., 1, 2]
    zero, one = torch.zeros_like(fx), torch.ones_like(fx)
    rows = [
        torch.stack([1.0 / fx, -s / (fx * fy), (s * cy - cx * fy) / (fx * fy)], dim=-1),
        torch.stack([zero, 1.0 / fy, -cy / fy], dim=-1),
        torch.stack([zero, zero, one], dim=-1),
    ]
    return torch.stack(rows, dim=-2)


def lift_intrinsics(K: Tensor) -> Tensor:
    """``[..., 3, 3]`` intrinsics -> ``[..., 4, 4]`` block matrix ``[[K, 0], [0, 1]]``."""
    check_intrinsics(K)
    lifted = torch.zeros(*K.shape[:-2], 4, 4, dtype=K.dtype, device=K.device)
    lifted[..., :3, :3] = K
    lifted[..., 3, 3] = 1.0
    return lifted


def invert_se3(viewmats: Tensor) -> Tensor:
    """Analytic inverse of rigid transforms ``[..., 4, 4]``: ``[[R^T, -R^T t], [0, 1]]``."""
    check_viewmats(viewmats)
    rotation_t = viewmats[..., :3, :3].transpose(-1, -2)
    inverse = torch.zeros_like(viewmats)
    inverse[..., :3, :3] = rotation_t
    inverse[..., :3, 3] = -(rotation_t @ viewmats[..., :3, 3:4])[..., 0]
    inverse[..., 3, 3] = 1.0
    return inverse


def lifted_projection(K_norm: Tensor, viewmats: Tensor) -> Tensor:
    """P~ ``[..., 4, 4]`` = ``[[K_norm, 0], [0, 1]] @ viewmats`` (image-from-world, Eq. 3-4)."""
    check_viewmats(viewmats)
    return lift_intrinsics(K_norm) @ viewmats


def lifted_projection_inverse(K_norm: Tensor, viewmats: Tensor) -> Tensor:
    """P~^-1 ``[..., 4, 4]`` = ``viewmats^-1 @ [[K_norm^-1, 0], [0, 1]]``, analytically."""
    return invert_se3(viewmats) @ lift_intrinsics(invert_intrinsics(K_norm))


def random_se3(*shape: int, generator: torch.Generator | None = None,
               dtype: torch.dtype = torch.float32, translation_scale: float = 1.0) -> Tensor:
    """Random rigid transforms ``[*shape, 4, 4]``: Haar-uniform rotations, Gaussian translations.

    The rotation is the Q of a QR decomposition of a Gaussian matrix, sign-corrected so the
    distribution is uniform and the determinant is +1.
    """
    gaussian = torch.randn(*shape, 3, 3, generator=generator, dtype=dtype)
    q, r = torch.linalg.qr(gaussian)
    q = q * torch.sign(torch.diagonal(r, dim1=-2, dim2=-1))[..., None, :]
    q = q * torch.det(q)[..., None, None]
    mats = torch.zeros(*shape, 4, 4, dtype=dtype)
    mats[..., :3, :3] = q
    mats[..., :3, 3] = translation_scale * torch.randn(*shape, 3, generator=generator, dtype=dtype)
    mats[..., 3, 3] = 1.0
    return mats


def camera_centers(viewmats: Tensor) -> Tensor:
    """World-frame camera centres ``[..., 3]`` (``-R^T t``) of world-to-camera ``[..., 4, 4]``."""
    return invert_se3(viewmats)[..., :3, 3]


def normalize_poses(viewmats: Tensor, reference: int = 0) -> tuple[Tensor, Tensor]:
    """Re-express views ``[..., V, 4, 4]`` in the frame of view ``reference`` (an index into
    ``V``, negative from the end), at unit scale.

    The reference camera becomes the identity and the world is scaled so that the farthest
    camera centre lies at distance 1 from the reference centre (for two views: unit baseline).
    Returns the new viewmats ``[..., V, 4, 4]`` and the scale ``[...]`` applied to world
    lengths (multiply depths by it). If all centres coincide the scale is 1.
    """
    check_viewmats(viewmats)
    if viewmats.ndim < 3:
        raise ValueError(f"viewmats must be [..., V, 4, 4], got {viewmats.shape=}")
    views = viewmats.shape[-3]
    if not -views <= reference < views:
        raise ValueError(f"reference={reference} is out of range for {views} views")
    reference %= views  # a negative index counts from the end (a slice to -1 + 1 = 0 is empty)
    reference_to_world = invert_se3(viewmats[..., reference : reference + 1, :, :])
    relative = viewmats @ reference_to_world
    distances = camera_centers(relative).norm(dim=-1).amax(dim=-1)
    scale = torch.where(distances > 0, 1.0 / distances.clamp_min(1e-12), torch.ones_like(distances))
    relative = relative.clone()
    relative[..., :3, 3] = relative[..., :3, 3] * scale[..., None, None]
    return relative, scale


@dataclass(frozen=True)
class Cameras:
    """A batch of pinhole cameras.

    Attributes:
        K: intrinsics in pixels ``[..., 3, 3]``.
        viewmats: world-to-camera extrinsics ``[..., 4, 4]`` (same leading shape as ``K``).
        image_size: ``(height, width)`` in pixels.

    Example:
        >>> cams = Cameras(torch.eye(3).expand(2, 3, 3), torch.eye(4).expand(2, 4, 4), (32, 48))
        >>> cams.projection().shape
        torch.Size([2, 4, 4])
    """

    K: Tensor
    viewmats: Tensor
    image_size: tuple[int, int]

    def __post_init__(self) -> None:
        check_intrinsics(self.K)
        check_viewmats(self.viewmats)
        if self.K.shape[:-2] != self.viewmats.shape[:-2]:
            raise ValueError(
                f"K and viewmats need the same leading shape, got {self.K.shape=} "
                f"and {self.viewmats.shape=}"
            )
        object.__setattr__(self, "image_size", _check_image_size(self.image_size))

    @property
    def height(self) -> int:
        return self.image_size[0]

    @property
    def width(self) -> int:
        return self.image_size[1]

    def normalized_K(self) -> Tensor:
        """Normalised intrinsics ``[..., 3, 3]`` (see :func:`normalize_intrinsics`)."""
        return normalize_intrinsics(self.K, self.image_size)

    def projection(self) -> Tensor:
        """Lifted projection P~ ``[..., 4, 4]`` with normalised intrinsics."""
        return lifted_projection(self.normalized_K(), self.viewmats)

    def projection_inverse(self) -> Tensor:
        """Analytic P~^-1 ``[..., 4, 4]``."""
        return lifted_projection_inverse(self.normalized_K(), self.viewmats)
