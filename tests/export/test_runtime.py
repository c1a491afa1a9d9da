"""crossview.runtime: an exported fused stereo file run with numpy, OpenCV and onnxruntime gives
what ``predict_fields`` (``crossview stereo``) gives, its record round-trips, nothing of it
imports torch (it runs with torch blocked), the one step it does not share (resizing to a working
size) is measured, and bad input is one ``error:`` line with exit code 2.

One small random-weight model is exported once per module (about half a minute on 2 cores)."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from PIL import Image

import crossview
from crossview.errors import UserError
from crossview.export.onnx import export_onnx, fused_module
from crossview.geometry.disparity import field_to_disparity
from crossview.models.dense.inference import _images_at, predict_fields
from crossview.models.matchstereo.specs import matchstereo_spec
from crossview.models.registry import FusedNetwork, register_model
from crossview.runtime import FusedStereo
from crossview.runtime.__main__ import main
from crossview.runtime.antialiased_shrink import antialiased_shrink, shrink_matrix
from crossview.runtime.fused_file import FusedFile
from offset_pairs import offset_pair, saved_pair
from small_networks import SMALL

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")

pytestmark = [pytest.mark.slow,
              pytest.mark.filterwarnings("ignore::crossview.api.RandomWeightsWarning")]

# the default's fused run (matchstereo-hybrid.json's fused_network), on a small network
FUSED = FusedNetwork(scale=0.75, lri=False, refine=False, max_pixels=700_000, align_px=0.0,
                     classical_runs=2, median_passes=(0, 1))
register_model(matchstereo_spec("runtime-test", SMALL, "stereo", fuse=True, lri=True,
                                refine=True, fused_network=FUSED), replace=True)
SIZE = (256, 288)  # its network at 0.75 (192x216) is the least size the model takes
DISPARITY = 7  # px


def _pair(offset: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """A textured pair of ``SIZE`` at 7 px of disparity, the right rows ``offset`` px down."""
    return offset_pair(offset, *SIZE, DISPARITY, seed=5)


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[torch.nn.Module, Path]:
    """The fused test model and its file at :data:`SIZE`."""
    torch.manual_seed(0)
    model = crossview.load_model("runtime-test")
    path = tmp_path_factory.mktemp("runtime") / "fused.onnx"
    export_onnx(model, path, SIZE)
    return model, path


@pytest.fixture(scope="module")
def pair_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return saved_pair(tmp_path_factory.mktemp("pair"), _pair())


def test_the_runtime_gives_what_predict_fields_gives(
        exported: tuple[torch.nn.Module, Path]) -> None:
    """Everything but the network is the same numpy code on the same inputs, so the two differ
    only by onnxruntime's float32 sums against torch's in the network (about 1e-4 px on these
    fields), which the fusion carries to its network pixels; a mask that flips on such a
    difference moves a pixel between the network and the row fill. Measured: mean 0 px, max
    0 px on this pair (SGBM answers every pixel); on the real development scenes mean below
    1e-6 px (docs/results/onnx-runtime). Held: mean below 1e-3 px, at most 0.1 % of the
    pixels more than 0.5 px off."""
    model, path = exported
    left, right = _pair()
    got = FusedStereo(path)(left, right)
    field = predict_fields(model, left, right, "stereo").field.numpy()
    assert got.row_offset == pytest.approx(1.0, abs=0.2)  # the rows were lined up
    for have, want in ((got.left, field_to_disparity(field[0])),
                       (got.right, field_to_disparity(field[1], "right"))):
        assert have.shape == SIZE and have.dtype == np.float32
        difference = np.abs(have - want)
        print(f"runtime - predict_fields: mean {difference.mean():.3g} px, max "
              f"{difference.max():.3g} px")
        assert difference.mean() < 1e-3 and (difference > 0.5).mean() <= 1e-3
    inner = got.left[16:-16, 16:-16]
    assert (np.abs(inner - DISPARITY) < 0.5).mean() > 0.9  # and it is the pair's disparity


def test_the_file_records_the_fused_run(exported: tuple[torch.nn.Module, Path]) -> None:
    model, path = exported
    meta = {p.key: p.value for p in onnx.load(str(path)).metadata_props}
    record = FusedFile.read(meta, str(path))
    assert record == fused_module(model, SIZE).fused
    assert (record.size, record.working_size, record.network_size) == (SIZE, SIZE, (192, 216))
    assert record.align_px == 0.0 and len(record.runs) == 2 and len(record.medians) == 2
    assert (meta["crossview.lri"], meta["crossview.refine"], meta["crossview.lacks"]) == (
        "off", "off", "")  # the fused run's, not the network alone's (on, on)
    assert record.same_as == "crossview stereo --model runtime-test"
    graph = onnx.load(str(path)).graph
    dims = [d.dim_value for d in graph.input[0].type.tensor_type.shape.dim]
    assert dims == [1, 3, *SIZE]
    changed = {**meta, "crossview.fusion_constants": meta["crossview.fusion_constants"]
               .replace('"consistency_px": 0.5', '"consistency_px": 0.25')}
    with pytest.raises(UserError, match="other fusion thresholds"):
        FusedFile.read(changed, "f.onnx")
    with pytest.raises(UserError, match="not a fused stereo file"):
        FusedFile.read({k: v for k, v in meta.items() if k != "crossview.fusion"}, "f.onnx")
    with pytest.raises(UserError, match="incomplete or damaged"):
        FusedFile.read({**meta, "crossview.working_size": "big"}, "f.onnx")


def test_a_pair_above_max_pixels_runs_at_the_working_size() -> None:
    """The record of a pair beyond ``max_pixels``, and its shrinking to the working size: the
    runtime's numpy weights against torch's antialiased bilinear (torch sums in float32:
    measured within 0.005 grey levels; OpenCV's area resampling, used before, differed by 0.7
    on average and 6.4 at most)."""
    torch.manual_seed(0)
    model = crossview.load_model("runtime-test")
    model.fused_network = dataclasses.replace(FUSED, max_pixels=50_000)
    record = fused_module(model, SIZE).fused
    # 0.82 of the pair; its 0.75 would be below the model's least size (192 padded, 161 px):
    # the network runs at the least size at the working size's aspect
    assert record.working_size == (210, 237) and record.network_size == (161, 182)
    left = _pair()[0]
    x = left.transpose(2, 0, 1)[None].astype(np.float32)
    want = _images_at(torch.from_numpy(x), record.working_size).numpy()
    np.testing.assert_allclose(antialiased_shrink(x, record.working_size), want, rtol=0,
                               atol=0.01)


@pytest.mark.parametrize(("size", "out"), [((375, 450), (258, 309)), ((100, 130), (37, 91)),
                                           ((50, 60), (70, 80)), ((64, 64), (64, 64))])
def test_the_shrink_is_torchs_antialiased_bilinear(size: tuple[int, int],
                                                   out: tuple[int, int]) -> None:
    """Shrinking (several to one), mild, enlarging (plain bilinear) and the same size."""
    x = np.random.default_rng(0).random((1, 3, *size), dtype=np.float32) * 255
    want = F.interpolate(torch.from_numpy(x), size=out, mode="bilinear", align_corners=False,
                         antialias=True).numpy()
    np.testing.assert_allclose(antialiased_shrink(x, out), want, rtol=0, atol=0.01)
    assert np.allclose(shrink_matrix(size[1], out[1]).sum(axis=1), 1)


def test_the_runtime_imports_no_torch_nor_scipy_and_runs_without_them(
        exported: tuple[torch.nn.Module, Path], pair_files: tuple[Path, Path],
        tmp_path: Path) -> None:
    _, path = exported
    check = subprocess.run(
        [sys.executable, "-c", "import sys, crossview.runtime.__main__; "
         "print('torch' in sys.modules, 'scipy' in sys.modules)"], capture_output=True,
        text=True, check=True)
    assert check.stdout.strip() == "False False"
    out = tmp_path / "d.npy"
    blocked = ("import sys; sys.modules['torch'] = sys.modules['scipy'] = None; "  # imports fail
               "from crossview.runtime.__main__ import main; main(sys.argv[1:])")
    run = subprocess.run([sys.executable, "-c", blocked, str(path), *map(str, pair_files),
                          "-o", str(out)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith(f"wrote {out} ({SIZE[0]}x{SIZE[1]} float32 px, left view")
    np.testing.assert_array_equal(np.load(out), FusedStereo(path)(*pair_files).left)


def _bad(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as done:
        main(args)
    err = capsys.readouterr().err
    assert done.value.code == 2
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


def test_bad_input_is_one_line_exit_2_nothing_written(
        exported: tuple[torch.nn.Module, Path], pair_files: tuple[Path, Path], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    _, path = exported
    left, right = map(str, pair_files)
    out = str(tmp_path / "d.npy")
    small = tmp_path / "small.png"
    Image.fromarray(_pair()[0][:100]).save(small)
    text = tmp_path / "notes.png"
    text.write_text("not an image")
    plain = tmp_path / "plain.onnx"  # an ONNX model, but no fused stereo file
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("Identity", ["x"], ["y"])], "g",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1])])
    onnx.save(onnx.helper.make_model(graph), str(plain))
    cases = {
        "missing file": ([str(tmp_path / "nope.onnx"), left, right, "-o", out],
                         "nope.onnx: no such file"),
        "not onnx": ([str(text), left, right, "-o", out], "not an ONNX model"),
        "not fused": ([str(plain), left, right, "-o", out], "not a fused stereo file"),
        "missing image": ([str(path), left, str(tmp_path / "r.png"), "-o", out],
                          "r.png: no such file (the right image)"),
        "not an image": ([str(path), str(text), right, "-o", out],
                         "cannot read image (cannot identify image file"),
        "other size": ([str(path), left, str(small), "-o", out],
                       f"the right image is 100x{SIZE[1]} (HxW); the file takes "
                       f"{SIZE[0]}x{SIZE[1]}"),
        "output suffix": ([str(path), left, right, "-o", str(tmp_path / "d.png")],
                          "give a .npy file"),
        "no output": ([str(path), left, right], "the following arguments are required"),
    }
    for case, (args, message) in cases.items():
        assert message in _bad(args, capsys), case
    assert not list(tmp_path.glob("*.npy"))


def test_a_swapped_pair_is_warned_as_the_command_line_warns(
        exported: tuple[torch.nn.Module, Path], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The right image given first: one ``warning:`` line naming the swap; the disparities
    are still written (the user may know better)."""
    _, path = exported
    left, right = _pair(0)
    paths = tmp_path / "right.png", tmp_path / "left.png"
    for file, image in zip(paths, (right, left), strict=True):
        Image.fromarray(image).save(file)
    out = tmp_path / "d.npy"
    main([str(path), *map(str, paths), "-o", str(out)])
    err = capsys.readouterr().err
    assert [line for line in err.splitlines() if line.startswith("warning:")] == [
        line for line in err.splitlines() if "swapped" in line]
    assert "look swapped" in err and out.is_file()
    main([str(path), str(paths[1]), str(paths[0]), "-o", str(out)])
    assert "swapped" not in capsys.readouterr().err
