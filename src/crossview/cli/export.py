"""``crossview export onnx``: a model as an ONNX file, checked against PyTorch with
onnxruntime (:mod:`crossview.export.onnx`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from crossview.cli.help_text import App
from crossview.cli.options import parse_size
from crossview.console import stderr, stdout
from crossview.lazy import lazy_import
from crossview.output import check_output_file

api = lazy_import("crossview.api")
onnx = lazy_import("crossview.export.onnx")

app = App(help="Export models to other runtimes.", no_args_is_help=True)


@app.command("onnx")
def onnx_command(
    model: Annotated[str, typer.Option(
        "--model", help="MatchStereo / MatchFlow / TransforMatcher model name.")],
    size: Annotated[str, typer.Option(
        "--size", help="HxW traced at: multiples of 32 (MatchStereo / MatchFlow; other sizes "
                       "run too unless --static), TransforMatcher: 240x240.")],
    out: Annotated[Path, typer.Option("-o", "--out", help="The .onnx file to write.")],
    weights: Annotated[Path | None, typer.Option(
        "--weights", help="Weights (default: the model's bundled ones, else its published ones "
        "from the cache).")] = None,
    static: Annotated[bool, typer.Option(
        "--static", help="Fix height and width at --size (smaller graph).")] = False,
    check: Annotated[bool, typer.Option(
        help="Run the file with onnxruntime and compare with PyTorch.")] = True,
) -> None:
    """Export MODEL to ONNX: inputs image0, image1 [1, 3, H, W] float 0..255; outputs field,
    disparity or flow, valid (MatchStereo / MatchFlow) or coords (TransforMatcher)."""
    check_output_file(out, "-o")
    shape = parse_size(size)
    for module in ("onnx", "onnxscript", *(["onnxruntime"] if check else [])):
        onnx.require(module)
    network = api.load_model(model, weights)
    onnx.export_module(network)  # a model or size that cannot be exported fails before the trace
    onnx.check_size(network, shape)
    # the trace and the comparison run the network at --size (the export has no refinement)
    api.check_memory(network, *shape, task=network.task, refine=False,
                     advice=api.MemoryAdvice("give a smaller --size"))
    with stderr.status(f"exporting {model} at {shape[0]}x{shape[1]} (takes minutes)"):
        names = onnx.export_onnx(network, out, shape, dynamic=not static)
    stdout.print(f"wrote {out} (inputs image0, image1; outputs {', '.join(names)})",
                 markup=False, soft_wrap=True)
    if check:
        pair = onnx.example_inputs(shape, seed=1)
        differences = onnx.max_differences(onnx.export_module(network)(*pair),
                                      onnx.run_onnx(onnx.onnx_session(out), *pair), names)
        stdout.print("max |onnxruntime - pytorch|: " + ", ".join(
            f"{name} {value:.3g}" for name, value in differences.items()), markup=False,
            soft_wrap=True)
