"""``crossview demo``: its help loads neither Gradio nor torch, without Gradio it names the extra
to install, and a port in use is one line with exit code 2 (none of these needs Gradio)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap

import pytest

from cli_runner import run_cli
from hang_guard import HANG_GUARD_SECONDS


def _run(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script), *args],
                          capture_output=True, text=True, timeout=HANG_GUARD_SECONDS,
                          env={**os.environ, "COLUMNS": "80"})


def test_its_help_loads_neither_gradio_nor_torch() -> None:
    done = _run("""
        import sys
        from crossview.cli.app import main
        try:
            main(["demo", "--help"])
        except SystemExit as end:
            assert end.code == 0, end.code
        print(sorted({m.split(".")[0] for m in sys.modules} & {"gradio", "torch", "numpy"}))
    """)
    assert done.returncode == 0, done.stderr
    assert "--port" in done.stdout and "--share" in done.stdout and "needs the" in done.stdout
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_without_gradio_it_names_the_extra_to_install() -> None:
    done = _run("""
        import sys
        sys.modules["gradio"] = None  # `import gradio` fails as if it were not installed
        from crossview.cli.app import main
        main(sys.argv[1:])
    """, "demo", "--port", "1")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == ("error: this command needs the optional package 'gradio': "
                           'pip install "crossview[demo]"\n')


def test_a_port_in_use_is_one_line(capsys: pytest.CaptureFixture[str],
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from crossview.cli import demo

    monkeypatch.setattr(demo, "require_gradio", lambda: None)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, out, err = run_cli(["demo", "--port", str(port)], capsys)
    assert (code, out) == (2, "")
    assert err == (f"error: cannot serve on 127.0.0.1:{port}: the port is in use: choose "
                   "another with --port\n")
    code, _, err = run_cli(["demo", "--port", "70000"], capsys)
    assert (code, err) == (2, "error: --port must be 1..65535, got 70000\n")
