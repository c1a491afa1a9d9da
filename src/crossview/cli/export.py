"""``crossview export onnx``: a model as an ONNX file that computes what ``crossview stereo`` /
``flow`` give for its size, checked against them with onnxruntime
(:mod:`crossview.export.onnx`); a stereo model that fuses by default as the fused run's
network, which ``python -m crossview.runtime`` completes (:mod:`crossview.runtime`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from crossview.cli import options
from crossview.cli.help_text import App
from crossview.cli.options import parse_size
from crossview.console import stderr, stdout
from crossview.errors import UserError
from crossview.lazy import lazy_import
from crossview.output import check_output_file

api = lazy_import("crossview.api")
onnx = lazy_import("crossview.export.onnx")
steps = lazy_import("crossview.long_step")  # its spinner (rich.progress) loads when used

app = App(help="Export models to other runtimes.", no_args_is_help=True)


@app.command("onnx")
def onnx_command(
    model: Annotated[str, typer.Option(
        "--model", help="MatchStereo / MatchFlow / TransforMatcher model name.")],
    size: Annotated[str, typer.Option(
        "--size", help="HxW the file takes (MatchStereo / MatchFlow: any size the model runs, "
                       "padded inside; with --bare multiples of 32, other sizes run too unless "
                       "--static), TransforMatcher: 240x240.")],
    out: Annotated[Path, typer.Option("-o", "--out", help="The .onnx file to write.")],
    weights: Annotated[Path | None, typer.Option(
        "--weights", help="Weights (default: the model's bundled ones, else its published ones "
        "from the cache).")] = None,
    lri: options.Lri = None,
    refine: options.Refine = None,
    fuse: Annotated[bool | None, typer.Option(
        "--fuse/--no-fuse", help="A stereo model that fuses with SGBM by default "
        "(matchstereo-hybrid): the fused run's network, at the pair's working size, with what "
        "`python -m crossview.runtime FILE LEFT RIGHT` needs to give `crossview stereo`'s "
        "answer (default); --no-fuse: the network alone, as `crossview stereo --no-fuse`.",
        show_default=False)] = None,
    preset: options.Preset = None,
    self_fuse: Annotated[bool, typer.Option(
        "--self-fuse", help="A stereo model: the network alone with the runs `crossview stereo "
        "--self-fuse` fuses (the pair and its mirror image at each scale), which `python -m "
        "crossview.runtime FILE LEFT RIGHT --self-fuse` fuses with numpy.")] = False,
    bare: Annotated[bool, typer.Option(
        "--bare", help="The network alone: no padding, no low-resolution initialisation, no "
                       "refinement; dynamic height and width (multiples of 32).")] = False,
    static: Annotated[bool, typer.Option(
        "--static", help="With --bare: fix height and width at --size (smaller graph).")] = False,
    check: Annotated[bool, typer.Option(
        help="Run the file with onnxruntime and compare with crossview's own result.")] = True,
) -> None:
    """Export MODEL to ONNX: inputs image0, image1 [1, 3, H, W] float 0..255; outputs field,
    disparity or flow, valid (MatchStereo / MatchFlow: what `crossview stereo` / `flow` give,
    refinement and all; matchstereo-hybrid: the network of its fused run, which `python -m
    crossview.runtime FILE LEFT RIGHT -o DISPARITY.npy` completes) or coords
    (TransforMatcher)."""
    if static and not bare:
        raise UserError("--static fixes the size of a --bare export; without --bare the file "
                        "already takes only --size (add --bare, or drop --static)")
    check_output_file(out, "-o")
    shape = parse_size(size)
    for module in ("onnx", "onnxscript", *(["onnxruntime"] if check else [])):
        onnx.require(module)
    network = api.load_model(model, weights)
    # a model, option or size that cannot be exported fails before the trace
    module = onnx.export_module(network, lri=lri, refine=refine, bare=bare, fuse=fuse,
                                size=shape, preset=preset, self_fuse=self_fuse)
    onnx.check_size(network, shape, bare=bare)
    api.check_memory(network, *shape, task=network.task, lri=getattr(module, "lri", False),
                     refine=getattr(module, "refine", False),
                     advice=api.MemoryAdvice("give a smaller --size", "--no-refine"))
    names = onnx.export_onnx(network, out, shape, lri=lri, refine=refine, bare=bare,
                             dynamic=bare and not static, fuse=fuse, preset=preset,
                             self_fuse=self_fuse)
    stdout.print(f"wrote {out} (inputs image0, image1; outputs {', '.join(names)})",
                 markup=False, soft_wrap=True)
    meta = onnx.file_metadata(module, shape, bare and not static)
    fused = getattr(module, "fused", None)
    if fused is not None:
        stdout.print(f"the file holds the network of `{fused.same_as}` at "
                     f"{meta['crossview.network_size']} for pairs of {meta['crossview.size']}; "
                     f"`python -m crossview.runtime {out} LEFT RIGHT -o DISPARITY.npy` gives "
                     "its answer (row alignment and SGBM fusion with numpy and OpenCV, no "
                     "torch)", markup=False, soft_wrap=True)
    elif "crossview.same_as" in meta:
        lacks = [what for _, what in onnx.dropped_defaults(module)]
        if lacks:
            stderr.print(f"note: the file lacks the {' and '.join(lacks)} that "
                         f"`crossview {network.task} --model {model}` does by default "
                         "(recorded in its metadata, crossview.lacks)", markup=False)
        stdout.print(f"the file computes what `{meta['crossview.same_as']}` gives "
                     f"at {meta['crossview.size']}", markup=False, soft_wrap=True)
        self_fused = onnx.self_fused_same_as(meta)
        if self_fused is not None:
            stdout.print(f"`python -m crossview.runtime {out} LEFT RIGHT -o DISPARITY.npy "
                         f"--self-fuse` gives what `{self_fused}` gives (the runs and the "
                         "views fused with numpy, no torch)", markup=False, soft_wrap=True)
    if check:
        with steps.long_step(f"checking {out.name} with onnxruntime against crossview"):
            differences = onnx.compare_with_crossview(module, out, shape)
        against = meta.get("crossview.same_as", "pytorch")
        runner = "crossview.runtime" if fused is not None else "onnxruntime"
        stdout.print(f"|{runner} - {against}|: " + "; ".join(
            f"{name} mean {mean:.3g} max {largest:.3g}"
            for name, (mean, largest) in differences.items()), markup=False, soft_wrap=True)
