"""ONNX export: files run by onnxruntime give PyTorch's outputs (at the traced size and at
another size: dynamic height and width), the graph holds only standard ONNX operators, the
command and the benchmark report the differences, and bad input is one line with exit code 2.

Exporting is slow (torch.export, then translation: about a minute per model on 2 free cores),
so each model is exported once per module, with small random-weight configurations.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from crossview.cli.app import main
from crossview.export.onnx import (
    example_inputs,
    export_module,
    export_onnx,
    fractions_beyond,
    max_differences,
    onnx_session,
    run_onnx,
)
from crossview.models.matchstereo import MatchStereo, MatchStereoConfig
from crossview.models.matchstereo.bundle import write_bundle
from crossview.models.registry import ModelSpec, register_model
from crossview.models.transformatcher import TransforMatcher

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")

pytestmark = pytest.mark.slow

SMALL = MatchStereoConfig(dims=(8, 16, 16, 24), encoder_depths=(1, 1, 1, 1),
                          decoder_layers=(1, 1, 1, 1), heads=2, encoder_head=0)
for _task in ("stereo", "flow"):
    register_model(ModelSpec(f"onnx-test-{_task}", lambda t=_task: MatchStereo(SMALL, task=t),
                             _task), replace=True)
# float32 against float32 in another runtime: sums in other orders, measured up to 1.4e-4 px
# on these fields (values up to ~100 px). A few pixels may differ more: the fields pass through
# steps (the initial regression's arg-max, a window's floor) that a rounding difference can flip
# where two candidates nearly tie, which random weights make likely (measured: 144 of 229376
# field values at 256x224, right view only, up to 0.23 px). So at most 0.1 % of the values may
# exceed the tolerance.
FIELD_ATOL = 1e-3
FRACTION = 1e-3


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as done:
        main(args)
    captured = capsys.readouterr()
    return done.value.code, captured.out, captured.err


@pytest.fixture(scope="module")
def stereo(tmp_path_factory: pytest.TempPathFactory) -> tuple[torch.nn.Module, Path]:
    """A small stereo model's weights, exported by ``crossview export onnx`` (dynamic sizes);
    returns the model and the file."""
    folder = tmp_path_factory.mktemp("onnx-stereo")
    torch.manual_seed(0)
    model = MatchStereo(SMALL).eval()
    weights, _ = write_bundle(model, folder / "w.safetensors", name="onnx-test-stereo",
                                task="stereo")
    with pytest.raises(SystemExit) as done:
        main(["export", "onnx", "--model", "onnx-test-stereo", "--weights", str(weights),
              "--size", "192x192", "-o", str(folder / "stereo.onnx")])
    assert done.value.code in (0, None)
    return model, folder / "stereo.onnx"


def _compare(model: torch.nn.Module, path: Path, size: tuple[int, int],
             tolerance: float = FIELD_ATOL) -> dict[str, float]:
    """The fraction of each output's values that onnxruntime gets more than ``tolerance`` off
    PyTorch's on a pair the trace did not see (masks: differing at all)."""
    module = export_module(model)
    pair = example_inputs(size, seed=5)
    with torch.inference_mode():
        expected = module(*pair)
    return fractions_beyond(expected, run_onnx(onnx_session(path), *pair), module.output_names,
                            tolerance)


@pytest.mark.parametrize("size", [(192, 192), (256, 224)])
def test_stereo_file_gives_pytorchs_outputs_at_any_multiple_of_32(
        stereo: tuple[torch.nn.Module, Path], size: tuple[int, int]) -> None:
    model, path = stereo
    differences = _compare(model, path, size)
    assert set(differences) == {"field", "disparity", "valid"}
    assert max(differences.values()) <= FRACTION, differences


def test_stereo_file_shapes_and_standard_operators(
        stereo: tuple[torch.nn.Module, Path]) -> None:
    _, path = stereo
    graph = onnx.load(str(path)).graph
    assert [i.name for i in graph.input] == ["image0", "image1"]
    assert [o.name for o in graph.output] == ["field", "disparity", "valid"]
    dims = [d.dim_param or d.dim_value for d in graph.input[0].type.tensor_type.shape.dim]
    assert dims[:2] == [1, 3] and all(isinstance(d, str) for d in dims[2:])  # H, W dynamic
    domains = {node.domain for node in graph.node}
    assert domains <= {"", "ai.onnx"}, domains  # no custom op: any runtime runs it
    assert "Gather" in {node.op_type for node in graph.node}
    outputs = run_onnx(onnx_session(path), *example_inputs((224, 192)))
    assert [o.shape for o in outputs] == [(2, 224, 192, 2), (1, 224, 192), (1, 224, 192)]
    assert outputs[2].dtype == np.bool_ and (outputs[1] >= 0).all()


def test_the_command_reports_its_difference_from_pytorch(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        stereo: tuple[torch.nn.Module, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """The printed differences are those of the file on a pair it was not traced on (the
    export itself is replaced by a copy of the module's file)."""
    model, path = stereo
    weights, _ = write_bundle(model, tmp_path / "w.safetensors", name="onnx-test-stereo",
                                task="stereo")
    from crossview.export import onnx as onnx_export

    def copy(network: torch.nn.Module, out: Path, size: tuple, dynamic: bool) -> tuple:
        shutil.copyfile(path, out)
        return ("field", "disparity", "valid")

    monkeypatch.setattr(onnx_export, "export_onnx",
                        lambda n, o, s, dynamic: copy(n, o, s, dynamic))
    code, out, err = _run(["export", "onnx", "--model", "onnx-test-stereo", "--weights",
                           str(weights), "--size", "192x192", "-o", str(tmp_path / "m.onnx")],
                          capsys)
    assert code in (0, None), err
    lines = out.splitlines()
    assert lines[0] == (f"wrote {tmp_path / 'm.onnx'} (inputs image0, image1; outputs field, "
                        "disparity, valid)")
    pair = example_inputs((192, 192), seed=1)
    with torch.inference_mode():
        expected = export_module(model)(*pair)
    want = max_differences(expected, run_onnx(onnx_session(path), *pair),
                           ("field", "disparity", "valid"))
    assert lines[1] == "max |onnxruntime - pytorch|: " + ", ".join(
        f"{name} {value:.3g}" for name, value in want.items())


def test_flow_file_gives_pytorchs_outputs(tmp_path: Path) -> None:
    torch.manual_seed(1)
    model = MatchStereo(SMALL, task="flow").eval()
    assert export_onnx(model, tmp_path / "flow.onnx", (192, 192), dynamic=False) == (
        "field", "flow", "valid")
    differences = _compare(model, tmp_path / "flow.onnx", (192, 192))
    assert set(differences) == {"field", "flow", "valid"}
    assert max(differences.values()) <= FRACTION, differences


def test_transformatcher_file_gives_pytorchs_coords(tmp_path: Path) -> None:
    torch.manual_seed(2)
    model = TransforMatcher(depth=1).eval()
    model.task = "semantic"
    assert export_onnx(model, tmp_path / "tm.onnx", (240, 240)) == ("coords",)
    differences = _compare(model, tmp_path / "tm.onnx", (240, 240), tolerance=1e-4)
    assert differences == {"coords": 0.0}  # normalised coordinates in [-1, 1], all within 1e-4


def test_bench_export_rows(stereo: tuple[torch.nn.Module, Path],
                           monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                           capsys: pytest.CaptureFixture[str]) -> None:
    """``crossview bench export``: one row per runtime, the PyTorch row differing by 0 from
    itself, the onnxruntime row by what the file's own comparison gives (the export is
    replaced by a copy of the module's file)."""
    model, path = stereo
    from crossview.bench import export as bench

    monkeypatch.setattr(bench, "export_onnx",
                        lambda network, out, size: shutil.copyfile(path, out) and (
                            "field", "disparity", "valid"))
    weights, _ = write_bundle(model, tmp_path / "w.safetensors", name="onnx-test-stereo",
                                task="stereo")
    threads = torch.get_num_threads()
    code, out, err = _run(["bench", "export", "--model", "onnx-test-stereo", "--weights",
                           str(weights), "--size", "192x192", "--repeats", "1", "--threads",
                           "1", "--json", str(tmp_path / "b.json")], capsys)
    assert code in (0, None), err
    assert torch.get_num_threads() == threads  # later tests keep theirs (bitwise resumes)
    report = json.loads((tmp_path / "b.json").read_text())
    rows = {row["runtime"]: row for row in report["rows"]}
    assert len(rows) == 3 and "onnxruntime" in out
    assert rows["pytorch (export MatchAttention)"]["max_abs_diff"]["disparity"] <= FIELD_ATOL
    first = next(iter(rows.values()))
    assert first["max_abs_diff"] == {"field": 0.0, "disparity": 0.0, "valid": 0.0}
    pair = example_inputs((192, 192), seed=1)
    torch.set_num_threads(1)  # as the bench ran: float32 sums depend on the thread count
    try:
        with torch.inference_mode():
            expected = export_module(model)(*pair)
        got = run_onnx(onnx_session(path, 1), *pair)
    finally:
        torch.set_num_threads(threads)
    assert rows["onnxruntime cpu"]["max_abs_diff"] == max_differences(
        expected, got, ("field", "disparity", "valid"))
