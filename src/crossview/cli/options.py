"""Options that several commands share, declared once: ``crossview stereo`` and ``crossview
flow`` take the same ones, and ``--size HxW`` is read the same way everywhere."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from crossview.defaults import PRESET_NAMES
from crossview.errors import UserError

Model = Annotated[str, typer.Option("--model", help="Model name (see `crossview models`).")]
Weights = Annotated[Path | None, typer.Option(
    "--weights", help="Weights: published .pth checkpoint, bare state dict or .safetensors.")]
Download = Annotated[bool, typer.Option(
    "--download", help="Fetch the model's published weights into the cache if missing (the "
    "only network access; see `crossview weights`).")]
Device = Annotated[str, typer.Option("--device", help="cpu or cuda.")]
Precision = Annotated[str, typer.Option("--precision", help="fp32, bf16 or fp16.")]
Preset = Annotated[str | None, typer.Option(
    "--preset", help=f"Speed preset of the fused default: {', '.join(PRESET_NAMES)}, points "
    "on its measured speed/accuracy curve (docs/results/speed-presets; default: the model's "
    "own settings).", show_default=False)]
OutDir = Annotated[Path, typer.Option("-o", "--out", help="Output directory (created).")]
Lri = Annotated[bool | None, typer.Option(
    "--lri/--no-lri", help="Low-resolution initialisation: a half-resolution pass first "
    "(default: the model's; on for matchstereo-hybrid's network alone, off when it fuses).",
    show_default=False)]
Refine = Annotated[bool | None, typer.Option(
    "--refine/--no-refine", help="Polish the field photometrically (default: the model's; on "
    "for the hybrid models, but off for matchstereo-hybrid when it fuses; off for the "
    "published ones).", show_default=False)]
Fuse = Annotated[bool | None, typer.Option(
    "--fuse/--no-fuse", help="Fuse the network's disparities with OpenCV SGBM's: checked SGBM "
    "(on rank-transformed images, then on the colour images) where it answers, the "
    "network's consistent pixels in its long holes (default: the model's; on for "
    "matchstereo-hybrid, whose network then runs at 0.75 of the pair).",
    show_default=False)]
SelfFuse = Annotated[bool, typer.Option(
    "--self-fuse", help="Without SGBM: the network on the pair and on its mirror image, at the "
    "pair's size and enlarged 1.25 and 1.5 times, each pixel from the run whose matches look "
    "most alike around it (census cost), then the views fused with each other (left-right "
    "consistent pixels kept, the rest filled along the row, edge medians, out-of-view strip): "
    "every value the network's, better than --no-fuse and SGBM filled on real scenes, six "
    "network runs. Replaces the SGBM fusion.")]
FuseFlow = Annotated[bool | None, typer.Option(
    "--fuse/--no-fuse", help="Fuse the network's flow with OpenCV DIS's (on the grey frames, "
    "on their rank transforms, and started from the choice so far): per pixel, among the "
    "flows whose forward-backward error is at most 0.5 px (else 2 px), the one whose matches "
    "look most alike (census cost; the network's where none is) (default: the model's; on for "
    "matchflow-hybrid).",
    show_default=False)]
Adapt = Annotated[int, typer.Option(
    "--adapt", min=0, help="Test-time adaptation: first fit a copy of the model to each pair "
    "with N steps of a self-supervised loss (each step several times the cost of inference; "
    "10 was chosen on held-out real scenes). 0: off.")]
FixedSize = Annotated[str | None, typer.Option(
    "--size", help="Fixed-resolution inference at HxW, results resized back.")]
SaveRpos = Annotated[bool, typer.Option(
    "--save-rpos", help="Also save the self relative positions as a picture (paper Fig. 6).")]
MinConfidence = Annotated[float, typer.Option(
    "--min-confidence", help="Mark pixels whose confidence (0..1, see --save-confidence) is "
    "below this as invalid: out of the _noc mask, the depth and the point cloud.")]
SkipExisting = Annotated[bool, typer.Option(
    "--skip-existing", help="Skip pairs whose output files are all there (resume a run).")]


def parse_size(text: str) -> tuple[int, int]:
    """``"HxW"`` -> ``(H, W)``, both at least 16; a :class:`UserError` otherwise."""
    try:
        h, w = (int(part) for part in text.lower().split("x"))
    except ValueError:
        raise UserError(f"size must look like HxW (e.g. 256x512), got {text!r}") from None
    if h < 16 or w < 16:
        raise UserError(f"size must be at least 16x16, got {text!r}")
    return h, w
