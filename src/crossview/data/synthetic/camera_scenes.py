"""Posed multi-view scenes with per-view zoom for the camera-encoding study (the ``novel-view``
training recipe, :mod:`crossview.train.recipes.novel_view`).

Scenes and cameras come from the synthetic engine (:func:`crossview.data.synthetic.multiview.
multiview_scene`); this module only chooses the focal lengths (per-view zoom, log-uniform) and
can render the same scene and poses a second time with out-of-range zooms.

The renderer puts pixel centres at integer coordinates; crossview's cameras and raymaps put
them at ``+0.5``. Intrinsics returned here are converted (principal point + 0.5).
"""

from __future__ import annotations

import numpy as np
import torch

from crossview.data.synthetic.multiview import MultiViewConfig, multiview_scene
from crossview.data.synthetic.scene import Camera, Layer, render

BASE_FOCAL = 0.6  # focal length at zoom 1, as a multiple of the image width
_TO_CROSSVIEW = np.array([[1.0, 0.0, 0.5], [0.0, 1.0, 0.5], [0.0, 0.0, 1.0]])


def _zoomed(camera: Camera, focal: float) -> Camera:
    """``camera`` with focal length ``focal`` pixels (pixel aspect and principal point kept)."""
    K = camera.K.copy()
    K[1, 1] *= focal / K[0, 0]
    K[0, 0] = focal
    return Camera(K, camera.world_to_camera)


def _render(layers: list[Layer], cameras: list[Camera], size: tuple[int, int]
            ) -> tuple[np.ndarray, np.ndarray]:
    images = np.stack([render(layers, c, size).image for c in cameras]).transpose(0, 3, 1, 2)
    return images, np.stack([_TO_CROSSVIEW @ c.K for c in cameras])


def make_scenes(count: int, views: int, zoom: tuple[float, float], seed: int,
                size: tuple[int, int] = (32, 32), split: str = "train",
                test_zoom: tuple[float, float] | None = None) -> dict[str, torch.Tensor]:
    """Render ``count`` scenes of ``views`` views, each view with a zoom drawn from ``zoom``.

    Returns ``images [N, V, 3, H, W]`` (float32, 0..255), ``K [N, V, 3, 3]`` (pixels, centres at
    +0.5) and ``viewmats [N, V, 4, 4]`` (world-to-camera). With ``test_zoom`` the same scenes
    and poses are rendered again with zooms from that range: ``images_zoomed``, ``K_zoomed``.
    """
    width = size[1]
    config = MultiViewConfig(size=size, views=views,
                             focal=(BASE_FOCAL * zoom[0], BASE_FOCAL * zoom[1]))
    rng = np.random.default_rng(seed)
    out: dict[str, list[np.ndarray]] = {"images": [], "K": [], "viewmats": []}
    for _ in range(count):
        layers, cameras = multiview_scene(rng, config, split)
        # log-uniform zoom per view (the engine draws focal lengths uniformly)
        factors = np.exp(rng.uniform(np.log(zoom[0]), np.log(zoom[1]), views))
        cameras = [_zoomed(c, BASE_FOCAL * width * f) for c, f in zip(cameras, factors,
                                                                      strict=True)]
        images, Ks = _render(layers, cameras, size)
        out["images"].append(images)
        out["K"].append(Ks)
        out["viewmats"].append(np.stack([c.world_to_camera for c in cameras]))
        if test_zoom is not None:
            factors = np.exp(rng.uniform(np.log(test_zoom[0]), np.log(test_zoom[1]), views))
            zoomed = [_zoomed(c, BASE_FOCAL * width * f) for c, f in zip(cameras, factors,
                                                                         strict=True)]
            images, Ks = _render(layers, zoomed, size)
            out.setdefault("images_zoomed", []).append(images)
            out.setdefault("K_zoomed", []).append(Ks)
    return {key: torch.from_numpy(np.stack(value)).float() for key, value in out.items()}
