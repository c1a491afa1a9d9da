"""The picture of docs/depth-and-confidence.md's rectification without a calibration: two
photographs taken by hand (``mvtb-data``'s ``walls-l.png`` / ``walls-r.png``, a building
corner, 3264 x 2448, MIT-licensed package) before and after
:func:`crossview.rectify_photographs`, with the same rows drawn across both images.

Run: ``python docs/results/pictures/rectification_picture.py WALLS_L WALLS_R
docs/images/rectify-walls.png``
(the two files inside the unpacked ``mvtb-data`` wheel, ``mvtbdata/images/``).
"""

from __future__ import annotations

import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

import crossview
from crossview.data.io import read_image

ROWS = 7  # rows drawn across each pair


def main(left_path: str, right_path: str, out: str) -> None:
    left, right = read_image(left_path), read_image(right_path)
    pair = crossview.rectify_photographs(left, right)
    figure, axes = plt.subplots(2, 2, figsize=(10, 7.6))
    titles = (("photograph 1 (left)", "photograph 2 (right)"),
              (f"rectified: {pair.matches} matches, rows agree to {pair.row_error:.2f} px",
               f"rectified (focal fitted: {pair.focal:.0f} px)"))
    for row, images in enumerate(((left, right), (pair.left, pair.right))):
        for column, image in enumerate(images):
            axis = axes[row, column]
            axis.imshow(image)
            step = image.shape[0] // (ROWS + 1)
            for y in range(step, image.shape[0], step):
                axis.axhline(y, color="cyan", linewidth=0.8)
            axis.set_title(titles[row][column], fontsize=10)
            axis.axis("off")
    figure.tight_layout()
    figure.savefig(out, dpi=64)
    print(f"wrote {out}: {pair.matches} matches, row error {pair.row_error:.2f} px, focal "
          f"{pair.focal:.0f} px, disparities {pair.disparity_range[0]:.0f}-"
          f"{pair.disparity_range[1]:.0f} px")


if __name__ == "__main__":
    main(*sys.argv[1:4])
