from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from numpy.lib import format as npy_format
from torch import nn

from crossview.cli.app import main
from crossview.data import io
from crossview.data.datasets import registry as dataset_registry
from crossview.metrics import endpoint_error, flow_endpoint_error
from crossview.models import registry
from crossview.models.dense.inference import dense_predictor

H, W = 20, 24


class _ImageField(nn.Module):
    """A stand-in model whose field is read off the images, so the test knows the answer:
    stereo disparity = image0[..., 0] / 50 (left) and image1[..., 0] / 50 (right); flow =
    (image0[..., 0], image0[..., 1]) / 50."""

    def __init__(self, task: str) -> None:
        super().__init__()
        self.task = task

    def min_shape(self, task: str) -> tuple[int, int]:
        return 32, 32

    def forward_fields(self, x0: torch.Tensor, x1: torch.Tensor, *, task: str,
                       init_field: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        assert task == self.task
        if task == "stereo":
            zeros = torch.zeros_like(x0[:, 0])
            field = torch.cat([torch.stack([-x0[:, 0] / 50, zeros], -1),
                               torch.stack([x1[:, 0] / 50, zeros], -1)])
        else:
            forward = torch.stack([x0[:, 0], x0[:, 1]], -1) / 50
            field = torch.cat([forward, -forward])
        return {"field": field, "self_rpos_up": torch.zeros_like(field)}


@pytest.fixture
def fake_models(monkeypatch: pytest.MonkeyPatch) -> None:
    for task in ("stereo", "flow"):
        spec = registry.ModelSpec(f"test-{task}", build=lambda t=task: _ImageField(t), task=task,
                                  predictor=dense_predictor)
        monkeypatch.setitem(registry.MODELS.entries, spec.name, spec)


@pytest.fixture
def kitti(tmp_path: Path) -> tuple[Path, list]:
    rng = np.random.default_rng(0)
    truth = []
    for i in range(3):
        name = f"{i:06d}_10.png"
        image = rng.integers(0, 256, (H, W, 3), dtype=np.uint8)
        disparity = np.round(rng.uniform(0, 6, (H, W)) * 256) / 256
        occ, noc = rng.random((H, W)) < 0.6, rng.random((H, W)) < 0.4
        for folder, array in (("image_2", image), ("image_3", image[::-1].copy())):
            (tmp_path / "training" / folder).mkdir(parents=True, exist_ok=True)
            io.write_image(tmp_path / "training" / folder / name, array)
        for folder, valid in (("disp_occ_0", occ), ("disp_noc_0", occ & noc)):
            (tmp_path / "training" / folder).mkdir(exist_ok=True)
            io.write_kitti_disparity(tmp_path / "training" / folder / name, disparity, valid)
        truth.append((name, image, disparity, occ))
    return tmp_path, truth


def _still_pair(folder: Path, rng: np.random.Generator, frames: tuple[str, str],
                flow_name: str) -> tuple[np.ndarray, np.ndarray]:
    """Write one random image ``[H, W, 3]`` under both ``frames`` names and random flow
    ``[H, W, 2]`` as ``flow_name`` (``.flo`` or ``.npy``) in ``folder``; return both."""
    folder.mkdir(parents=True)
    image = rng.integers(0, 256, (H, W, 3), dtype=np.uint8)
    flow = rng.normal(0, 2, (H, W, 2)).astype(np.float32)
    for name in frames:
        io.write_image(folder / name, image)
    (io.write_flo if flow_name.endswith(".flo") else io.write_npy)(folder / flow_name, flow)
    return image, flow


def _run(argv: list[str]) -> int:
    with pytest.raises(SystemExit) as done:
        main(argv)
    return done.value.code


def test_eval_kitti_table_and_json(fake_models, kitti, tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str],
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    root, truth = kitti
    monkeypatch.setattr(dataset_registry, "SCAN_NOTE_AFTER", 0.0)  # as if the scan took long
    out = tmp_path / "results" / "kitti.json"
    code = _run(["eval", "--model", "test-stereo", "--dataset", f"kitti2015:{root}",
                 "--limit", "2", "--json", str(out)])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    assert "000001_10.png" in printed.out and "000002_10.png" not in printed.out
    assert "mean per pixel (benchmark)" in printed.out
    payload = json.loads(out.read_text())
    assert payload["samples"] == 2 and payload["metrics"] == ["d1_all", "d1_all_noc", "epe",
                                                              "epe_noc"]
    scores = [endpoint_error(image[..., 0] / 50, disparity, occ)
              for _, image, disparity, occ in truth[:2]]
    expected = sum(s.total for s in scores) / sum(s.count for s in scores)  # KITTI pools pixels
    assert payload["mean"]["epe"] == pytest.approx(expected, rel=1e-5)
    assert payload["per_sample"][1]["epe"] == pytest.approx(scores[1].value, rel=1e-5)
    assert "random weights" in printed.err
    assert f"note: scanning {root} for kitti2015 samples" in printed.err.splitlines()
    # off a terminal, a progress line per sample instead of the live bar
    progress = [line for line in printed.err.splitlines() if line.startswith("eval ")]
    assert [re.sub(r" \(\d+\.\d s\)$", "", line) for line in progress] == [
        "eval kitti2015 1/2: 000000_10.png", "eval kitti2015 2/2: 000001_10.png"], printed.err


def test_middeval3_mean_is_called_unweighted(fake_models, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """MiddEval3's online tables average scenes with per-scene weights that crossview does not
    apply: the printed and written means must say they are unweighted image means."""
    rng = np.random.default_rng(2)
    scenes = tmp_path / "MiddEval3" / "trainingQ"
    values = []
    for scene, size in (("Adirondack", (H, W)), ("Jadeplant", (2 * H, W))):
        image = rng.integers(0, 256, (*size, 3), dtype=np.uint8)
        disparity = rng.uniform(0, 6, size).astype(np.float32)
        (scenes / scene).mkdir(parents=True)
        io.write_image(scenes / scene / "im0.png", image)
        io.write_image(scenes / scene / "im1.png", image)
        io.write_pfm(scenes / scene / "disp0GT.pfm", disparity)
        (scenes / scene / "calib.txt").write_text("ndisp=64\n")
        values.append(endpoint_error(image[..., 0] / 50, disparity).value)
    out = tmp_path / "mb.json"
    code = _run(["eval", "--model", "test-stereo", "--dataset",
                 f"middlebury,resolution=Q:{tmp_path}", "--metrics", "avgerr", "--json",
                 str(out)])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    assert "unweighted mean per image (benchmark)" in printed.out
    assert "per-scene weights are not applied" in " ".join(printed.out.split())
    payload = json.loads(out.read_text())
    assert payload["reduction"] == "image_mean"
    assert "per-scene weights are not applied" in payload["note"]
    # the two scenes differ in size, so the pooled and the image mean differ: the plain mean
    assert payload["mean"]["avgerr"] == pytest.approx((values[0] + values[1]) / 2, rel=1e-5)
    assert payload["summary"]["avgerr"]["pooled"] != pytest.approx(payload["mean"]["avgerr"])


def test_eval_flow_with_chosen_metrics(fake_models, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    image, flow = _still_pair(tmp_path / "data", np.random.default_rng(1),
                              ("00001_img1.ppm", "00001_img2.ppm"), "00001_flow.flo")
    out = tmp_path / "chairs.json"
    code = _run(["eval", "--model", "test-flow", "--dataset", f"chairs,split=all:{tmp_path}",
                 "--metrics", "epe,1px", "--json", str(out), "--no-per-sample"])
    assert code == 0, capsys.readouterr().err
    predicted = image[..., :2].astype(np.float64) / 50
    payload = json.loads(out.read_text())
    assert payload["metrics"] == ["epe", "1px"]
    assert payload["mean"]["epe"] == pytest.approx(
        flow_endpoint_error(predicted, flow).value, rel=1e-5)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["eval", "--model", "test-stereo"], "needs --model NAME and --dataset"),
        (["eval", "--model", "test-flow", "--dataset", "kitti2015:{root}"], "estimates flow"),
        (["eval", "--model", "test-stereo", "--dataset", "kitti2015:{root}/nope"],
         "no such directory"),
        (["eval", "--model", "test-stereo", "--dataset", "kitti2015:{root}", "--metrics", "x"],
         "unknown stereo metric"),
        (["eval", "--model", "nope", "--dataset", "kitti2015:{root}"], "unknown model"),
        (["eval", "--model", "test-stereo", "--dataset", "kitti2015:{root}", "--json", "{root}"],
         "is a directory"),
        (["eval", "--model", "test-stereo", "--dataset", "kitti2015:{root}", "--json",
          "/proc/crossview/out.json"], "cannot write to this output directory"),
        (["eval", "--model", "test-stereo", "--dataset", "kitti2015:{root}", "--limit", "0"],
         "--limit must be at least 1, got 0"),
        (["eval", "--model", "test-stereo", "--dataset", "kitti2015:{root}", "--limit", "-2"],
         "--limit must be at least 1, got -2"),
        (["eval", "--model", "test-stereo", "--dataset", "kitti2015:{root}", "--device", "foo"],
         "--device 'foo' is not a device name"),
        (["eval", "--model", "test-stereo", "--dataset", "kitti2015:{root}", "--device",
          "meta"], "--device 'meta': device type 'meta' holds no data"),
        pytest.param(["eval", "--model", "test-stereo", "--dataset", "kitti2015:{root}",
                      "--device", "mps"], "--device 'mps': MPS (Apple Metal) is not available",
                     marks=pytest.mark.skipif(torch.backends.mps.is_available(), reason="MPS")),
        pytest.param(["eval", "--model", "test-stereo", "--dataset", "kitti2015:{root}",
                      "--device", "cuda"], "--device 'cuda': CUDA is not available",
                     marks=pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA")),
        (["eval", "--model", "matchstereo-mini", "--dataset",
          "synthetic-stereo,size=100000x100000"], "matchstereo-mini at 100000x100000 px needs "
         "about "),
        (["eval", "--model", "matchflow-mini", "--dataset", "synthetic-flow,size=8000x8000"],
         "GiB available ($CROSSVIEW_MAX_MEMORY_GB); evaluate at a smaller size (the dataset's "
         "size=HxW option)"),
    ],
)
def test_user_errors_are_one_line_exit_2(fake_models, kitti, argv: list[str], message: str,
                                         capsys: pytest.CaptureFixture[str],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CROSSVIEW_MAX_MEMORY_GB", "16")  # the same limit on every machine
    root, _ = kitti
    code = _run([arg.format(root=root) for arg in argv])
    err = capsys.readouterr().err
    assert code == 2
    assert message in err and err.startswith("error: ") and "Traceback" not in err
    assert len(err.splitlines()) == 1, err


def test_a_failed_eval_leaves_no_json_directory(fake_models, kitti,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    root, _ = kitti
    target = root / "new" / "deeper" / "out.json"
    code = _run(["eval", "--model", "nope", "--dataset", f"kitti2015:{root}", "--json",
                 str(target)])
    assert code == 2 and "unknown model" in capsys.readouterr().err
    assert not (root / "new").exists()


def test_weights_recording_another_task_are_refused(fake_models, kitti, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from safetensors.torch import save_file

    root, _ = kitti
    weights = tmp_path / "flow.safetensors"  # fits the (parameter-free) stand-in model
    save_file({}, weights, metadata={"task": "flow"})
    code = _run(["eval", "--model", "test-stereo", "--dataset", f"kitti2015:{root}",
                 "--weights", str(weights)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith(f"error: {weights}: the file records task 'flow' but 'stereo' weights")


def test_list_shows_kinds(capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(["eval", "--list"]) == 0
    out = capsys.readouterr().out
    assert "kitti2015" in out and "stereo metrics (--metrics): avgerr" in out


def test_list_piped_shows_every_description_whole(capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Off a terminal the table is as wide as it needs: one line per kind, nothing cut."""
    from crossview.data.datasets import list_datasets

    monkeypatch.setenv("COLUMNS", "80")
    assert _run(["eval", "--list"]) == 0
    out = capsys.readouterr().out
    assert "…" not in out
    lines = out.splitlines()
    for kind in list_datasets():
        assert any(kind.description in line and f" {kind.name} " in line for line in lines), (
            kind.name, out)


def test_a_model_is_run_by_its_family_predictor(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    from crossview.data.datasets import registry as datasets
    from crossview.metrics import registry as metrics
    from crossview.metrics.score import MetricSpec, Score

    # the test registers into copies: the registries stay clean
    monkeypatch.setattr(datasets.DATASETS, "_entries", dict(datasets.DATASETS.entries))
    monkeypatch.setattr(metrics.METRICS, "_entries", dict(metrics.METRICS.entries))
    samples = [{"name": "p", "image0": np.zeros((2, 2, 3), np.uint8), "answer": 7.0}]
    datasets.register_dataset(datasets.DatasetKind("toy", "toy", lambda: samples, ("err",),
                                                   "pooled", "toy", needs_path=False))
    metrics.register_metric(MetricSpec("err", "toy", lambda p, s: Score(abs(p - s["answer"]), 1),
                                       "absolute error"))
    spec = registry.ModelSpec("test-toy", build=lambda: _ImageField("toy"), task="toy")
    monkeypatch.setitem(registry.MODELS.entries, spec.name, spec)
    out = tmp_path / "toy.json"
    argv = ["eval", "--model", "test-toy", "--dataset", "toy", "--json", str(out)]
    assert _run(argv) == 2
    assert "model 'test-toy' has no benchmark predictor" in capsys.readouterr().err
    spec = dataclasses.replace(spec, predictor=lambda model, device, precision: lambda s: 5.0)
    monkeypatch.setitem(registry.MODELS.entries, spec.name, spec)
    assert _run(argv) == 0
    assert json.loads(out.read_text())["mean"] == {"err": 2.0}


def test_a_stray_sceneflow_frame_is_one_error_line(fake_models, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """A ``.png`` in a SceneFlow frames folder that is not ``NNNN.png`` stops ``crossview eval``
    with one line naming it (it used to be skipped, changing the number of scored pairs)."""
    left = tmp_path / "frames_cleanpass" / "a_rain_of_stones_x2" / "left"
    left.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for name in ("0006.png", "0007.png", "0006_copy.png"):
        io.write_image(left / name, rng.integers(0, 256, (H, W, 3), dtype=np.uint8))
    code = _run(["eval", "--model", "test-flow", "--dataset", f"monkaa-flow:{tmp_path}"])
    err = capsys.readouterr().err  # the stand-in model also warns that it has no weights
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    assert code == 2 and "Traceback" not in err, err
    assert len(errors) == 1 and err.endswith(errors[0] + "\n"), err
    assert errors[0].startswith(f"error: {left / '0006_copy.png'}: the name is not NNNN.png")


def _stereo_scene(folder: Path, rng: np.random.Generator, *, sgbm_holes: int | None) -> dict:
    """A scene whose ground truth the stand-in model (image0[..., 0] / 50) misses by 0.5 px on
    the left half; with ``sgbm_holes``, a cached SGBM output exact but for that many hole
    columns."""
    folder.mkdir(parents=True)
    image = rng.integers(0, 256, (H, W, 3), dtype=np.uint8)
    truth = image[..., 0] / 50 + np.where(np.arange(W) < W // 2, 0.5, 0.0)
    truth[0, 0] = np.nan
    io.write_image(folder / "left.png", image)
    io.write_image(folder / "right.png", image)
    io.write_npy(folder / "gt.npy", truth.astype(np.float32))
    if sgbm_holes is not None:
        raw = np.round(np.nan_to_num(truth) * 16).astype(np.int16)
        raw[:, :sgbm_holes] = -16
        io.write_npy(folder / "sgbm.npy", raw)
    return {"image": image, "truth": truth.astype(np.float32)}


@pytest.fixture
def scenes(tmp_path: Path) -> tuple[Path, dict]:
    """``scenes/``: stereo ``a`` (cached SGBM, 2 hole columns), stereo ``b`` (none), flow ``c``
    (a DIS cache)."""
    rng = np.random.default_rng(3)
    root = tmp_path / "scenes"
    written = {"a": _stereo_scene(root / "a", rng, sgbm_holes=2),
               "b": _stereo_scene(root / "b", rng, sgbm_holes=None)}
    image, flow = _still_pair(root / "c", rng, ("frame0.png", "frame1.png"), "flow.npy")
    io.write_npy(root / "c" / "dis_medium.npy", flow + np.float32(0.25))
    written["c"] = {"image": image, "truth": flow}
    return root, written


def test_eval_scenes_prints_model_and_baseline_rows(fake_models, scenes, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    from crossview import baselines
    from crossview.models.dense import classical

    # the scene without a cache has no baseline
    monkeypatch.setattr(baselines, "cv2", None)
    monkeypatch.setattr(classical, "cv2", None)
    monkeypatch.setenv("COLUMNS", "250")  # one table row per line
    root, written = scenes
    out = tmp_path / "stereo.json"
    code = _run(["eval", "--model", "test-stereo", "--dataset", f"scenes:{root}",
                 "--json", str(out)])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    assert "SGBM (cached sgbm.npy)" in printed.out
    assert "SGBM: not available (pip install opencv-python-headless)" in printed.out
    assert "SGBM: not available on 1 of 2 scenes" in printed.out
    assert "oracle range" in printed.out
    payload = json.loads(out.read_text())
    assert [row["name"] for row in payload["per_sample"]] == ["a", "b"]  # not the flow scene
    for row in payload["per_sample"]:
        truth = written[row["name"]]["truth"]
        known = np.isfinite(truth)
        # the model errs by 0.5 px on the left half: bad-1 0, EPE 0.5 px there
        assert row["bad1_holes"] == 0.0
        left = known[:, : W // 2].sum()
        assert row["epe_holes"] == pytest.approx(0.5 * left / known.sum(), rel=1e-5)
    baseline, filled = payload["baselines"]
    assert filled["name"] == "SGBM filled" and filled["sources"] == baseline["sources"]
    assert "SGBM filled (cached sgbm.npy)" in printed.out
    assert baseline["missing"] == ["b"] and baseline["sources"] == {"a": "cached sgbm.npy"}
    # two hole columns (11 known pixels, one of them the unknown corner) count as errors of |gt|
    truth = written["a"]["truth"]
    holes = np.isfinite(truth[:, :2])
    assert baseline["per_sample"][0]["bad3_holes"] == pytest.approx(
        100 * holes.sum() / np.isfinite(truth).sum())
    assert baseline["per_sample"][0]["epe_holes"] == pytest.approx(
        truth[:, :2][holes].sum() / np.isfinite(truth).sum(), abs=1 / 32)

    code = _run(["eval", "--model", "test-flow", "--dataset", f"scenes:{root}", "--json",
                 str(tmp_path / "flow.json")])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    assert "DIS (cached dis_medium.npy)" in printed.out
    payload = json.loads((tmp_path / "flow.json").read_text())
    dis = payload["baselines"][0]
    assert payload["samples"] == 1 and dis["mean"]["epe_holes"] == pytest.approx(
        0.25 * np.sqrt(2), rel=1e-5)


def test_eval_scenes_computes_the_baseline_with_opencv(fake_models, scenes, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    cv2 = pytest.importorskip("cv2")
    root, _ = scenes
    out = tmp_path / "stereo.json"
    code = _run(["eval", "--model", "test-stereo", "--dataset", f"scenes:{root / 'b'}",
                 "--json", str(out), "--no-per-sample"])
    assert code == 0, capsys.readouterr().err
    baseline = json.loads(out.read_text())["baselines"][0]
    assert baseline["sources"] == {"b": f"OpenCV {cv2.__version__}"} and not baseline["missing"]
    assert set(baseline["mean"]) == {"bad1_holes", "bad2_holes", "bad3_holes", "epe_holes"}


@pytest.mark.parametrize(("case", "message"), [
    ("gt wrong size", "gt.npy: 6x24 pixels, but left.png is 20x24"),
    ("gt corrupt", "gt.npy: cannot read .npy"),
    ("gt header claims 100000x100000", "gt.npy: truncated or corrupt .npy (header says "
                                       "(100000, 100000) float32 = 40000000000 bytes"),
    ("gt beyond memory", "gt.npy ((32768, 16384) float32) needs about 2 GiB of memory"),
    ("left without right", "right.*: missing"),
    ("empty root", "found no scenes"),
])
def test_eval_scenes_bad_input_is_exit_2_and_writes_nothing(
        fake_models, scenes, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch, case: str, message: str) -> None:
    root, _ = scenes
    if case == "gt wrong size":
        io.write_npy(root / "b" / "gt.npy", np.zeros((6, W), np.float32))
    elif case == "gt corrupt":
        (root / "b" / "gt.npy").write_bytes(b"\x93NUMPY\x01\x00broken")
    elif case.startswith("gt "):  # a header and, beyond memory, 2 GiB of sparse zeros
        big = case == "gt beyond memory"
        with (root / "b" / "gt.npy").open("wb") as handle:
            npy_format.write_array_header_1_0(handle, {
                "descr": "<f4", "fortran_order": False,
                "shape": (32768, 16384) if big else (100000, 100000)})
            handle.truncate(handle.tell() + (2 * 2**30 if big else 0))
        monkeypatch.setenv("CROSSVIEW_MAX_MEMORY_GB", "1")
    elif case == "left without right":
        (root / "b" / "right.png").unlink()
    else:
        root = tmp_path / "empty"
        root.mkdir()
    out = tmp_path / "results" / "out.json"
    code = _run(["eval", "--model", "test-stereo", "--dataset", f"scenes:{root}",
                 "--json", str(out)])
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    assert code == 2 and "Traceback" not in err, err
    assert len(errors) == 1 and message in errors[0], err
    assert not out.exists() and not out.parent.exists()
