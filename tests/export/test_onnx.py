"""ONNX export: the default file gives what ``crossview.estimate_disparity`` gives with the
model's defaults (padding, low-resolution initialisation and refinement inside, recorded in its
metadata), a bare network's file gives PyTorch's outputs (at the traced size and at another
size: dynamic height and width), the graph holds only standard ONNX operators, the command and
the benchmark report the differences, and bad input is one line with exit code 2.

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

import crossview
from crossview.cli.app import main
from crossview.export.onnx import (
    compare_with_crossview,
    example_inputs,
    export_module,
    export_onnx,
    file_metadata,
    max_differences,
    onnx_session,
    run_onnx,
)
from crossview.models.matchstereo import MatchStereo
from crossview.models.matchstereo.bundle import write_bundle
from crossview.models.registry import ModelSpec, register_model
from crossview.models.transformatcher import TransforMatcher
from small_networks import SMALL

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")

pytestmark = pytest.mark.slow

for _task in ("stereo", "flow"):
    register_model(ModelSpec(f"onnx-test-{_task}", lambda t=_task: MatchStereo(SMALL, task=t),
                             _task), replace=True)
# refines and starts from a half-resolution pass by default, as the bundled hybrids
register_model(ModelSpec("onnx-test-default", lambda: MatchStereo(SMALL), "stereo", refine=True,
                         lri=True), replace=True)
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
    """A small stereo model's weights, exported by ``crossview export onnx --bare`` (dynamic
    sizes); returns the model and the file."""
    folder = tmp_path_factory.mktemp("onnx-stereo")
    torch.manual_seed(0)
    model = MatchStereo(SMALL).eval()
    weights, _ = write_bundle(model, folder / "w.safetensors", name="onnx-test-stereo",
                                task="stereo")
    with pytest.raises(SystemExit) as done:
        main(["export", "onnx", "--model", "onnx-test-stereo", "--weights", str(weights),
              "--size", "192x192", "--bare", "-o", str(folder / "stereo.onnx")])
    assert done.value.code in (0, None)
    return model, folder / "stereo.onnx"


def _compare(model: torch.nn.Module, path: Path, size: tuple[int, int],
             tolerance: float = FIELD_ATOL) -> dict[str, float]:
    """The fraction of each output's values that onnxruntime gets more than ``tolerance`` off
    PyTorch's on a pair the trace did not see (masks: differing at all)."""
    module = export_module(model, bare=model.task != "semantic")
    pair = example_inputs(size, seed=5)
    with torch.inference_mode():
        expected = module(*pair)
    got = run_onnx(onnx_session(path), *pair)
    fractions = {}
    for name, want, have in zip(module.output_names, expected, got, strict=True):
        want = want.numpy()
        assert want.shape == have.shape, (name, want.shape, have.shape)
        if want.dtype == np.bool_:
            off = want != have
        else:
            off = np.abs(want.astype(np.float64) - have) > tolerance
        fractions[name] = float(off.mean())
    return fractions


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


def test_the_command_reports_its_difference_from_crossview(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        stereo: tuple[torch.nn.Module, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """The printed differences are those of the file against ``crossview stereo`` on a pair it
    was not traced on (the export itself is replaced by a copy of the module's file)."""
    model, path = stereo
    weights, _ = write_bundle(model, tmp_path / "w.safetensors", name="onnx-test-stereo",
                                task="stereo")
    from crossview.export import onnx as onnx_export

    def copy(network: torch.nn.Module, out: Path, size: tuple, **options: object) -> tuple:
        shutil.copyfile(path, out)
        return ("field", "disparity", "valid")

    monkeypatch.setattr(onnx_export, "export_onnx", copy)
    code, out, err = _run(["export", "onnx", "--model", "onnx-test-stereo", "--weights",
                           str(weights), "--size", "192x192", "--bare", "-o",
                           str(tmp_path / "m.onnx")], capsys)
    assert code in (0, None), err
    lines = out.splitlines()
    assert lines[0] == (f"wrote {tmp_path / 'm.onnx'} (inputs image0, image1; outputs field, "
                        "disparity, valid)")
    assert lines[1] == ("the file computes what `crossview stereo --model onnx-test-stereo` "
                        "gives at any multiples of 32")
    want = compare_with_crossview(export_module(model, bare=True), path, (192, 192))
    assert lines[2] == "|onnxruntime - crossview stereo --model onnx-test-stereo|: " + "; ".join(
        f"{name} mean {mean:.3g} max {largest:.3g}" for name, (mean, largest) in want.items())
    assert "note: checking m.onnx with onnxruntime against crossview" in err


def _textured_pair(size: tuple[int, int], shift: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A smooth random texture ``[1, 3, H, W]`` (0..255) and the same ``shift`` px to the left:
    a pair with a true disparity of ``shift`` px, on which refinement has gradients to use."""
    h, w = size
    generator = torch.Generator().manual_seed(7)
    coarse = torch.rand(1, 3, h // 8 + 2, (w + shift) // 8 + 2, generator=generator)
    texture = torch.nn.functional.interpolate(coarse, size=(h, w + shift), mode="bicubic",
                                              align_corners=True).clamp(0, 1) * 255
    return texture[..., shift:].contiguous(), texture[..., :w].contiguous()


def test_the_default_file_gives_what_estimate_disparity_gives(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A model that refines and starts from a half-resolution pass by default, exported by the
    command at a size that is no multiple of 32: onnxruntime gives
    ``crossview.estimate_disparity`` with the defaults (the bare network is more than 0.05 px
    off on average)."""
    torch.manual_seed(3)
    model = MatchStereo(SMALL).eval()
    weights, _ = write_bundle(model, tmp_path / "w.safetensors", name="onnx-test-default",
                              task="stereo")
    size = (330, 340)  # padded inside; its half (165x170) runs the half-resolution pass
    path = tmp_path / "default.onnx"
    code, out, err = _run(["export", "onnx", "--model", "onnx-test-default", "--weights",
                           str(weights), "--size", "330x340", "-o", str(path)], capsys)
    assert code in (0, None), err
    for step in ("tracing", "translating", "checking"):
        assert any(line.startswith(f"note: {step} ") for line in err.splitlines()), err
    assert "the file computes what `crossview stereo --model onnx-test-default` gives at " \
        "330x340" in out
    assert "crossview.runtime" not in out  # the network alone: --self-fuse needs its runs
    meta = {p.key: p.value for p in onnx.load(str(path)).metadata_props}
    assert (meta["crossview.lri"], meta["crossview.refine"], meta["crossview.lacks"]) == (
        "on", "on", "")
    left, right = _textured_pair(size, 3)
    loaded = crossview.load_model("onnx-test-default", weights)
    expected = crossview.estimate_disparity(left, right, model=loaded).disparity.numpy()
    got = run_onnx(onnx_session(path), left, right)[1]
    difference = np.abs(got - expected)
    print(f"onnxruntime - estimate_disparity: mean {difference.mean():.3g} px, max "
          f"{difference.max():.3g} px")
    # measured: mean 1.2e-4 px, max 0.033 px (the refinement's Gauss-Newton steps divide by
    # windowed sums, which carry the runtimes' rounding differences a little further)
    assert got.shape == (1, *size) and difference.mean() < 1e-3 and difference.max() < 0.1
    bare = crossview.estimate_disparity(left, right, model=loaded, lri=False,
                                        refine=False).disparity.numpy()
    assert np.abs(bare - expected).mean() > 0.05  # the defaults matter on this pair


def test_an_export_without_a_default_step_says_so(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``--no-refine`` on a model that refines by default: a note, and the file's metadata
    records what it lacks (the export and its check are replaced: only the wording is
    tested)."""
    from crossview.export import onnx as onnx_export

    monkeypatch.setattr(onnx_export, "export_onnx", lambda *a, **k: ("field", "disparity",
                                                                     "valid"))
    code, out, err = _run(["export", "onnx", "--model", "onnx-test-default", "--size",
                           "330x340", "--no-refine", "--no-check", "-o",
                           str(tmp_path / "m.onnx")], capsys)
    assert code in (0, None), err
    assert ("note: the file lacks the photometric refinement that `crossview stereo --model "
            "onnx-test-default` does by default (recorded in its metadata, crossview.lacks)"
            ) in err.splitlines()
    assert "`crossview stereo --model onnx-test-default --no-refine` gives at 330x340" in out
    meta = file_metadata(export_module(crossview.build_model("onnx-test-default"),
                                       refine=False), (330, 340), False)
    assert meta["crossview.lacks"] == "photometric refinement" and meta["crossview.lri"] == "on"


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
