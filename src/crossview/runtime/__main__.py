"""``python -m crossview.runtime FILE LEFT RIGHT -o DISPARITY.npy``: the fused default stereo
model's answer from an exported file, without torch (:class:`crossview.runtime.FusedStereo`);
with ``--self-fuse``, the network's self-fused answer from a file of the network alone
(``crossview export onnx --self-fuse``; :class:`crossview.runtime.SelfFusedStereo`).

Writes the left view's disparity ``[H, W]`` float32 px as ``.npy`` (``--right`` also the right
view's), atomically. Bad input (a missing or damaged file, images that are not images or not
of the file's size) is one ``error:`` line on stderr and exit code 2; what the library warns of
(a pair given right image first) a ``warning:`` line, as ``crossview stereo`` says it.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

import numpy as np

from crossview.errors import UserError
from crossview.library_log import library_log_to
from crossview.output import atomic_output
from crossview.runtime.self_fused import SelfFusedStereo
from crossview.runtime.stereo import FusedStereo


class _Parser(argparse.ArgumentParser):
    """argparse with its errors as one ``error:`` line and exit code 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        print(f"error: {message} (see python -m crossview.runtime --help)", file=sys.stderr)
        raise SystemExit(2)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m crossview.runtime",
                     description="The fused default stereo model's disparity from an ONNX file "
                                 "of `crossview export onnx` (numpy, OpenCV, onnxruntime; no "
                                 "torch); with --self-fuse, the network's self-fused answer "
                                 "from a --self-fuse file.")
    parser.add_argument("file", type=Path, help="the .onnx file (exported at the pair's size)")
    parser.add_argument("left", type=Path, help="the left image")
    parser.add_argument("right", type=Path, help="the right image")
    parser.add_argument("-o", "--out", type=Path, required=True,
                        help="the left view's disparity, .npy float32 [H, W] px")
    parser.add_argument("--right-out", type=Path, default=None,
                        help="also the right view's disparity, .npy")
    parser.add_argument("--threads", type=int, default=0,
                        help="onnxruntime's threads (0: its default)")
    parser.add_argument("--self-fuse", action="store_true",
                        help="FILE holds the network's runs on the pair and its mirror image "
                             "(crossview export onnx --self-fuse): fuse them and the views "
                             "with each other, as crossview stereo --self-fuse (no OpenCV "
                             "matcher)")
    return parser


def main(argv: list[str] | None = None) -> None:
    """Run the command on ``argv`` (default: the process's arguments); crossview's log
    warnings become ``warning: ...`` lines on stderr."""
    args = _parser().parse_args(argv)
    warnings = logging.StreamHandler(sys.stderr)
    warnings.setLevel(logging.WARNING)
    warnings.setFormatter(logging.Formatter("warning: %(message)s"))
    with library_log_to(warnings):
        _run(args)


def _run(args: argparse.Namespace) -> None:
    """The command on parsed arguments: write the disparities and a summary line."""
    try:
        for option, path in (("-o", args.out), ("--right-out", args.right_out)):
            if path is not None and path.suffix != ".npy":
                raise UserError(f"{option} {path}: give a .npy file")
        start = time.perf_counter()
        stereo = (SelfFusedStereo if args.self_fuse else FusedStereo)(args.file, args.threads)
        result = stereo(args.left, args.right)
        seconds = time.perf_counter() - start
        for path, disparity in ((args.out, result.left), (args.right_out, result.right)):
            if path is not None:
                with atomic_output(path) as staged, open(staged, "wb") as handle:
                    np.save(handle, disparity)
    except UserError as error:
        print(f"error: {error}", file=sys.stderr)
        raise SystemExit(2) from None
    h, w = result.left.shape
    print(f"wrote {args.out} ({h}x{w} float32 px, left view; rows lined up by "
          f"{result.row_offset:.2f} px; {seconds:.2f} s)")


if __name__ == "__main__":
    main()
