"""The README's point-cloud picture: the bundled stereo model on a real pair with known
calibration, turned into metric depth and a coloured point cloud as ``crossview stereo
--calib`` does (left-right mask, depth-edge filter), drawn from two viewpoints.

The pair is scikit-image's copy of the Middlebury 2014 *Motorcycle* scene (741 x 500), whose
calibration scikit-image documents for that size: focal length 994.978 px, principal point
(311.193, 254.877) px, principal point difference 31.086 px, baseline 193.001 mm.

    OMP_NUM_THREADS=1 python docs/results/pictures/point_cloud_picture.py [OUT.png]

(default OUT: ``docs/images/point-cloud-motorcycle.png``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import torch
from skimage import data as skdata

import crossview
from crossview.cli.depth_output import EDGE_RATIO
from crossview.data.calibration import StereoCalibration

CALIBRATION = StereoCalibration(focal=994.978, baseline=0.193001, doffs=31.086, cx=311.193,
                                cy=254.877, image_size=(500, 741))
TURN_DEGREES = 20.0  # the novel view: turned about the vertical axis through the scene centre


def render(points: np.ndarray, colours: np.ndarray, project, size: tuple[int, int]
           ) -> np.ndarray:
    """Splat points ``[N, 3]`` coloured ``[N, 3]`` (uint8) into an ``H x W`` white picture:
    ``project(points) -> (u, v, distance)``, nearest point wins, 2 x 2 px per point."""
    h, w = size
    u, v, distance = project(points)
    order = np.argsort(-distance)  # far first: nearer points overwrite them
    picture = np.full((h, w, 3), 255, np.uint8)
    for du in (0, 1):
        for dv in (0, 1):
            x, y = np.round(u[order]).astype(int) + du, np.round(v[order]).astype(int) + dv
            inside = (x >= 0) & (x < w) & (y >= 0) & (y < h)
            picture[y[inside], x[inside]] = colours[order][inside]
    return picture


def main(out: Path) -> None:
    torch.set_num_threads(1)
    left, right, _ = skdata.stereo_motorcycle()
    result = crossview.estimate_disparity(left, right)
    metric = crossview.api.metric_depth(result.disparity[0], result.valid[0], CALIBRATION,
                                        max_depth=None, edge_ratio=EDGE_RATIO)
    cal = CALIBRATION
    points, keep, depth = metric.points.numpy(), metric.keep, metric.depth
    colours = left[keep.numpy()]
    h, w = left.shape[:2]

    centre = np.median(points, axis=0)
    angle = np.radians(TURN_DEGREES)
    turn = np.array([[np.cos(angle), 0, np.sin(angle)], [0, 1, 0],
                     [-np.sin(angle), 0, np.cos(angle)]])

    def novel_view(p: np.ndarray):  # the same camera, moved around the scene centre
        q = (p - centre) @ turn.T + centre
        u, v = cal.focal * q[:, 0] / q[:, 2] + cal.cx, cal.focal * q[:, 1] / q[:, 2] + cal.cy
        return u, v, q[:, 2]

    x_range, z_range = np.percentile(points[:, 0], [0.5, 99.5]), np.percentile(points[:, 2],
                                                                               [0.5, 99.5])
    scale = min(w / np.ptp(x_range), h / np.ptp(z_range)) * 0.95

    def from_above(p: np.ndarray):  # orthographic, x to the right, depth upwards
        return ((p[:, 0] - x_range[0]) * scale, h - 1 - (p[:, 2] - z_range[0]) * scale,
                -p[:, 1])

    panels = [(left, "left image (Middlebury 2014 Motorcycle, 741 x 500)"),
              (render(points, colours, novel_view, (h, w)),
               f"point cloud seen from {TURN_DEGREES:.0f} degrees to the right"),
              (render(points, colours, from_above, (h, w)),
               f"from above (orthographic; depth {z_range[0]:.1f}-{z_range[1]:.1f} m upwards)")]
    figure, axes = plt.subplots(1, 3, figsize=(15, 3.9), dpi=100)
    for ax, (picture, title) in zip(axes, panels, strict=True):
        ax.imshow(picture)
        ax.set_title(title, fontsize=9)
        ax.axis("off")
    figure.suptitle(f"crossview stereo --calib (bundled matchstereo-hybrid, published "
                    f"calibration): {keep.sum().item():,} of {keep.numel():,} px kept "
                    "(left-right consistent, no depth edge)", fontsize=10)
    figure.tight_layout()
    figure.savefig(out)
    print(f"wrote {out}: {keep.sum().item()} points, depth {depth[keep].min():.3f}.."
          f"{depth[keep].max():.3f} m")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("docs/images/point-cloud-motorcycle.png"))
