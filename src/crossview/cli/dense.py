"""What ``crossview stereo`` and ``crossview flow`` share: pairing inputs, running, writing.

Inputs are two files, two directories (paired by file name, else in name order), two glob
patterns (paired in name order) or, for flow, one video file or one folder of frames (pairs of
consecutive frames, within a :class:`FrameRange`). Name order compares the numbers in names as
numbers (``f2.png`` before ``f10.png``). Every
output file name is checked (not taken by a directory) before the model loads. One pair (two
files) is all or nothing: an error is one line and exit code 2, and nothing is written. A run
of many pairs (:mod:`crossview.cli.batch`) publishes each pair's files together as soon as
that pair is done; a pair that fails is reported and skipped, Ctrl-C or SIGTERM keep the
finished pairs, and ``--skip-existing`` skips pairs (one pair too) whose files are all there
(see :func:`crossview.output.staged_files`, used per pair). Results are checked before they are
published: a field that is not finite where it is valid (or a confidence anywhere) fails the
pair, naming the model, its weights and precision.
"""

from __future__ import annotations

import functools
import glob
import itertools
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from crossview.cli.batch import BatchSummary, PairJob, run_batch
from crossview.cli.options import parse_size
from crossview.console import stderr, stdout
from crossview.defaults import PRESET_NAMES
from crossview.errors import UserError
from crossview.lazy import lazy_import
from crossview.output import (
    check_finite,
    check_output_directory,
    check_output_files,
    staged_files,
)

if TYPE_CHECKING:
    import torch

api = lazy_import("crossview.api")
bars = lazy_import("rich.progress")  # the adaptation's progress bar
viz = lazy_import("crossview.viz")  # matplotlib: loaded when a pair is drawn
np = lazy_import("numpy")

# one view of a result: raw [B, ...] (disparity [B, H, W] or flow [B, H, W, 2]), valid
# [B, H, W], self_rpos [B, H, W, 2]; a command gives a result's views (first, second)
ViewTensors = tuple["torch.Tensor", "torch.Tensor", "torch.Tensor"]
Views = Callable[[object], list[ViewTensors]]
Pair = tuple["np.ndarray", "np.ndarray"]  # the decoded images [H, W, 3] uint8 of a pair
# finds a run's pairs: (jobs, count or 0 when unknown, single: exactly two image files)
JobFinder = Callable[[], tuple[list[PairJob] | Iterator[PairJob], int, bool]]


class ExtraOutput(Protocol):
    """More files per pair than a command's own (depth, confidence): ``check`` refuses inputs
    before the model loads, ``file_names(name)`` are the pair's files and ``writers(images,
    result)`` write them, in that order."""

    def check(self, images: list[Pair]) -> None: ...

    def file_names(self, name: str) -> list[str]: ...

    def writers(self, images: Pair, result: Any) -> list[Callable[[Path], None]]: ...


@dataclass(frozen=True)
class DenseOptions:
    """The options both commands take (see their ``--help``)."""

    out_dir: Path
    model: str
    weights: Path | None
    device: str
    precision: str
    lri: bool | None
    size: str | None
    save_right: bool
    save_rpos: bool
    fmt: str
    download: bool = False
    skip_existing: bool = False
    refine: bool | None = None
    frames: FrameRange | None = None  # flow: which frames of a video or folder (None: all)
    min_confidence: float = 0.0
    adapt: int = 0  # test-time adaptation steps per pair (0: off)
    fuse: bool | None = None  # the SGBM (stereo) or DIS (flow) fusion; None: the model's default
    preset: str | None = None  # the fused run's speed preset; None: the model's own settings
    self_fuse: bool = False  # stereo: the network's views fused with each other, not with SGBM

    def __post_init__(self) -> None:
        check_output_directory(self.out_dir, "--out")
        if self.preset is not None and self.preset not in PRESET_NAMES:
            raise UserError(f"--preset must be one of {', '.join(PRESET_NAMES)}, got "
                            f"{self.preset!r}")
        if self.preset is not None and self.fuse is False:
            raise UserError("--preset sets how the fused default runs; --no-fuse runs the "
                            "network alone (set it with --lri / --refine / --size)")
        if self.self_fuse and (self.fuse or self.preset is not None):
            raise UserError("--self-fuse fuses the network's two views with each other "
                            "instead of with SGBM: drop --fuse / --preset")

    def model_inputs(self) -> str:
        """The inputs besides the images that make a result what it is, as the user gave them:
        ``model NAME with --weights W at --precision P``."""
        return (f"model {self.model}" + (f" with --weights {self.weights}" if self.weights
                                         else "")
                + (f" at --precision {self.precision}" if self.precision != "fp32" else ""))


@dataclass(frozen=True)
class FrameRange:
    """The frames of a video or a folder of frames that ``crossview flow`` pairs: ``start``,
    ``start + stride``, ``start + 2 * stride``, ... before ``stop`` (0-based, as a Python
    slice; ``None``: to the last frame), each with the next of them: frames ``start`` and
    ``start + stride`` are the first pair, ``start + stride`` and ``start + 2 * stride`` the
    second. A range that cannot hold a pair is a :class:`UserError` (``--stride``,
    ``--start``, ``--stop``). ``crossview stereo`` picks the same frames, each one pair
    (``need=1``: one frame is a run; ``what`` names what the frames make)."""

    start: int = 0
    stop: int | None = None
    stride: int = 1
    need: int = 2
    what: str = "a flow pair"

    def __post_init__(self) -> None:
        if self.stride < 1:
            raise UserError(f"--stride must be 1 or more (frames from one pair's first frame to "
                            f"the next's), got {self.stride}")
        if self.start < 0:
            raise UserError(f"--start must be a frame index, 0 or more, got {self.start}")
        if self.stop is not None and self.stop <= self.start:
            raise UserError(f"--start {self.start} must be below --stop {self.stop} (frames "
                            "start to stop - 1)")
        if self.stop is not None and len(range(self.start, self.stop, self.stride)) < self.need:
            raise UserError(f"{self} picks one frame ({self.start}); {self.what} needs two")

    def __str__(self) -> str:
        """The options that chose this range, as given (``--start 3 --stride 2``)."""
        given = [(self.start, 0, "--start"), (self.stop, None, "--stop"),
                 (self.stride, 1, "--stride")]
        return " ".join(f"{name} {value}" for value, default, name in given if value != default)

    def picks(self, index: int) -> bool:
        """Whether frame ``index`` is one of the range's."""
        return (index >= self.start and (index - self.start) % self.stride == 0
                and (self.stop is None or index < self.stop))

    def too_few(self, source: object, total: int) -> UserError:
        """The error for ``source`` of ``total`` frames, where this range picks fewer than
        two."""
        picked = len(range(self.start, total, self.stride))
        choice = f"; {self} picks {picked}" if str(self) else ""
        return UserError(f"{source} holds {total} frame{'s' if total != 1 else ''}{choice}: "
                         f"{self.what} needs {('one', 'two')[self.need - 1]}")

def find_pairs(first: str, second: str) -> list[tuple[Path, Path]]:
    """Pair the inputs: two files, two directories or two glob patterns."""
    a, b = Path(first), Path(second)
    if a.is_dir() and b.is_dir():
        left, right = _images_in(a), _images_in(b)
        left_names, right_names = {p.name for p in left}, {p.name for p in right}
        if left_names == right_names:
            right = [b / p.name for p in left]
        elif left_names & right_names:  # paired by name, but some names have no partner
            alone = sorted(left_names ^ right_names)[0]
            where = a if alone in left_names else b
            raise UserError(f"{where / alone} has no partner of that name in "
                            f"{b if where == a else a} (directories pair by file name)")
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


def _name_order(path: Path) -> tuple[list[str | int], str]:
    """Sort key: the path with its digit runs as numbers (``f2`` before ``f10``: frames
    numbered without leading zeros stay in order), then the path itself (``f01`` and ``f1``)."""
    parts = re.split(r"(\d+)", str(path))  # text at even places, digits at odd ones
    return [int(part) if i % 2 else part for i, part in enumerate(parts)], str(path)


def _images_in(folder: Path) -> list[Path]:
    images = sorted((p for p in folder.iterdir() if p.suffix.lower() in api.IMAGE_SUFFIXES),
                    key=_name_order)
    if not images:
        raise UserError(f"{folder}: no images in this directory")
    return images


def _expand(pattern: str) -> list[Path]:
    matches = sorted((Path(p) for p in glob.glob(pattern) if Path(p).is_file()), key=_name_order)
    if not matches:
        raise UserError(f"{pattern}: no such file" if not glob.has_magic(pattern)
                        else f"{pattern}: no file matches this pattern")
    return matches


def read_pair(a: Path, b: Path) -> Pair:
    """Both images decoded completely, and of one size."""
    first, second = api.read_image(a), api.read_image(b)
    (ha, wa), (hb, wb) = first.shape[:2], second.shape[:2]
    if (ha, wa) != (hb, wb):
        raise UserError(f"{a} is {wa}x{ha} but {b} is {wb}x{hb} (W x H); a pair needs one size")
    return first, second


# a fused stereo run whose network answers less than this share of a pair's pixels (SGBM and
# the row fill answer the rest) says so when the user changed the network
UNUSED_NETWORK_SHARE = 0.01


def network_change(options: DenseOptions) -> str | None:
    """What the user changed of the network, in their words (``--weights W``, ``--adapt N``,
    a model file as ``--model``), or ``None``: the model's own weights."""
    if options.weights:
        return f"the weights of --weights {options.weights}"
    if options.adapt:
        return f"--adapt {options.adapt}"
    if Path(options.model).is_file():
        return f"the model file {options.model}"
    return None


def unused_network_note(options: DenseOptions, share: torch.Tensor | None,
                        label: str) -> str | None:
    """The ``note:`` for a fused stereo run of a changed network (:func:`network_change`)
    whose network answered less than :data:`UNUSED_NETWORK_SHARE` of every view of the pair
    (``share [B]``, :attr:`crossview.api.StereoResult.network_share`): the change made no
    difference to the answer beyond SGBM's search range; ``None`` otherwise."""
    changed = network_change(options)
    if changed is None or share is None or float(share.max()) >= UNUSED_NETWORK_SHARE:
        return None
    return (f"note: the network answered {100 * float(share.max()):.2f} % of the pixels of "
            f"{label} (SGBM and the row fill the rest), so {changed} changed little of this "
            "answer (SGBM's search range); --no-fuse shows the network's own answer")


def adapted_model(task: str, model: Any, pair: Pair, options: DenseOptions, label: str) -> Any:
    """``model``, or with ``--adapt N`` a copy adapted to ``pair``
    (:func:`crossview.api.adapt_to_pair`), announced by a ``note:`` and followed by a progress
    bar."""
    if not options.adapt:
        return model
    stderr.print(f"note: adapting {options.model} to {label} ({options.adapt} steps)",
                 markup=False, soft_wrap=True)
    with bars.Progress(bars.TextColumn("adapting"), bars.BarColumn(),
                       bars.MofNCompleteColumn(), bars.TimeRemainingColumn(), console=stderr,
                       transient=True, disable=not stderr.is_terminal) as bar:
        steps = bar.add_task("adapt", total=options.adapt)
        return api.adapt_to_pair(model, *pair, task,
                                 settings=api.adaptation_settings(
                                     model, task, options.adapt, options.fuse,
                                     options.self_fuse),
                                 lri=options.lri, device=options.device,
                                 on_step=lambda step, _: bar.update(steps, completed=step))


def output_names(pairs: list[tuple[Path, Path]]) -> list[str]:
    """A unique output stem per pair: the first file's stem, else ``parent_stem``, else numbered."""
    for naming in (lambda p: p.stem, lambda p: f"{p.parent.name}_{p.stem}"):
        names = [naming(a) for a, _ in pairs]
        if len(set(names)) == len(names):
            return names
    return [f"{i:05d}_{a.stem}" for i, (a, _) in enumerate(pairs)]


def find_jobs(task: str, first: str, second: str | None, frames: FrameRange | None = None
              ) -> tuple[list[PairJob] | Iterator[PairJob], int, bool]:
    """The pairs to run as ``(jobs, count, single)``: file pairs (:func:`find_pairs`, named by
    :func:`output_names`, decoded when run) or, for flow with one video file or one folder of
    frames, its consecutive frames within ``frames`` (a video's pairs are named
    ``STEM_000000`` for frames 0 and 1, ... by the first frame's index; ``count`` 0 when the
    container does not say). ``single``: exactly two image files."""
    sequence = second is None and task == "flow" and (api.is_video(first)
                                                      or Path(first).is_dir())
    if not sequence and (second is None or api.is_video(first)):
        raise UserError("give two images, directories or patterns (flow also takes one video "
                        f"file or one folder of frames), got {first!r}"
                        + (f" and {second!r}" if second else " alone"))
    if not sequence and frames is not None:
        raise UserError(f"{frames} needs one video file or one folder of frames, not two inputs")
    frames = frames or FrameRange()
    if sequence and api.is_video(first):
        info = api.open_video(first, min_frames=2, purpose="flow pairs consecutive frames")
        pairs = _video_pairs(info.path, frames)
        # the first pair is decoded before the model loads: a range past the video's end fails
        # first, and the run goes on from there
        head = next(pairs)
        return itertools.chain([head], pairs), _pair_count(info.frames, frames), False
    pairs = _folder_pairs(Path(first), frames) if sequence else find_pairs(first, second)
    jobs = [PairJob(name, f"{a} and {b}", functools.partial(read_pair, a, b))
            for name, (a, b) in zip(output_names(pairs), pairs, strict=True)]
    return jobs, len(jobs), len(jobs) == 1 and Path(first).is_file()


def _folder_pairs(folder: Path, frames: FrameRange) -> list[tuple[Path, Path]]:
    """The pairs of consecutive frames of ``folder`` (images in name order) within
    ``frames``."""
    images = _images_in(folder)
    picked = [p for i, p in enumerate(images) if frames.picks(i)]
    if len(picked) < 2:
        raise frames.too_few(folder, len(images))
    return list(itertools.pairwise(picked))


def _pair_count(total: int, frames: FrameRange) -> int:
    """How many pairs ``frames`` gives of a video of ``total`` frames (0: unknown)."""
    stop = total if frames.stop is None else min(frames.stop, total)
    return max(len(range(frames.start, stop, frames.stride)) - 1, 0)


def _video_pairs(path: Path, frames: FrameRange) -> Iterator[PairJob]:
    """Consecutive frames of a video within ``frames`` as pairs, decoded as the run goes; a
    :class:`UserError` when the video ends before the range's second frame."""
    previous, total = None, 0
    for index, frame in enumerate(api.video_frames(path)):
        total = index + 1
        if frames.stop is not None and index >= frames.stop:
            return
        if not frames.picks(index):
            continue
        if previous is not None:
            yield PairJob(f"{path.stem}_{previous[0]:06d}",
                          f"{path} frames {previous[0]} and {index}",
                          functools.partial(tuple, (previous[1], frame)))
        previous = index, frame
    if previous is None or previous[0] == frames.start:  # fewer than two frames picked
        raise frames.too_few(path, total)


def run_dense(task: str, first: str, second: str | None, options: DenseOptions, *,
              views: tuple[str, str], tensors: Views,
              extras: Sequence[ExtraOutput] = (), jobs: JobFinder | None = None,
              warm_start: bool = False) -> list[str]:
    """Check everything, load the model, run every pair and write its outputs; return the
    pairs' names in order, every pair's files then being there (written now or, with
    ``--skip-existing``, before).

    The files of the pair named NAME are NAME_VIEW* for the first of ``views`` (and the second
    with ``--save-right``); ``tensors(result)`` gives their tensors; then those of each of
    ``extras`` (checked on each pair's images before it runs). One pair is all or
    nothing (exit code 2 on error); many pairs are published pair by pair
    (:func:`crossview.cli.batch.run_batch`, which exits instead of returning when a pair
    failed or the run was stopped). ``jobs()`` finds the pairs instead of :func:`find_jobs`
    (stereo videos: :mod:`crossview.cli.stereo_frames`); with ``warm_start`` (stereo) the
    pairs are one rig's frames (:class:`crossview.api.StereoSequence`): each starts from the
    previous pair's disparity, and the rows' offset is measured every
    :data:`crossview.api.ROWS_MEASURED_EVERY` pairs.
    """
    size = parse_size(options.size) if options.size else None
    api.check_run_settings(options.device, "--device")
    api.check_min_confidence(options.min_confidence, "--min-confidence")
    kind = "disparity" if task == "stereo" else "flow"
    raw_suffix(options.fmt, kind)  # a format that cannot hold the result fails first
    jobs, count, single = (find_jobs(task, first, second, options.frames) if jobs is None
                           else jobs())
    estimate = (api.StereoSequence().estimate if warm_start else api.estimate_disparity) \
        if task == "stereo" else api.estimate_flow

    def destinations(job: PairJob) -> list[Path]:
        return [options.out_dir / f for f in pair_file_names(job.name, views, kind, options)
                + [f for extra in extras for f in extra.file_names(job.name)]]

    if isinstance(jobs, list):
        check_output_files([d for job in jobs for d in destinations(job)])
    else:
        check_output_files(destinations(PairJob(Path(first).stem, "", tuple)))
    exists = (lambda job: all(p.is_file() for p in destinations(job))) \
        if options.skip_existing else None
    if single and exists is not None and exists(jobs[0]):
        stdout.print(BatchSummary(skipped=1).lines(options.out_dir)[0], markup=False,
                     soft_wrap=True)
        return [jobs[0].name]
    pair = jobs[0].load() if single else None  # a bad image fails before the model loads
    for extra in extras if pair is not None else ():
        extra.check([pair])
    model = api.load_task_model(options.model, task, options.weights, purpose=f"crossview {task}",
                                device=options.device, download=options.download)
    advice = api.MemoryAdvice("give a smaller --size HxW" if size is not None else
                              "run at a lower resolution with --size HxW, or give smaller images",
                              "--no-refine")

    noted: list[str] = []  # the unused network's note, given once a run

    def run(job: PairJob, images: Pair | None = None) -> None:
        if images is None:
            images = job.load()
            for extra in extras:
                extra.check([images])
        with staged_files(destinations(job)) as staged:
            try:
                try:
                    result = estimate(*images, model=adapted_model(task, model, images, options,
                                                                   job.label),
                                      device=options.device,
                                      precision=options.precision, lri=options.lri, size=size,
                                      refine=options.refine, advice=advice,
                                      min_confidence=options.min_confidence,
                                      **({} if options.fuse is None else {"fuse": options.fuse}),
                                      **({} if options.preset is None
                                         else {"preset": options.preset}),
                                      **({"self_fuse": True} if options.self_fuse else {}))
                except api.NonFiniteError:  # the fields diverged inside the network
                    raise UserError(f"{options.model_inputs()} gave non-finite fields (NaN or "
                                    "infinity)") from None
                # writers check what they are given (finite where valid) before any write
                writers = pair_writers(images, tensors(result), kind, options) + [
                    w for extra in extras for w in extra.writers(images, result)]
            except UserError as error:
                raise UserError(f"{job.label}: {error} (no output written)") from None
            for path, write in zip(staged, writers, strict=True):
                write(path)
        note = unused_network_note(options, getattr(result, "network_share", None), job.label)
        if note is not None and not noted:
            noted.append(note)
            stderr.print(note, markup=False, soft_wrap=True)

    if single:
        run(jobs[0], pair)
        stdout.print(f"wrote 1 pair(s) to {options.out_dir}")
        return [jobs[0].name]
    names: list[str] = []
    run_batch((names.append(job.name) or job for job in jobs), count, run, options.out_dir,
              exists=exists)
    return names


def raw_writer(array: np.ndarray, fmt: str, kind: str) -> tuple[str, Callable[[Path], None]]:
    """``(suffix, writer)`` of a disparity ``[H, W]`` or flow ``[H, W, 2]`` in format ``fmt``."""
    if fmt == "npy":
        return ".npy", lambda path: api.write_npy(path, array)
    if fmt == "pfm":
        values = array if kind == "disparity" else np.dstack([array, np.zeros(array.shape[:2])])
        return ".pfm", lambda path: api.write_pfm(path, values)
    if fmt == "png16" and kind == "disparity":
        clipped = np.clip(array, 0, 65535 / 256)
        return ".png", lambda path: api.write_kitti_disparity(path, clipped, clipped > 0)
    if fmt == "png16":
        clipped = np.clip(array, -512, 511.98)
        return ".png", lambda path: api.write_kitti_flow(path, clipped)
    if fmt == "flo" and kind == "flow":
        return ".flo", lambda path: api.write_flo(path, array)
    allowed = "pfm, png16, npy" + (", flo" if kind == "flow" else "")
    raise UserError(f"--format {fmt!r} cannot hold {kind}; choose one of {allowed}")


def picture_writer(picture: np.ndarray) -> Callable[[Path], None]:
    return lambda path: api.write_image(path, picture)


def pair_file_names(name: str, views: tuple[str, str], kind: str, options: DenseOptions
                    ) -> list[str]:
    """The files of the pair named ``name``, in the order of :func:`pair_writers`: per view
    (the second with ``--save-right`` only) the raw result, colour picture, mask (and
    self-rpos picture)."""
    suffix = raw_suffix(options.fmt, kind)
    ends = [suffix, "_color.png", "_noc.png", *(["_rpos.png"] if options.save_rpos else [])]
    return [f"{name}_{view}{end}" for view in views[: 2 if options.save_right else 1]
            for end in ends]


def pair_writers(images: Pair, views: list[ViewTensors], kind: str,
                 options: DenseOptions) -> list[Callable[[Path], None]]:
    """Writers of one pair's files (see :func:`pair_file_names`): ``views`` holds ``(raw
    [B, ...], valid [B, H, W], self_rpos [B, H, W, 2])`` of the first and the second view;
    batch row 0 is written. A raw result that is not finite where it is valid is a
    :class:`UserError` naming :meth:`DenseOptions.model_inputs`."""
    writers = []
    for tensors, image in zip(views[: 2 if options.save_right else 1], images, strict=False):
        raw, valid, rpos = (t[0].cpu().numpy() for t in tensors)
        check_finite(raw, f"{options.model_inputs()} gave non-finite {kind} at valid pixels",
                     valid if raw.ndim == 2 else valid[..., None])
        colour = (viz.disparity_to_colour(raw) if kind == "disparity"
                  else viz.flow_to_colour(raw, key=True))
        writers += [raw_writer(raw, options.fmt, kind)[1], picture_writer(colour),
                    picture_writer(viz.mask_to_image(valid))]
        if options.save_rpos:
            writers.append(picture_writer(viz.self_rpos_picture(rpos, image)))
    return writers


def raw_suffix(fmt: str, kind: str) -> str:
    """The file suffix of a raw ``kind`` in format ``fmt``; a :class:`UserError` if ``fmt``
    cannot hold ``kind``."""
    return raw_writer(np.zeros((1, 1) if kind == "disparity" else (1, 1, 2), np.float32), fmt,
                      kind)[0]
