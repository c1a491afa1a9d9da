"""``crossview bench ...``: speed and memory benchmarks that print a table and write JSON.

Each benchmark lives in :mod:`crossview.bench` (one module per subject); this module only
parses options and calls it.
"""

from __future__ import annotations

from typing import Annotated

import typer

app = typer.Typer(help="Speed and memory benchmarks (tables + JSON).", no_args_is_help=True)


@app.command("camera")
def camera(
    views: Annotated[list[int] | None, typer.Option(
        "--views", help="View counts to time (repeatable; default 2 and 8).")] = None,
    patches: Annotated[int, typer.Option(
        help="Patches per image side (tokens per view = patches^2).")] = 32,
    heads: Annotated[int, typer.Option(help="Attention heads.")] = 8,
    head_dim: Annotated[int, typer.Option(help="Channels per head (a multiple of 8).")] = 64,
    repeats: Annotated[int, typer.Option(help="Timed runs per case (median reported).")] = 3,
    json_path: Annotated[str, typer.Option("--json", help="Output JSON.")] = (
        "bench-results/camera.json"),
) -> None:
    """PRoPE and GTA attention against plain SDPA: forward and backward, float32 CPU."""
    from rich.progress import Progress

    from crossview.bench.camera import METHODS, bench_camera
    from crossview.bench.report import print_table, write_json
    from crossview.errors import UserError

    views = views or [2, 8]
    if head_dim % 8 or min(views) <= 0 or patches <= 0 or heads <= 0 or repeats <= 0:
        raise UserError("--head-dim must be a multiple of 8; views, patches, heads, repeats > 0")
    with Progress(transient=True) as progress:
        task = progress.add_task("camera attention", total=len(views) * len(METHODS) * 2)

        def on_step(label: str) -> None:
            progress.update(task, advance=1, description=label)

        rows = bench_camera(views, patches, heads, head_dim, repeats=repeats, on_step=on_step)
    print_table(
        f"camera attention, {heads} heads x {head_dim} channels, {patches}x{patches} patches/view",
        ["views", "tokens", "method", "pass", "median s", "ratio vs sdpa"],
        [[r["views"], r["tokens"], r["method"], r["pass"], r["median_s"], r["ratio"]]
         for r in rows],
    )
    path = write_json(json_path, {"benchmark": "camera", "dtype": "float32", "heads": heads,
                                  "head_dim": head_dim, "patches": patches, "rows": rows})
    typer.echo(f"wrote {path}")
