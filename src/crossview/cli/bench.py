"""``crossview bench ...``: speed and memory benchmarks that print a table and write JSON.

Each benchmark lives in :mod:`crossview.bench` (one module per subject); this module only
parses options and calls it.
"""

from __future__ import annotations

import importlib.util
import re
import shlex
from pathlib import Path
from typing import Annotated

import typer

from crossview.cli.help_text import App
from crossview.cli.options import parse_size
from crossview.defaults import PRESET_NAMES
from crossview.errors import UserError
from crossview.lazy import lazy_import
from crossview.output import check_output_file, check_output_files, check_writable, staged_files
from crossview.report import print_table, report_json, write_json

bars = lazy_import("rich.progress")  # progress bars: loaded when a run starts

torch = lazy_import("torch")
api = lazy_import("crossview.api")
onnx = lazy_import("crossview.export.onnx")
attention_bench = lazy_import("crossview.bench.attention")
camera_bench = lazy_import("crossview.bench.camera")
data_bench = lazy_import("crossview.bench.data")
device_bench = lazy_import("crossview.bench.device")
export_bench = lazy_import("crossview.bench.export")
gpu_bench = lazy_import("crossview.bench.gpu")
kernels_bench = lazy_import("crossview.bench.kernels")
match_bench = lazy_import("crossview.bench.match")
measure = lazy_import("crossview.bench.measure")
model_bench = lazy_import("crossview.bench.model")
train_bench = lazy_import("crossview.bench.train")
progress_display = lazy_import("crossview.progress")

app = App(help="Speed and memory benchmarks (tables + JSON).", no_args_is_help=True)


@app.command("camera")
def camera(
    views: Annotated[list[int] | None, typer.Option(
        "--views", help="View counts to time (repeatable; default 2 and 8).")] = None,
    patches: Annotated[int, typer.Option(
        help="Patches per image side (tokens per view = patches^2).")] = 32,
    heads: Annotated[int, typer.Option(help="Attention heads.")] = 8,
    head_dim: Annotated[int, typer.Option(help="Channels per head (a multiple of 8).")] = 64,
    repeats: Annotated[int, typer.Option(help="Timed runs per case (median reported).")] = 3,
    threads: Annotated[int, typer.Option(help="Torch CPU threads (0: torch's default).")] = 0,
    flush_denormal: Annotated[bool, typer.Option(
        "--flush-denormal", help="Flush float32 denormals to zero while timing.")] = False,
    json_path: Annotated[str, typer.Option("--json", help="Output JSON.")] = (
        "bench-results/camera.json"),
) -> None:
    """PRoPE and GTA attention against plain SDPA: forward and backward, float32 CPU."""
    check_output_file(json_path, "--json")
    views = views or [2, 8]
    if head_dim % 8 or min(views) <= 0 or min(patches, heads, repeats) <= 0 or threads < 0:
        raise UserError("--head-dim must be a multiple of 8; views, patches, heads, repeats > 0")
    with measure.torch_threads(threads), bars.Progress(transient=True) as progress:
        task = progress.add_task("camera attention",
                                 total=len(views) * len(camera_bench.METHODS) * 2)

        def on_step(label: str) -> None:
            progress.update(task, advance=1, description=label)

        rows = camera_bench.bench_camera(views, patches, heads, head_dim, repeats=repeats,
                                         on_step=on_step, flush_denormal=flush_denormal)
    print_table(
        f"camera attention, {heads} heads x {head_dim} channels, {patches}x{patches} patches/view",
        ["views", "tokens", "method", "pass", "median s", "min s", "ratio (median)",
         "ratio (min)"],
        [[r["views"], r["tokens"], r["method"], r["pass"], r["median_s"], r["min_s"], r["ratio"],
          r["ratio_min"]] for r in rows],
    )
    path = write_json(json_path, {"benchmark": "camera", "dtype": "float32", "heads": heads,
                                  "head_dim": head_dim, "patches": patches,
                                  "flush_denormal": flush_denormal, "rows": rows})
    typer.echo(f"wrote {path}")


@app.command("data")
def data(
    size: Annotated[str, typer.Option(help="Stereo/flow image size HxW.")] = "256x512",
    warp_size: Annotated[str, typer.Option(help="Warp-pair image size HxW.")] = "240x240",
    multiview_size: Annotated[str, typer.Option(help="Multi-view image size HxW.")] = "64x64",
    views: Annotated[int, typer.Option(help="Views per multi-view sample.")] = 4,
    count: Annotated[int, typer.Option(help="Timed samples per case.")] = 40,
    case: Annotated[list[str] | None, typer.Option(
        "--case", help="Cases to time (repeatable; default all).")] = None,
    json_path: Annotated[str, typer.Option("--json", help="Output JSON.")] = (
        "bench-results/data.json"),
) -> None:
    """Synthetic data throughput (samples/s on one thread): stereo, flow, warps, multi-view."""
    check_output_file(json_path, "--json")
    chosen = case or list(data_bench.CASES)
    unknown = [c for c in chosen if c not in data_bench.CASES]
    if unknown:
        raise UserError(f"unknown --case {', '.join(unknown)}; expected one of "
                        f"{', '.join(data_bench.CASES)}")
    if count <= 0 or views <= 0:
        raise UserError("--count and --views must be positive")
    sizes = {"warp": parse_size(warp_size), "multiview": parse_size(multiview_size)}
    cases = [(c, sizes.get(c, parse_size(size))) for c in chosen]
    with bars.Progress(transient=True) as progress:
        task = progress.add_task("synthetic data", total=len(cases) * count)

        def on_sample(label: str) -> None:
            progress.update(task, advance=1, description=label)

        rows = data_bench.bench_data(cases, count, views=views, on_sample=on_sample)
    print_table(
        "synthetic data throughput, 1 torch thread",
        ["case", "size", "samples", "wall s", "samples/s (wall)", "samples/s (cpu)"],
        [[r["case"], r["size"] + (f" x{r['views']}" if r["views"] else ""), r["samples"],
          r["wall_s"], r["per_s_wall"], r["per_s_cpu"]] for r in rows],
    )
    path = write_json(json_path, {"benchmark": "data", "torch_threads": 1, "rows": rows})
    typer.echo(f"wrote {path}")


@app.command("match")
def match(
    grid: Annotated[list[int] | None, typer.Option(
        "--grid", help="Correlation grids g (g^4 matches; repeatable; default 6 8 9 10 12 15 20).")
    ] = None,
    memory_cap_gib: Annotated[float, typer.Option(
        help="Skip standard attention when its score matrices would exceed this.")] = 3.0,
    gflop_cap: Annotated[float, typer.Option(
        help="Skip fused standard attention above this many GFLOP.")] = 200.0,
    repeats: Annotated[int, typer.Option(help="Timed runs per case (median reported).")] = 3,
    threads: Annotated[int, typer.Option(help="Torch CPU threads (0: torch's default).")] = 0,
    model_only: Annotated[bool, typer.Option(
        "--model-only", help="Only the whole model per image pair (no attention layer table).")
    ] = False,
    model: Annotated[str, typer.Option(
        "--model", help="Semantic model timed per image pair (see `crossview models`).")
    ] = "transformatcher",
    json_path: Annotated[str, typer.Option("--json", help="Output JSON.")] = (
        "bench-results/match.json"),
) -> None:
    """TransforMatcher: additive vs standard match-to-match attention, and the whole model."""
    check_output_file(json_path, "--json")
    grids = grid or [6, 8, 9, 10, 12, 15, 20]
    if min(grids) <= 0 or repeats <= 0 or threads < 0 or min(memory_cap_gib, gflop_cap) <= 0:
        raise UserError("--grid, --repeats, --memory-cap-gib and --gflop-cap must be positive")
    if api.model_task(model) != "semantic":
        raise UserError(f"--model {model!r} estimates {api.model_task(model)}; bench match "
                        f"times a semantic model: {', '.join(api.list_models('semantic'))}")
    layers = []
    with measure.torch_threads(threads):
        used_threads = torch.get_num_threads()
        if not model_only:
            with bars.Progress(transient=True) as progress:
                task = progress.add_task("match attention", total=3 * len(grids))

                def on_step(label: str) -> None:
                    progress.update(task, advance=1, description=label)

                layers = match_bench.bench_layers(
                    grids, memory_cap=memory_cap_gib * 2**30, flop_cap=gflop_cap * 1e9,
                    repeats=repeats, on_step=on_step)
        model_rows = match_bench.bench_model(api.load_model(model), repeats)
    if not model_only:
        print_table(
            "match-to-match attention, 6 layers, 16 ch, 8 heads x 4, forward, float32 CPU",
            ["attention", "matches", "median s", "cpu s", "peak MiB", "us/match", "bytes/match",
             "status"],
            [[r["attention"], f"{r['grid']}^4 = {r['matches']}", r.get("median_s", "-"),
              r.get("cpu_s", "-"), r.get("peak_mib", "-"), r.get("us_per_match", "-"),
              r.get("bytes_per_match", "-"), r["status"]] for r in layers])
    print_table(f"{model} per image pair (target <= 0.25 s for keypoints; cpu s: all "
                "threads)",
                ["case", "size", "median s", "min s", "cpu s", "peak MiB"],
                [[r["case"], r["size"], r["median_s"], r["min_s"], r["cpu_s"], r["peak_mib"]]
                 for r in model_rows])
    path = write_json(json_path, {"benchmark": "match", "dtype": "float32", "model_name": model,
                                  "torch_threads": used_threads,
                                  "layers": layers, "model": model_rows})
    typer.echo(f"wrote {path}")


@app.command("attention")
def attention(
    quick: Annotated[bool, typer.Option(
        "--quick", help="Small grids (32², 64²), r=1 only: a check in well under a minute.",
    )] = False,
    repeats: Annotated[int | None, typer.Option(
        help="Timed runs per case (median reported); default 5, 2 with --quick.")] = None,
    json_path: Annotated[str, typer.Option("--json", help="Output JSON.")] = (
        "bench-results/attention.json"),
    plot: Annotated[str | None, typer.Option(
        "--plot", help="Also write a PNG of latency and memory against tokens.")] = None,
    device: Annotated[str, typer.Option(
        help="cpu (fused cpu kernels) or cuda (fused Triton kernels, pip install "
             "'crossview[gpu]').")] = "cpu",
    sizes_option: Annotated[list[int] | None, typer.Option(
        "--size", help="Token grid side to run instead of the default grid (repeatable).",
    )] = None,
) -> None:
    """MatchAttention: fused kernels vs reference backend vs SDPA global attention, and the
    fused forward's ns per query and head against this machine's roof (GEMM rate, copy
    bandwidth)."""
    check_output_file(json_path, "--json")
    if plot is not None:
        check_output_file(plot, "--plot")
    outputs = [json_path, *([plot] if plot is not None else [])]
    check_output_files(outputs)  # not one file for both

    repeats = (2 if quick else 5) if repeats is None else repeats
    if repeats <= 0:
        raise UserError(f"--repeats must be positive, got {repeats}")
    device_bench.fused_backend(device)  # fails before measuring if it cannot run
    radii = attention_bench.RADII[:1] if quick else attention_bench.RADII
    sizes = attention_bench.QUICK_SIZES if quick else attention_bench.SIZES
    if sizes_option:
        window = 2 * max(radii) + 2  # the expanded window must fit in the key map
        if min(sizes_option) < window:
            raise UserError(f"--size must be at least {window} (the {window}x{window} window "
                            f"of r={max(radii)}), got {min(sizes_option)}")
        sizes = tuple(sizes_option)
    with bars.Progress(transient=True) as progress:
        task = progress.add_task("MatchAttention", total=len(sizes) * len(radii))

        def on_step(label: str) -> None:
            progress.update(task, advance=1, description=label)

        result = attention_bench.bench_attention(sizes, radii, repeats=repeats, on_step=on_step,
                                                 device=device)
    print_table("MatchAttention, 4 heads x 64 ch, float32: median ms; x = reference / fused",
                attention_bench.SPEED_COLUMNS, attention_bench.speed_rows(result))
    print_table(f"Bandwidth bound (copy {result['copy_bandwidth_Bps'] / 1e9:.1f} GB/s), fused "
                "forward ns/token, peak allocated MiB", attention_bench.MEMORY_COLUMNS,
                attention_bench.memory_rows(result))
    print_table(f"Fused forward per query and head against the roof (GEMM "
                f"{result['gemm_flops_per_s'] / 1e9:.0f} GFLOP/s, copy "
                f"{result['copy_bandwidth_Bps'] / 1e9:.1f} GB/s, {result['threads']} threads)",
                attention_bench.ROOF_COLUMNS, attention_bench.roof_rows(result))
    for line in result["skipped"]:
        typer.echo(f"skipped: {line}")
    with staged_files(outputs) as staged:  # the JSON and the plot together, or neither
        staged[0].write_text(report_json({"benchmark": "attention", **result}))
        if plot is not None:
            attention_bench.plot_attention(result, staged[1])
    typer.echo(f"wrote {' and '.join(outputs)}")


@app.command("model")
def model(
    models: Annotated[list[str] | None, typer.Option(
        "--model", help="T, S, B or a registered stereo or flow model name such as "
                        "matchstereo-hybrid or matchflow-hybrid (repeatable; default T, S and "
                        "B).")] = None,
    sizes: Annotated[list[str] | None, typer.Option(
        "--size", help="Image sizes HxW (repeatable; default 384x1248 and 1536x1536).")] = None,
    big: Annotated[bool, typer.Option(help="Also run MatchStereo-T at 2176x3840.")] = True,
    precisions: Annotated[list[str] | None, typer.Option(
        "--precision", help="fp32 / bf16 / fp16 (repeatable; default fp32 and bf16, on cuda "
                            "fp16 and bf16).")] = None,
    reference_sizes: Annotated[list[str] | None, typer.Option(
        "--reference-size", help="Sizes also run on the reference operator, for the ratio "
        "(repeatable; default 384x1248).")] = None,
    reference_models: Annotated[list[str] | None, typer.Option(
        "--reference-model", help="Models also run on the reference operator (repeatable; "
        "default T).")] = None,
    repeats: Annotated[int, typer.Option(help="Timed runs per case up to 1 Mpx (median).")] = 3,
    threads: Annotated[int, typer.Option(help="Torch CPU threads per case.")] = 2,
    json_path: Annotated[str, typer.Option("--json", help="Output JSON.")] = (
        "bench-results/model.json"),
    device: Annotated[str, typer.Option(
        help="cpu or cuda (fused Triton kernels, pip install 'crossview[gpu]'; peak GPU memory "
             "reported; 2176x3840 for every model).")] = "cpu",
    presets: Annotated[list[str] | None, typer.Option(
        "--preset", help=f"Also run a fusing model with this speed preset "
        f"({', '.join(PRESET_NAMES)}; repeatable).")] = None,
    classical: Annotated[bool, typer.Option(
        "--classical/--no-classical", help="Also time OpenCV SGBM (filled) and DIS on each "
        "size's pair, for the ratios x SGBM and x DIS (same run).")] = True,
    alone: Annotated[bool, typer.Option(
        "--alone", help="Also run a fusing model without its fusion: the network alone "
        "(--no-fuse) and self-fused (--self-fuse, six network runs).")] = False,
    pair: Annotated[tuple[str, str] | None, typer.Option(
        "--pair", metavar="LEFT RIGHT", help="A real pair (two image files: a rectified stereo "
        "pair, or two frames for a flow model), resized to each --size, instead of the random "
        "pair shifted by W/8.")] = None,
) -> None:
    """MatchStereo-T/S/B (or stereo and flow models by name) end to end: latency, peak RSS,
    fused-vs-reference ratio and the ratio to OpenCV SGBM and DIS (same run)."""
    check_output_file(json_path, "--json")
    if pair is not None:
        model_bench.check_pair(pair)  # an unreadable file: one error line before anything runs
    letters, precision_names = model_bench.MODELS, model_bench.PRECISIONS
    chosen = [m.upper() if m.upper() in letters else m.lower() for m in models or letters]
    device_bench.fused_backend(device)  # fails before measuring if it cannot run
    chosen_precisions = precisions or list(model_bench.DEFAULT_PRECISIONS[device])
    dense_names = [name for task in model_bench.ESTIMATE for name in api.list_models(task)]
    if set(chosen) - set(letters) - set(dense_names) or set(chosen_precisions) - set(
            precision_names):
        raise UserError(f"--model takes {', '.join(letters)} or a stereo or flow model name "
                        f"({', '.join(dense_names)}); --precision takes "
                        f"{', '.join(precision_names)}")
    if repeats <= 0 or threads <= 0:
        raise UserError("--repeats and --threads must be positive")
    if set(presets or ()) - set(PRESET_NAMES):
        raise UserError(f"--preset takes {', '.join(PRESET_NAMES)}")
    cases = model_bench.default_cases(
        chosen, [parse_size(s) for s in sizes] if sizes else list(model_bench.SIZES),
        chosen_precisions,
        big=big, reference_sizes=[parse_size(s) for s in reference_sizes or ["384x1248"]],
        repeats=repeats, threads=threads,
        reference_models=[m.upper() for m in reference_models or ["T"]], device=device,
        presets=presets or (), classical=classical, alone=alone, pair=pair)
    with bars.Progress(transient=True) as progress:
        task = progress.add_task("model", total=len(cases))

        def on_case(label: str) -> None:
            progress.update(task, advance=1, description=label)

        def save(rows: list[dict]) -> None:
            write_json(json_path, {"benchmark": "model", "threads": threads, "rows": rows,
                                   "complete": len(rows) == len(cases)})

        rows = model_bench.bench_model(cases, on_case=on_case, on_rows=save)

    def fmt(value: float | None, digits: str = ".3g") -> str:
        return "-" if value is None else format(value, digits)

    print_table(
        f"MatchStereo forward (estimate_disparity or, for flow models, estimate_flow with the "
        f"model's defaults, both directions), {threads} threads, bundled weights where a model "
        f"ships them (else random), "
        + (f"the pair {pair[0]}, {pair[1]} resized" if pair
           else "a random pair shifted by W/8")
        + "; ratio = reference / fused, same run",
        ["model", "preset", "size", "network at", "lri", "precision", "operator", "refine",
         "fuse", "median s", "cpu s",
         "peak RSS MiB", "peak GPU MiB", "fused speed-up", "vs fp32", "x SGBM filled", "x DIS",
         "status"],
        [[r["model"], r.get("preset") or "-", f"{r['size'][0]}x{r['size'][1]}",
          "-" if "network_size" not in r else "x".join(map(str, r["network_size"])),
          "-" if r.get("lri") is None else ("on" if r["lri"] else "off"),
          r["precision"], r["backend"],
          "-" if r.get("refine") is None else ("on" if r["refine"] else "off"),
          "self" if r.get("answer") == "self-fuse" else
          "-" if r.get("fuse") is None else ("on" if r["fuse"] else "off"),
          fmt(r.get("median_s")), fmt(r.get("cpu_s")), fmt(r.get("peak_rss_mib"), ".0f"),
          fmt(r.get("peak_gpu_mib"), ".0f"),
          fmt(r.get("ratio"), ".2f"), fmt(r.get("vs_fp32"), ".2f"), fmt(r.get("vs_sgbm"), ".2f"),
          fmt(r.get("vs_dis"), ".2f"), r["status"]] for r in rows])
    typer.echo(f"wrote {json_path}")


@app.command("train")
def train(
    model: Annotated[list[str] | None, typer.Option(
        "--model", help="Registered stereo models (repeatable; default the bundled "
        "matchstereo-mini and matchstereo-t).")] = None,
    size: Annotated[str, typer.Option(help="Crop size HxW.")] = "256x512",
    batch: Annotated[int, typer.Option(help="Samples per step.")] = 1,
    backend: Annotated[list[str] | None, typer.Option(
        "--backend", help="MatchAttention backends (repeatable; default cpu and reference).")
    ] = None,
    repeats: Annotated[int, typer.Option(help="Timed steps per case (median reported).")] = 2,
    precision: Annotated[str, typer.Option(help="fp32 or bf16 (autocast).")] = "fp32",
    json_path: Annotated[str, typer.Option("--json", help="Output JSON.")] = (
        "bench-results/train.json"),
) -> None:
    """Training steps/s and samples/s, fused versus reference MatchAttention, in one run."""
    check_output_file(json_path, "--json")
    models = model or ["matchstereo-mini", "matchstereo-t"]
    backends = backend or list(train_bench.BACKENDS)
    if batch < 1 or repeats < 1 or precision not in ("fp32", "bf16"):
        raise UserError("--batch and --repeats must be >= 1, --precision fp32 or bf16")
    unknown = sorted(set(backends) - set(train_bench.BACKENDS))
    if unknown:
        raise UserError(f"unknown --backend {', '.join(unknown)}; expected one of "
                        f"{', '.join(train_bench.BACKENDS)}")
    with bars.Progress(transient=True) as progress:
        task = progress.add_task("train steps", total=len(models) * len(backends))

        def on_case(label: str) -> None:
            progress.update(task, advance=1, description=label)

        rows = train_bench.bench_train(models, parse_size(size), batch, backends=backends,
                           repeats=repeats, precision=precision, on_case=on_case)

    print_table(
        f"training steps, {size}, batch {batch}, {precision}",
        ["model", "params", "backend", "step s (wall)", "step s (cpu)", "steps/s",
         "samples/s", "x fused (wall)", "x fused (cpu)"],
        [[r["model"], r["params"], r["backend"], r["step_s"], r["cpu_s"], r["steps_per_s"],
          r["samples_per_s"], r["over_fused"], r["over_fused_cpu"]] for r in rows],
        width=160)
    path = write_json(json_path, {"benchmark": "train", "rows": rows})
    typer.echo(f"wrote {path}")


@app.command("export")
def export(
    model: Annotated[str, typer.Option(
        "--model", help="MatchStereo / MatchFlow / TransforMatcher model name.")] = (
        "matchstereo-hybrid"),
    weights: Annotated[str | None, typer.Option(
        "--weights", help="Weights (default: the model's bundled ones).")] = None,
    size: Annotated[str, typer.Option(help="Image size HxW (multiples of 32).")] = "384x640",
    repeats: Annotated[int, typer.Option(help="Timed runs per runtime (median).")] = 3,
    threads: Annotated[int, typer.Option(help="CPU threads, torch and onnxruntime.")] = 1,
    json_path: Annotated[str, typer.Option("--json", help="Output JSON.")] = (
        "bench-results/export.json"),
) -> None:
    """ONNX export: onnxruntime's CPU provider beside PyTorch on one pair, with each output's
    largest difference from PyTorch (needs the optional extra named "export")."""
    check_output_file(json_path, "--json")
    shape = parse_size(size)
    if repeats <= 0 or threads <= 0:
        raise UserError("--repeats and --threads must be positive")
    for module in ("onnx", "onnxscript", "onnxruntime"):
        onnx.require(module)
    network = api.load_model(model, weights)
    onnx.export_module(network)
    onnx.check_size(network, shape)
    with bars.Progress(transient=True) as progress:
        task = progress.add_task("export", total=None)
        result = export_bench.bench_export(
            network, shape, repeats=repeats, threads=threads,
            on_step=lambda label: progress.update(task, description=label))
    names = result["outputs"]
    print_table(
        f"{model} at {shape[0]}x{shape[1]}, {threads} thread(s); exported in "
        f"{result['export_s']:.1f} s ({result['onnx_bytes'] / 2**20:.1f} MiB)",
        ["runtime", "median s", "min s", *(f"max diff {n}" for n in names)],
        [[r["runtime"], r["median_s"], r["min_s"], *(r["max_abs_diff"][n] for n in names)]
         for r in result["rows"]],
        caption="max diff: largest |value - PyTorch| (masks: fraction of differing pixels)")
    path = write_json(json_path, {"benchmark": "export", "model": model, "size": list(shape),
                                  "threads": threads, **result})
    typer.echo(f"wrote {path}")


@app.command("kernels")
def kernels(
    targets: Annotated[list[str] | None, typer.Option(
        "--target", help="GPU architectures (repeatable; default sm_90, the H100; sm_80 is the "
                         "A100).")] = None,
    models: Annotated[list[str] | None, typer.Option(
        "--model", help="Published models whose variants to compile (repeatable; default "
                        "matchstereo-t, -s, -b and matchflow-b).")] = None,
    dtypes: Annotated[list[str] | None, typer.Option(
        "--dtype", help="float32 / float16 / bfloat16 (repeatable; default all three).")] = None,
    json_path: Annotated[str, typer.Option("--json", help="Output JSON.")] = (
        "bench-results/kernels.json"),
) -> None:
    """Triton kernels: compile every variant the published models use for a GPU, on the CPU
    (no GPU needed): compile time, PTX lines, registers, spills (needs Triton)."""
    check_output_file(json_path, "--json")
    targets = targets or list(kernels_bench.TARGETS)
    models = [m.lower() for m in models or kernels_bench.PUBLISHED]
    dtypes = dtypes or list(kernels_bench.DTYPES)
    bad = (sorted(set(models) - set(kernels_bench.PUBLISHED)),
           sorted(set(dtypes) - set(kernels_bench.DTYPES)),
           sorted(t for t in targets if not re.fullmatch(r"sm_\d{2,3}", t)))
    if any(bad):
        raise UserError(f"--model takes {', '.join(kernels_bench.PUBLISHED)}; --dtype "
                        f"{', '.join(kernels_bench.DTYPES)}; --target sm_NN (sm_90, sm_80); got "
                        f"{', '.join(x for group in bad for x in group)}")
    used = kernels_bench.model_variants(models, dtypes)
    with bars.Progress(transient=True) as progress:
        task = progress.add_task("compiling", total=len(used) * len(targets))

        def on_row(row: dict) -> None:
            progress.update(task, advance=1, description=f"{row['variant']} ({row['target']})")

        rows = kernels_bench.compile_variants(used, targets, on_row=on_row)
    print_table(f"Triton kernels of MatchAttention compiled on the CPU ({len(used)} variants; "
                f"fail: spills or over {kernels_bench.MAX_COMPILE_S:.0f} CPU s)",
                kernels_bench.COLUMNS, kernels_bench.table_rows(rows, used),
                caption="models: T/S/B = MatchStereo-T/S/B, F = MatchFlow-B; cpu s: CPU time "
                        "of the compile (Triton and ptxas)", width=150)
    first = kernels_bench.first_use(rows, used)
    for target, sums in first.items():
        parts = [f"{what} compiles {sums[f'{key}_kernels']} kernels in {sums[f'{key}_s']:.1f} s "
                 f"({sums[f'{key}_cpu_s']:.1f} CPU s)"
                 for key, what in (("first_pair", "first image pair"),
                                   ("first_step", "first training step")) if f"{key}_s" in sums]
        typer.echo(f"MatchStereo-T on {target}, float32: {'; '.join(parts)}")
    path = write_json(json_path, {"benchmark": "kernels", "targets": targets, "models": models,
                                  "dtypes": dtypes, "rows": [{**row, "status":
                                  kernels_bench.status(row)} for row in rows],
                                  "matchstereo_t_float32": first})
    typer.echo(f"wrote {path}")


@app.command("gpu")
def gpu(
    out: Annotated[str, typer.Option(
        "--out", help="Output folder: gpu.json, gpu.md, each step's JSON and logs/.")] = (
        "bench-results/gpu"),
    steps: Annotated[list[str] | None, typer.Option(
        "--step", help="Steps to run, in the order given (repeatable; default all: tests, "
                       "kernels, attention, model-paper, model).")] = None,
    timeouts: Annotated[list[str] | None, typer.Option(
        "--timeout", help="Seconds a step may take before its processes are ended: SECONDS "
                          "for every step or STEP=SECONDS (repeatable; default each step's "
                          "own, shown by --dry-run).")] = None,
    target: Annotated[str | None, typer.Option(
        "--target", help="GPU architecture of the compile check (default the GPU's own, "
                         "sm_90 without one).")] = None,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="List the steps with their commands and timeouts; run and write "
                          "nothing (no GPU needed).")] = False,
) -> None:
    """Every GPU check in one run: CUDA tests, Triton compile check, GPU benches (tables + JSON).

    Each step runs as its own process with a timeout; one that fails or times out is recorded
    and the next runs. gpu.json and gpu.md (the paper's GPU figures beside ours) are rewritten
    after every step. Needs a CUDA GPU and pip install 'crossview[gpu]'.
    """
    names = [s.name for s in gpu_bench.plan(Path("."))]
    chosen = steps or names
    unknown = [s for s in chosen if s not in names]
    if unknown:
        raise UserError(f"unknown --step {', '.join(unknown)}; expected one of "
                        f"{', '.join(names)}")
    try:
        every, per_step = gpu_bench.parse_timeouts(timeouts or [], names)
    except ValueError as error:
        raise UserError(str(error)) from None
    if target is not None and not re.fullmatch(r"sm_\d{2,3}", target):
        raise UserError(f"--target takes sm_NN (sm_90, sm_80), got {target!r}")
    if not dry_run:
        if not torch.cuda.is_available():
            raise UserError("bench gpu needs a CUDA GPU and torch sees none "
                            "(torch.cuda.is_available() is False); --dry-run lists its steps")
        if importlib.util.find_spec("triton") is None:
            raise UserError("bench gpu needs Triton: pip install 'crossview[gpu]'")
        if target is None:
            target = "sm_{}{}".format(*torch.cuda.get_device_capability())
    folder = Path(out).resolve()
    if not dry_run:
        check_writable(folder)
    plan = [s for s in gpu_bench.plan(folder, target=target or "sm_90") if s.name in chosen]
    plan.sort(key=lambda s: chosen.index(s.name))
    limits = {s.name: per_step.get(s.name, every or s.timeout_s) for s in plan}
    if dry_run:
        typer.echo(f"bench gpu would run {len(plan)} steps from "
                   f"{gpu_bench.repository_root()}, writing into {folder}:")
        for s in plan:
            typer.echo(f"  {s.name} (timeout {limits[s.name]:g} s): {s.what}\n"
                       f"    {shlex.join(s.argv)}")
        typer.echo("dry run: nothing was run or written")
        return
    root = gpu_bench.repository_root()
    command = ["crossview", "bench", "gpu", "--out", out, "--target", target,
               *(arg for s in plan for arg in ("--step", s.name)),
               *(arg for s in plan for arg in ("--timeout", f"{s.name}={limits[s.name]:g}"))]
    header = {"command": shlex.join(command), "environment": gpu_bench.environment(root)}
    with progress_display.Progress() as progress:
        task = progress.add_task("bench gpu", total=len(plan))

        def on_start(step: gpu_bench.Step, seconds: float) -> None:
            if not progress.plain:  # off a terminal the line names the step
                progress.update(task, description=f"bench gpu: {step.name}")
            progress.line(task, f"{step.name} running (timeout {seconds:g} s, log "
                                f"{folder / 'logs' / step.name}.log)", timed=False)

        def on_done(record: dict) -> None:
            progress.step(task, f"{record['name']} {record['status']} (exit code "
                                f"{record['exit_code']})")

        result = gpu_bench.run_steps(plan, folder, root=root, timeouts=limits, header=header,
                                     on_start=on_start, on_done=on_done)
    print_table("bench gpu: steps", ["step", "status", "exit code", "seconds", "numbers"],
                [[s["name"], s["status"], s["exit_code"], s["seconds"],
                  gpu_bench.step_summary(s)] for s in result["steps"]])
    print_table("the paper's GPU figures and ours (1536x1536, fp16)",
                ["model", "paper TFLOPs", "paper ms", "ours ms", "paper GB", "ours GB",
                 "ours from"], gpu_bench.paper_rows(result))
    typer.echo(f"wrote {folder / 'gpu.json'} and {folder / 'gpu.md'}")
    bad = [f"{s['name']} ({s['status']})" for s in result["steps"] if s["status"] != "ok"]
    if bad:
        typer.echo(f"error: {len(bad)} of {len(plan)} steps did not pass: {', '.join(bad)}",
                   err=True)
        raise typer.Exit(1)
