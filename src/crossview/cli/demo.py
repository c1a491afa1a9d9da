"""``crossview demo``: the local web page of :mod:`crossview.demo` (Gradio, ``pip install
"crossview[demo]"``), served on ``--host``:``--port`` until Ctrl-C.

The port is checked free before Gradio loads (a port in use is one line and exit code 2). The
page runs offline; ``--share`` (off by default) also publishes it through a public Gradio link,
which needs the network (Gradio's tunnel client and its relay server).
"""

from __future__ import annotations

import errno
import importlib.util
import socket
from typing import Annotated

import typer

from crossview.console import stderr, stdout
from crossview.errors import UserError
from crossview.lazy import lazy_import

page = lazy_import("crossview.demo.app")  # Gradio (pip install "crossview[demo]"), torch


def check_port(host: str, port: int) -> None:
    """A :class:`UserError` unless ``host:port`` can be listened on."""
    if not 0 < port < 65536:
        raise UserError(f"--port must be 1..65535, got {port}")
    try:
        address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except socket.gaierror as error:
        raise UserError(f"--host {host!r} is not an address of this computer ({error})") from None
    with socket.socket(address[0], socket.SOCK_STREAM) as probe:
        # as the server binds: connections of an earlier run still closing do not count
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address[4])
        except OSError as error:
            taken = error.errno == errno.EADDRINUSE
            raise UserError(f"cannot serve on {host}:{port}: "
                            + ("the port is in use: choose another with --port" if taken
                               else f"{error.strerror}")) from None


def require_gradio() -> None:
    """``ModuleNotFoundError`` for ``gradio`` when it is not installed, before anything loads
    (the runner turns it into one line naming ``crossview[demo]``)."""
    try:
        found = importlib.util.find_spec("gradio") is not None
    except ValueError:  # imported before and then taken out of sys.modules
        found = False
    if not found:
        raise ModuleNotFoundError("No module named 'gradio'", name="gradio")


def demo_command(
    port: Annotated[int, typer.Option("--port", help="Port to serve the page on.")] = 7860,
    host: Annotated[str, typer.Option(
        "--host", help="Address to serve on: 127.0.0.1 for this computer only, 0.0.0.0 for "
        "the local network too.")] = "127.0.0.1",
    share: Annotated[bool, typer.Option(
        "--share", help="Also publish the page through a public Gradio link (needs the "
        "network; anyone with the link can use it).")] = False,
) -> None:
    """Serve a local web page (pip install "crossview[demo]") to try stereo, flow and matching
    on your own images, offline.

    Tabs: Stereo (disparity, confidence, depth and a 3D point cloud; the sample pair; rectify
    photographs taken by hand), Flow (two frames or a short video) and Matching (click points
    on a source image, see them on a target). Stop it with Ctrl-C.
    """
    require_gradio()
    check_port(host, port)
    stderr.print("note: loading the demo page (Gradio) ...", markup=False, soft_wrap=True)
    running = page.serve(host, port, share)
    stdout.print(f"crossview demo on {running.local_url}"
                 + (f" and {running.share_url}" if share and running.share_url else "")
                 + " (Ctrl-C stops it)", markup=False, soft_wrap=True)
    running.block_thread()
