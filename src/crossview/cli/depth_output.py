"""``crossview stereo`` with calibration: metric depth and a coloured point cloud per pair.

The calibration is a file (``--calib``: Middlebury/ETH3D ``calib.txt`` or KITTI
``calib_cam_to_cam.txt``, :mod:`crossview.data.calibration`) or numbers (``--focal`` px,
``--baseline`` metres, optional ``--doffs``, ``--cx``, ``--cy`` px), never both. A file
calibrated at another resolution is rescaled to a scaled copy of its images, with a ``note:``
(:meth:`crossview.data.calibration.StereoCalibration.for_size`). With it,
each pair NAME also gets ``NAME_depth.{npy,pfm,png}`` (metres, float32; the 16-bit PNG holds
millimetres, so depths beyond 65.535 m read as missing), ``NAME_depth_color.png`` (the kept
depths coloured, near red and far blue, holes black, with a colour bar in metres:
:func:`crossview.viz.depth_to_colour`) and ``NAME_depth.ply`` (binary PLY,
the left image's colours, camera frame in metres: x right, y down, z forward).

A pixel keeps its depth (and becomes a point) only when it passes every filter: left-right
consistent (the ``_noc`` mask), a finite depth (``disparity + doffs > 0``), no farther than
``--max-depth``, and not at a depth edge (:func:`crossview.geometry.depth.depth_edge_mask`
with ``--edge-ratio``, where flying pixels hang between surfaces). The others have no depth:
NaN in the ``.npy`` and ``.pfm`` files, 0 in the 16-bit PNG (which cannot hold NaN; 0 mm is
never a depth), and no point in the point cloud.

A run whose kept depths have a median beyond :data:`FAR_DEPTH` gets one ``warning:`` line (the
first such pair; the files are written all the same, a scene can be that far): depth is in
metres, and the usual cause is a baseline in millimetres, as Middlebury's ``calib.txt`` writes
it, given to ``--baseline``.

A calibration whose kept depths or points do not fit float32 (``--focal 1e30 --baseline 1e30``,
``--cx 1e300``) fails the pair with one line naming those inputs, and writes nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from crossview.console import stderr
from crossview.errors import UserError
from crossview.lazy import lazy_import
from crossview.output import check_finite

if TYPE_CHECKING:
    import torch

    from crossview.api import StereoCalibration, StereoResult

np = lazy_import("numpy")
api = lazy_import("crossview.api")
viz = lazy_import("crossview.viz")  # matplotlib (~0.13 s): loaded when a pair is written

DEPTH_FORMATS = ("npy", "pfm", "png16")
EDGE_RATIO = 0.05  # relative depth jump between 4-neighbours that marks a depth edge
MILLIMETRES = 1000.0
# metres: a median depth this far is beyond what a ground-level stereo rig resolves (a 0.5 m
# baseline at 1000 px focal length sees it at 0.5 px disparity), but what a baseline in
# millimetres read as metres gives for a scene a few metres away
FAR_DEPTH = 1000.0

Calib = Annotated[Path | None, typer.Option(
    "--calib", help="Calibration file: Middlebury/ETH3D calib.txt or KITTI "
    "calib_cam_to_cam.txt; writes depth and a point cloud.")]
Focal = Annotated[float | None, typer.Option(
    "--focal", help="Focal length in px (with --baseline, instead of --calib).")]
Baseline = Annotated[float | None, typer.Option(
    "--baseline", help="Baseline in metres (with --focal; Middlebury's calib.txt writes "
    "millimetres: divide by 1000, or pass the file as --calib).")]
Doffs = Annotated[float | None, typer.Option(
    "--doffs", help="Right minus left principal point x in px (default 0; with --focal).")]
Cx = Annotated[float | None, typer.Option(
    "--cx", help="Principal point x in px (default: image centre; with --focal).")]
Cy = Annotated[float | None, typer.Option(
    "--cy", help="Principal point y in px (default: image centre; with --focal).")]
DepthFormat = Annotated[str | None, typer.Option(
    "--depth-format", help="Depth file: npy (default), pfm (metres) or png16 (millimetres).")]
MaxDepth = Annotated[float | None, typer.Option(
    "--max-depth", help="Drop depths beyond this many metres.")]
EdgeRatio = Annotated[float | None, typer.Option(
    "--edge-ratio", help=f"Drop pixels whose depth jumps by more than this fraction to a "
    f"neighbour (flying pixels; default {EDGE_RATIO}, 0: keep them).")]


@dataclass
class DepthOutput:
    """The depth files of a pair: which they are, and how to write them. ``calib_file``: where
    the calibration was read (``None``: given by options)."""

    calibration: StereoCalibration
    calib_file: Path | None
    fmt: str = "npy"
    max_depth: float | None = None
    edge_ratio: float = EDGE_RATIO
    warned_far: bool = field(default=False, init=False)  # once per run, not once per pair
    noted_sizes: set[tuple[int, int]] = field(default_factory=set, init=False)

    def check(self, images: list[tuple[np.ndarray, np.ndarray]]) -> None:
        """Refuse images that are not a scaled copy of the calibrated ones (before the model
        runs); say once per size when the calibration is rescaled to the images."""
        for first, _ in images:
            self.calibration_for(*first.shape[:2])

    def calibration_for(self, height: int, width: int) -> StereoCalibration:
        """The calibration rescaled to ``height x width`` images
        (:meth:`StereoCalibration.for_size`), with a ``note:`` line the first time a size is
        rescaled."""
        source = str(self.calib_file or "the calibration")
        scaled = self.calibration.for_size(height, width, source)
        if scaled is not self.calibration and (height, width) not in self.noted_sizes:
            self.noted_sizes.add((height, width))
            h, w = self.calibration.image_size
            stderr.print(f"note: {source} is for {w}x{h} px images; rescaled to the {width}x"
                         f"{height} images (focal {scaled.focal:.6g} px, doffs "
                         f"{scaled.doffs:.4g} px: focal, cx and doffs scale with the width, cy "
                         "with the height)", markup=False, soft_wrap=True)
        return scaled

    def file_names(self, name: str) -> list[str]:
        suffix = ".png" if self.fmt == "png16" else f".{self.fmt}"
        return [f"{name}_depth{suffix}", f"{name}_depth_color.png", f"{name}_depth.ply"]

    def writers(self, images: tuple[np.ndarray, np.ndarray], result: StereoResult
                ) -> list[Callable[[Path], None]]:
        """Writers of the depth map (NaN where no depth; 0 in a 16-bit PNG), its picture and
        the point cloud (the kept pixels) of batch row 0, in :meth:`file_names` order; a
        :class:`UserError` naming the calibration's numbers if the kept depths or points do not
        fit float32."""
        cal = self.calibration_for(*result.disparity.shape[-2:])
        metric = api.metric_depth(result.disparity[0].cpu(), result.valid[0].cpu(), cal,
                                  max_depth=self.max_depth, edge_ratio=self.edge_ratio)
        depth, keep = metric.depth, metric.keep
        check_finite(depth.numpy(), f"{self._inputs('focal', 'baseline', 'doffs')} give depths "
                     "beyond the float32 range", keep.numpy())
        self._warn_if_far(depth[keep])
        points = metric.points.numpy()
        for axis, centre in enumerate(("cx", "cy")):  # x = (u - cx) depth / focal, y alike
            check_finite(points[:, axis], f"{self._inputs(centre, 'baseline')} put points "
                         "beyond the float32 range")
        colours = images[0][keep.numpy()]
        picture = viz.depth_to_colour(depth.numpy(), keep.numpy())
        return [self._depth_writer(depth.numpy().astype(np.float32)),
                lambda path: api.write_image(path, picture),
                lambda path: api.write_ply(path, points, colours)]

    def _warn_if_far(self, kept: torch.Tensor) -> None:
        """One ``warning:`` line per run when the median of the kept depths ``[N]`` (metres)
        lies beyond :data:`FAR_DEPTH`, naming the likely cause and the fix."""
        if self.warned_far or not len(kept) or (median := float(kept.median())) <= FAR_DEPTH:
            return
        self.warned_far = True
        baseline = self.calibration.baseline
        cause = (f"is {self.calib_file} the calibration of these images?"
                 if self.calib_file else
                 f"--baseline {baseline:g} is read as metres; if it is in millimetres (as "
                 f"Middlebury's calib.txt writes it), pass --baseline {baseline / MILLIMETRES:g}")
        stderr.print(f"warning: median depth {median / 1000:.3g} km (depth is in metres): "
                     f"{cause}", markup=False, soft_wrap=True)

    def _inputs(self, *names: str) -> str:
        """The calibration's numbers ``names`` (those given; doffs when not 0) as the user gave
        them: ``--focal 1e+30 and --baseline 1e+30``, ``calib.txt (focal 1e+300, ...)``."""
        values = {name: getattr(self.calibration, name) for name in names}
        given = {name: value for name, value in values.items()
                 if value is not None and (name != "doffs" or value != 0)}
        if self.calib_file is None:
            return " and ".join(f"--{name} {value:g}" for name, value in given.items())
        return f"{self.calib_file} ({', '.join(f'{n} {v:g}' for n, v in given.items())})"

    def _depth_writer(self, depth: np.ndarray) -> Callable[[Path], None]:
        if self.fmt == "npy":
            return lambda path: api.write_npy(path, depth)
        if self.fmt == "pfm":
            return lambda path: api.write_pfm(path, depth)
        millimetres = np.round(depth.astype(np.float64) * MILLIMETRES)
        # 0: no depth (NaN, which a PNG cannot hold) or one beyond the 16 bits
        png = np.where(millimetres <= 65535, millimetres, 0).astype(np.uint16)
        return lambda path: api.write_png16(path, png)


def depth_output(calib: Path | None, focal: float | None, baseline: float | None,
                 doffs: float | None, cx: float | None, cy: float | None,
                 fmt: str | None, max_depth: float | None,
                 edge_ratio: float | None) -> DepthOutput | None:
    """The depth output the options ask for (``None``: none); a :class:`UserError` for a
    contradiction, a missing calibration or a bad value (checked before any work)."""
    numbers = {"--focal": focal, "--baseline": baseline, "--doffs": doffs, "--cx": cx,
               "--cy": cy}
    given = [name for name, value in numbers.items() if value is not None]
    depth_options = [name for name, value in (("--depth-format", fmt), ("--max-depth", max_depth),
                                              ("--edge-ratio", edge_ratio)) if value is not None]
    if calib is not None and given:
        raise UserError(f"give the calibration either as --calib or as --focal/--baseline, "
                        f"not both (got --calib and {', '.join(given)})")
    if calib is None and not given:
        if depth_options:
            raise UserError(f"{depth_options[0]} needs a calibration: give --calib FILE or "
                            "--focal F --baseline B")
        return None
    if fmt is not None and fmt not in DEPTH_FORMATS:
        raise UserError(f"--depth-format {fmt!r} is not one of {', '.join(DEPTH_FORMATS)}")
    if max_depth is not None and not max_depth > 0:
        raise UserError(f"--max-depth must be positive (metres), got {max_depth:g}")
    if edge_ratio is not None and not edge_ratio >= 0:
        raise UserError(f"--edge-ratio must be 0 (off) or positive, got {edge_ratio:g}")
    if calib is not None:
        calibration = api.read_stereo_calibration(calib)
    else:
        missing = [name for name in ("--focal", "--baseline") if numbers[name] is None]
        if missing:
            raise UserError(f"{' and '.join(missing)} missing: a calibration by numbers needs "
                            "--focal (px) and --baseline (metres)")
        calibration = api.StereoCalibration(focal, baseline, doffs or 0.0, cx, cy)
    return DepthOutput(calibration, calib, fmt or "npy", max_depth,
                       EDGE_RATIO if edge_ratio is None else edge_ratio)
