"""The parameters every layered synthetic scene shares (stereo, flow, multi-view add theirs)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class SceneConfig:
    """Common scene parameters.

    Attributes:
        size: ``(H, W)`` of the images.
        objects: inclusive range of the number of objects in front of the background.
        focal: focal length range as a multiple of ``W``.
        max_tilt: largest plane slant in degrees.
        photo_probability: chance that a texture is a photograph rather than procedural.
        texel_scale: range of texture texels per plane unit (about a pixel), log-uniform; below
            1 textures are magnified (smooth), above 1 minified (detailed).
        street_probability: chance that a stereo or flow scene is a street layout
            (:mod:`~crossview.data.synthetic.street`) instead of objects in front of a plane;
            at 0 no random number is drawn for it, so samples stay those of earlier versions.
    """

    size: tuple[int, int] = (256, 512)
    objects: tuple[int, int] = (4, 10)
    focal: tuple[float, float] = (0.6, 1.4)
    max_tilt: float = 50.0
    photo_probability: float = 0.5
    texel_scale: tuple[float, float] = (0.5, 2.0)
    street_probability: float = 0.0

    def __post_init__(self) -> None:
        if len(self.size) != 2 or min(self.size) < 2:
            raise ValueError(f"size must be (H, W) of at least 2x2, got {self.size=}")
        if not 0 <= self.objects[0] <= self.objects[1]:
            raise ValueError(f"objects must be a range 0 <= lo <= hi, got {self.objects=}")
        if not 0 < self.focal[0] <= self.focal[1]:
            raise ValueError(f"focal must be a positive range, got {self.focal=}")
        if not 0 <= self.photo_probability <= 1:
            raise ValueError(f"photo_probability must be in [0, 1], got {self.photo_probability=}")
        if not 0 < self.texel_scale[0] <= self.texel_scale[1]:
            raise ValueError(f"texel_scale must be a positive range, got {self.texel_scale=}")
        if not 0 <= self.street_probability <= 1:
            raise ValueError(
                f"street_probability must be in [0, 1], got {self.street_probability=}")

    def street(self, rng: np.random.Generator) -> bool:
        """Whether this scene is a street layout (draws from ``rng`` only when the
        probability is positive, so a probability of 0 leaves the sample stream unchanged)."""
        return self.street_probability > 0 and bool(rng.random() < self.street_probability)
