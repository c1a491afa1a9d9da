"""What ``crossview stereo`` and ``crossview flow`` share: options, pairing inputs, writing.

Inputs are two files, two directories (paired by file name, else by sorted order) or two glob
patterns (paired in sorted order). Every input image is decoded and checked before the model
runs, and every output file name is checked (not taken by a directory) before the model
loads. All or nothing: the outputs of every pair go to a hidden staging directory inside the
output directory and are moved into place only once the last pair is done, so a command that
fails on any pair (or is interrupted) leaves the output directory as it was, and removes it if
it created it (see :func:`crossview.output.staged_files`).
"""

from __future__ import annotations

import glob
import inspect
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import numpy as np
import torch
import typer
from rich.console import Console
from rich.progress import Progress

from crossview.cli.bench import _parse_size
from crossview.data import io
from crossview.device import resolve_device
from crossview.errors import UserError
from crossview.output import staged_files

_stdout = Console(highlight=False)
_stderr = Console(stderr=True, highlight=False, soft_wrap=True)


# a result -> per view (first, second): raw [B, ...], valid [B, H, W], self_rpos [B, H, W, 2]
_Fields = Callable[[object], list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]]


@dataclass(frozen=True)
class DenseOptions:
    """The options both commands take (see their ``--help``)."""

    out_dir: Path
    model: str
    weights: Path | None
    device: str
    precision: str
    lri: bool
    size: str | None
    save_right: bool
    save_rpos: bool
    fmt: str


def find_pairs(first: str, second: str) -> list[tuple[Path, Path]]:
    """Pair the inputs: two files, two directories or two glob patterns."""
    a, b = Path(first), Path(second)
    if a.is_dir() and b.is_dir():
        left, right = _images_in(a), _images_in(b)
        if {p.name for p in left} == {p.name for p in right}:
            right = [b / p.name for p in left]
        elif len(left) != len(right):
            raise UserError(f"{a} has {len(left)} images but {b} has {len(right)}")
        return list(zip(left, right, strict=True))
    if a.is_dir() or b.is_dir():
        raise UserError(f"give two files, two directories or two patterns, got {a} and {b}")
    if a.is_file() and b.is_file():
        return [(a, b)]
    left, right = _expand(first), _expand(second)
    if len(left) != len(right):
        raise UserError(f"{first!r} matches {len(left)} files but {second!r} matches {len(right)}")
    return list(zip(left, right, strict=True))


def _images_in(folder: Path) -> list[Path]:
    images = sorted(p for p in folder.iterdir() if p.suffix.lower() in io.IMAGE_SUFFIXES)
    if not images:
        raise UserError(f"{folder}: no images in this directory")
    return images


def _expand(pattern: str) -> list[Path]:
    matches = sorted(Path(p) for p in glob.glob(pattern) if Path(p).is_file())
    if not matches:
        raise UserError(f"{pattern}: no such file" if not glob.has_magic(pattern)
                        else f"{pattern}: no file matches this pattern")
    return matches


def check_pairs(pairs: list[tuple[Path, Path]]) -> list[tuple[int, int]]:
    """Every image decodes completely and both images of a pair have one size; returns the
    ``(H, W)`` of each pair."""
    sizes = []
    for a, b in pairs:
        (ha, wa), (hb, wb) = (io.read_image(path).shape[:2] for path in (a, b))
        if (ha, wa) != (hb, wb):
            raise UserError(f"{a} is {wa}x{ha} but {b} is {wb}x{hb} (W x H); a pair needs one "
                            "size")
        sizes.append((ha, wa))
    return sizes


def check_memory(task: str, model: object, pairs: list[tuple[Path, Path]],
                 sizes: list[tuple[int, int]], options: DenseOptions,
                 size: tuple[int, int] | None) -> None:
    """Refuse, before the first pair runs, a pair whose run would need more memory than this
    machine has (:func:`crossview.api.check_memory`), naming the pair and the options that
    help."""
    from crossview import api

    advice = ("give a smaller --size HxW" if size is not None else
              "run at a lower resolution with --size HxW, or give smaller images")
    for (a, b), (h, w) in zip(pairs, sizes, strict=True):
        try:
            api.check_memory(model, h, w, task=task, lri=options.lri, size=size,
                             device=options.device, advice=advice)
        except UserError as error:
            raise UserError(f"{a} and {b}: {error} (no output written)") from None


def output_names(pairs: list[tuple[Path, Path]]) -> list[str]:
    """A unique output stem per pair: the first file's stem, else ``parent_stem``, else numbered."""
    for naming in (lambda p: p.stem, lambda p: f"{p.parent.name}_{p.stem}"):
        names = [naming(a) for a, _ in pairs]
        if len(set(names)) == len(names):
            return names
    return [f"{i:05d}_{a.stem}" for i, (a, _) in enumerate(pairs)]


def load_model_for(task: str, options: DenseOptions):
    """The model, with a 'warning:' line on stderr when it runs on random weights."""
    from crossview import api
    from crossview.models.registry import get_spec

    model_task = get_spec(options.model).task
    if model_task != task:
        raise UserError(f"model {options.model!r} estimates {model_task}; crossview {task} "
                        f"needs a {task} model")

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", api.RandomWeightsWarning)
        model = api.load_model(options.model, options.weights, device=options.device)
    for warning in caught:
        _stderr.print(f"warning: {warning.message}", markup=False)
    return model


def make_command(task: str, *, inputs: tuple[tuple[str, str], tuple[str, str]],
                 out_default: str, model_default: str, fmt_default: str, fmt_help: str,
                 save_right_help: str, doc: str, views: tuple[str, str], fields: _Fields
                 ) -> Callable[..., None]:
    """A typer command for ``task`` with the options both dense commands share.

    ``inputs`` names and documents the two positional arguments; ``views`` and ``fields`` say
    what the files of one pair are (see :func:`run_dense`).
    """
    spec = [
        (inputs[0][0], str, typer.Argument(help=inputs[0][1]), inspect.Parameter.empty),
        (inputs[1][0], str, typer.Argument(help=inputs[1][1]), inspect.Parameter.empty),
        ("out_dir", Path, typer.Option("-o", "--out", help="Output directory (created)."),
         Path(out_default)),
        ("model", str, typer.Option("--model", help="Model name (see crossview.list_models())."),
         model_default),
        ("weights", Path | None, typer.Option(
            "--weights", help="Weights: published .pth checkpoint, bare state dict or "
            ".safetensors."), None),
        ("device", str, typer.Option("--device", help="cpu or cuda."), "cpu"),
        ("precision", str, typer.Option("--precision", help="fp32, bf16 or fp16."), "fp32"),
        ("lri", bool, typer.Option("--lri", help="Low-resolution initialisation (two passes)."),
         False),
        ("size", str | None, typer.Option(
            "--size", help="Fixed-resolution inference at HxW, results resized back."), None),
        ("save_right", bool, typer.Option("--save-right", help=save_right_help), False),
        ("save_rpos", bool, typer.Option(
            "--save-rpos", help="Also save the self relative positions as a picture "
            "(paper Fig. 6)."), False),
        ("fmt", str, typer.Option("--format", help=fmt_help), fmt_default),
    ]

    def command(**values: object) -> None:
        first, second = (str(values.pop(name)) for name, _ in inputs)
        run_dense(task, first, second, DenseOptions(**values), views, fields)

    command.__signature__ = inspect.Signature([  # what typer reads to build the options
        inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default,
                          annotation=Annotated[kind, info])
        for name, kind, info, default in spec])
    command.__doc__ = doc
    return command


def run_dense(task: str, first: str, second: str, options: DenseOptions,
              views: tuple[str, str], fields: _Fields) -> None:
    """Check everything, load the model, run every pair and write its outputs.

    The files of the pair named NAME are NAME_VIEW* for the first of ``views`` (and the second
    with ``--save-right``); ``fields(result)`` gives their tensors. Nothing reaches
    ``options.out_dir`` unless every pair succeeds.
    """
    from crossview import api

    size = _parse_size(options.size) if options.size else None
    resolve_device(options.device, "--device")
    pairs = find_pairs(first, second)
    sizes = check_pairs(pairs)
    kind = "disparity" if task == "stereo" else "flow"
    estimate = api.estimate_disparity if task == "stereo" else api.estimate_flow
    files = {name: pair_file_names(name, views, kind, options) for name in output_names(pairs)}
    destinations = [options.out_dir / f for names in files.values() for f in names]
    # a transient bar shows nothing off a terminal but would leave an empty line on stderr
    with staged_files(destinations) as staged, Progress(
            console=_stderr, transient=True,
            disable=len(pairs) < 2 or not _stderr.is_terminal) as progress:
        staged_as = dict(zip(destinations, staged, strict=True))
        model = load_model_for(task, options)
        check_memory(task, model, pairs, sizes, options, size)
        bar = progress.add_task(task, total=len(pairs))
        for names, (a, b) in zip(files.values(), pairs, strict=True):
            images = io.read_image(a), io.read_image(b)
            try:
                result = estimate(*images, model=model, device=options.device,
                                  precision=options.precision, lri=options.lri, size=size)
            except UserError as error:
                raise UserError(f"{a} and {b}: {error} (no output written)") from None
            writers = pair_writers(images, fields(result), kind, options)
            for file_name, write in zip(names, writers, strict=True):
                write(staged_as[options.out_dir / file_name])
            progress.advance(bar)
    _stdout.print(f"wrote {len(pairs)} pair(s) to {options.out_dir}")


def raw_writer(array: np.ndarray, fmt: str, kind: str) -> tuple[str, Callable[[Path], None]]:
    """``(suffix, writer)`` of a disparity ``[H, W]`` or flow ``[H, W, 2]`` in format ``fmt``."""
    if fmt == "npy":
        return ".npy", lambda path: io.write_npy(path, array)
    if fmt == "pfm":
        values = array if kind == "disparity" else np.dstack([array, np.zeros(array.shape[:2])])
        return ".pfm", lambda path: io.write_pfm(path, values)
    if fmt == "png16" and kind == "disparity":
        clipped = np.clip(array, 0, 65535 / 256)
        return ".png", lambda path: io.write_kitti_disparity(path, clipped, clipped > 0)
    if fmt == "png16":
        clipped = np.clip(array, -512, 511.98)
        return ".png", lambda path: io.write_kitti_flow(path, clipped)
    if fmt == "flo" and kind == "flow":
        return ".flo", lambda path: io.write_flo(path, array)
    allowed = "pfm, png16, npy" + (", flo" if kind == "flow" else "")
    raise UserError(f"--format {fmt!r} cannot hold {kind}; choose one of {allowed}")


def picture_writer(picture: np.ndarray) -> Callable[[Path], None]:
    return lambda path: io.write_image(path, picture)


def pair_file_names(name: str, views: tuple[str, str], kind: str, options: DenseOptions
                    ) -> list[str]:
    """The files of the pair named ``name``, in the order of :func:`pair_writers`: per view
    (the second with ``--save-right`` only) the raw result, colour picture, mask (and
    self-rpos picture)."""
    suffix = raw_suffix(options.fmt, kind)
    ends = [suffix, "_color.png", "_noc.png", *(["_rpos.png"] if options.save_rpos else [])]
    return [f"{name}_{view}{end}" for view in views[: 2 if options.save_right else 1]
            for end in ends]


def pair_writers(images: tuple[np.ndarray, np.ndarray],
                 views: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]], kind: str,
                 options: DenseOptions) -> list[Callable[[Path], None]]:
    """Writers of one pair's files (see :func:`pair_file_names`): ``views`` holds ``(raw
    [B, ...], valid [B, H, W], self_rpos [B, H, W, 2])`` of the first and the second view;
    batch row 0 is written."""
    from crossview.viz import disparity_to_colour, flow_to_colour, mask_to_image, self_rpos_picture

    writers = []
    for tensors, image in zip(views[: 2 if options.save_right else 1], images, strict=False):
        raw, valid, rpos = (t[0].cpu().numpy() for t in tensors)
        colour = disparity_to_colour(raw) if kind == "disparity" else flow_to_colour(raw)
        writers += [raw_writer(raw, options.fmt, kind)[1], picture_writer(colour),
                    picture_writer(mask_to_image(valid))]
        if options.save_rpos:
            writers.append(picture_writer(self_rpos_picture(rpos, image)))
    return writers


def raw_suffix(fmt: str, kind: str) -> str:
    """The file suffix of a raw ``kind`` in format ``fmt``; a :class:`UserError` if ``fmt``
    cannot hold ``kind``."""
    return raw_writer(np.zeros((1, 1) if kind == "disparity" else (1, 1, 2), np.float32), fmt,
                      kind)[0]
