"""``crossview rectify LEFT RIGHT [--calib FILE]``: an unrectified stereo pair rectified with
OpenCV, from its rig calibration (:func:`crossview.api.rectify_stereo`; written with the
rectified calibration that ``crossview stereo --calib`` reads for depth) or, without one, from
the photographs' own feature matches (:func:`crossview.api.rectify_photographs`; written with
the homographies that made them)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from crossview.cli import options
from crossview.console import stdout
from crossview.errors import UserError
from crossview.lazy import lazy_import
from crossview.output import check_output_directory, check_output_files

api = lazy_import("crossview.api")


def rectify_command(
    left: Annotated[Path, typer.Argument(help="Left image (unrectified).")],
    right: Annotated[Path, typer.Argument(help="Right image (unrectified).")],
    calib: Annotated[Path | None, typer.Option(
        "--calib", help="Rig calibration: YAML/JSON with K1, D1, K2, D2, R, T (metres), "
        "image_size [W, H] (OpenCV's FileStorage files too), or KITTI calib_cam_to_cam.txt. "
        "Without it: rectified from the photographs' own feature matches (no metric depth).")]
    = None,
    out_dir: options.OutDir = Path("rectified"),
    alpha: Annotated[float | None, typer.Option(
        "--alpha", help="With --calib: 0 keeps only pixels seen in both images (default); 1 "
                        "keeps every pixel.")] = None,
) -> None:
    """Rectify LEFT/RIGHT, from a rig calibration (--calib) or from the photographs' own
    matches; writes left.png, right.png and calib.txt or rectification.json."""
    check_output_directory(out_dir, "--out")
    if calib is None:
        if alpha is not None:
            raise UserError("--alpha needs --calib: rectification from the photographs' own "
                            "matches keeps the images' size")
        check_output_files([out_dir / name for name in api.UNCALIBRATED_FILES])
        photographs = api.rectify_photographs(left, right)
        paths = api.write_uncalibrated(photographs, out_dir)
        low, high = photographs.disparity_range
        done = ("kept as they are: their rows already agree" if photographs.focal is None else
                f"focal about {photographs.focal:.0f} px; rows agree")
        stdout.print(f"wrote {', '.join(paths)} ({photographs.matches} matches, {done} to "
                     f"{photographs.row_error:.2f} px, disparities about {low:.0f}-{high:.0f} px)",
                     markup=False, soft_wrap=True)
        stdout.print(f"disparity: crossview stereo {paths[0]} {paths[1]}", markup=False,
                     soft_wrap=True)
        return
    check_output_files([out_dir / name for name in api.RECTIFIED_FILES])
    pair = api.rectify_stereo(left, right, calib, alpha=0.0 if alpha is None else alpha)
    paths = api.write_rectified(pair, out_dir)
    cal = pair.calibration
    stdout.print(f"wrote {', '.join(paths)} (focal {cal.focal:.6g} px, baseline "
                 f"{cal.baseline:.6g} m, doffs {cal.doffs:.3g} px)", markup=False,
                 soft_wrap=True)
    stdout.print(f"depth: crossview stereo {paths[0]} {paths[1]} --calib {paths[2]}",
                 markup=False, soft_wrap=True)
