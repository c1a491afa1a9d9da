"""``crossview rectify LEFT RIGHT --calib FILE``: an unrectified stereo pair rectified with
OpenCV (:func:`crossview.api.rectify_stereo`), written with the rectified calibration that
``crossview stereo --calib`` reads for depth."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from crossview.cli import options
from crossview.console import stdout
from crossview.lazy import lazy_import
from crossview.output import check_output_files

api = lazy_import("crossview.api")


def rectify_command(
    left: Annotated[Path, typer.Argument(help="Left image (unrectified).")],
    right: Annotated[Path, typer.Argument(help="Right image (unrectified).")],
    calib: Annotated[Path, typer.Option(
        "--calib", help="Rig calibration: YAML/JSON with K1, D1, K2, D2, R, T (metres), "
        "image_size [W, H] (OpenCV's FileStorage files too), or KITTI calib_cam_to_cam.txt.")],
    out_dir: options.OutDir = Path("rectified"),
    alpha: Annotated[float, typer.Option(
        "--alpha", help="0: keep only pixels seen in both images; 1: keep every pixel.")] = 0.0,
) -> None:
    """Rectify LEFT/RIGHT; writes left.png, right.png and calib.txt (focal, baseline, doffs)."""
    check_output_files([out_dir / name for name in api.RECTIFIED_FILES])
    pair = api.rectify_stereo(left, right, calib, alpha=alpha)
    paths = api.write_rectified(pair, out_dir)
    cal = pair.calibration
    stdout.print(f"wrote {', '.join(paths)} (focal {cal.focal:.6g} px, baseline "
                 f"{cal.baseline:.6g} m, doffs {cal.doffs:.3g} px)", markup=False,
                 soft_wrap=True)
    stdout.print(f"depth: crossview stereo {paths[0]} {paths[1]} --calib {paths[2]}",
                 markup=False, soft_wrap=True)
