"""Pictures of street layouts (``street_probability=1``) and their rendering cost.

    python docs/results/pictures/street_pictures.py docs/images/synthetic-street.png [--count 20]

The picture: four rows, each a stereo pair's left image and disparity (turbo, 0 to the
pair's largest value) and a flow pair's frame 0 and forward flow (Middlebury colour wheel), at
256x512, training seed 0, samples 0-3. The cost: CPU seconds per sample of ``count``
default scenes and ``count`` street scenes (samples 0..count-1 of seed 1, interleaved, one
torch thread), printed with their ratio.
"""

from __future__ import annotations

import argparse
import time

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import torch

from crossview.data.synthetic.dataset import sample_generator
from crossview.data.synthetic.flow import FlowConfig, random_flow_pair
from crossview.data.synthetic.stereo import StereoConfig, random_stereo_pair
from crossview.viz import disparity_to_colour, flow_to_colour

SIZE = (256, 512)


def picture(path: str) -> None:
    stereo = StereoConfig(size=SIZE, street_probability=1.0)
    flow = FlowConfig(size=SIZE, street_probability=1.0)
    fig, axes = plt.subplots(4, 4, figsize=(16, 8.4))
    titles = ("left image", "disparity", "frame 0", "forward flow")
    for row in range(4):
        s = random_stereo_pair(sample_generator("stereo", "train", 0, row), stereo)
        f = random_flow_pair(sample_generator("flow", "train", 0, row), flow)
        tiles = (s["image0"].astype(np.uint8),
                 disparity_to_colour(s["disparity"], vmin=0.0, colour_bar=False),
                 f["image0"].astype(np.uint8), flow_to_colour(f["flow"]))
        for col, tile in enumerate(tiles):
            axes[row, col].imshow(tile)
            axes[row, col].set_axis_off()
            if row == 0:
                axes[row, col].set_title(titles[col], fontsize=9)
        axes[row, 1].text(6, 24, f"max {s['disparity'].max():.0f} px", color="white", fontsize=7)
        magnitude = np.linalg.norm(f["flow"], axis=-1).max()
        axes[row, 3].text(6, 24, f"max {magnitude:.0f} px", color="black", fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=80)


def cost(count: int) -> None:
    torch.set_num_threads(1)
    for name, make, config in (("stereo", random_stereo_pair, StereoConfig(size=SIZE)),
                               ("flow", random_flow_pair, FlowConfig(size=SIZE))):
        street = type(config)(size=SIZE, street_probability=1.0)
        spent = {"default": 0.0, "street": 0.0}
        for index in range(count):
            for kind, cfg in (("default", config), ("street", street)):
                start = time.process_time()
                make(sample_generator(name, "train", 1, index), cfg)
                spent[kind] += time.process_time() - start
        default, streets = spent["default"] / count, spent["street"] / count
        print(f"{name} {SIZE[0]}x{SIZE[1]}: default {default * 1000:.0f} ms, street "
              f"{streets * 1000:.0f} ms per sample (CPU), ratio {streets / default:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--count", type=int, default=20)
    args = parser.parse_args()
    picture(args.out)
    cost(args.count)


if __name__ == "__main__":
    main()
