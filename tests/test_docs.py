"""The documents name only what a user can find: every repository path in README.md, docs/*.md,
the study pages under docs/results/ and samples/README.md exists, or the same document gives the
command that writes it (an output option: ``--json``, ``--export``, ``--run-dir``,
``--cache-dir``, ``-o``); every relative link resolves; no configuration calls a model the
default that is not."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from crossview.defaults import DEFAULT_FLOW_MODEL, DEFAULT_STEREO_MODEL

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = [ROOT / "README.md", ROOT / "samples" / "README.md",
             *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")  # a markdown link's target
PATH = re.compile(r"(?<![\w/.-])((?:docs|runs|configs|samples|src|tests|bench-results|results)"
                  r"/[A-Za-z0-9_./-]*[A-Za-z0-9_])")
OUTPUT = re.compile(r"(?:--json|--export|--run-dir|--cache-dir|-o|--out)[ =]+(\S+)")
SCRIPT = re.compile(r"python docs/results/[\w/-]+\.py ([^`]*)`")  # its arguments: what it writes
# the worked example of a new model family (docs/conventions.md): files the reader creates
EXAMPLES = {"src/crossview/models/tinyflow/model.py", "src/crossview/models/tinyflow/specs.py"}
# run directories of the configurations, which `crossview train CONFIG` writes
RUN_DIRS = {match for config in (ROOT / "configs").glob("*.yaml")
            for match in re.findall(r"out_dir:\s*(\S+)", config.read_text())}
PLACEHOLDER = re.compile(r"[A-Z]{3,}|/.$")  # NAME, SUBJECT; "samples/s" is a unit


def _written_by_a_command(text: str) -> set[str]:
    """The paths an output option names in ``text`` (and the folders they lie in)."""
    written = set()
    for target in OUTPUT.findall(text) + [word for arguments in SCRIPT.findall(text)
                                          for word in arguments.split()]:
        target = target.strip("`'\",;)")
        written.add(target)
        parts = Path(target).parts
        written.update(str(Path(*parts[:i])) for i in range(1, len(parts)))
    return written


def _in_a_run_dir(path: str) -> bool:
    """A configuration's run directory or a file in it (``crossview train`` writes both)."""
    return any(path == run or path.startswith(f"{run}/") for run in RUN_DIRS)


def _missing(document: Path) -> list[str]:
    text = document.read_text()
    written = _written_by_a_command(text)
    missing = []
    for path in sorted(set(PATH.findall(text))):
        if PLACEHOLDER.search(path) or path in written | EXAMPLES or _in_a_run_dir(path):
            continue
        candidates = [ROOT / path, document.parent / path]
        if any(c.exists() or any(c.parent.glob(c.name + "*")) for c in candidates):
            continue  # exists (a name cut at a brace or a star names its files' start)
        missing.append(path)
    return missing


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_path_a_document_names_exists_or_is_written_by_its_commands(document: Path
                                                                           ) -> None:
    assert _missing(document) == []


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_of_a_document_resolves(document: Path) -> None:
    targets = [target.split("#")[0] for target in LINK.findall(document.read_text())
               if not target.startswith(("http://", "https://", "mailto:", "#"))]
    assert [t for t in targets if not (document.parent / t).exists()] == []


def test_no_configuration_calls_another_model_the_default() -> None:
    for config in sorted((ROOT / "configs").glob("*.yaml")):
        header = "".join(line for line in config.read_text().splitlines(keepends=True)
                         if line.startswith("#"))
        for task, default in (("stereo", DEFAULT_STEREO_MODEL), ("flow", DEFAULT_FLOW_MODEL)):
            if re.search(rf"bundled default {task} model", header) and not (
                    config.stem.startswith(default)):
                pytest.fail(f"{config.name} calls its model the default {task} model; the "
                            f"default is {default}")
