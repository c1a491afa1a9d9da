"""Speed presets (crossview.models.dense.presets): laid over a model's own fused settings, they
set the network's scale and the fusion's runs and median passes, reach the fusion through
predict_fields, and are refused where they cannot apply (library and command line)."""

from __future__ import annotations

import dataclasses
import itertools
import json

import numpy as np
import pytest
import torch
from PIL import Image

import crossview
from cli_runner import run_cli
from crossview.defaults import PRESET_NAMES
from crossview.errors import UserError
from crossview.models.dense import inference
from crossview.models.dense.dis_fusion import FLOW_DIS_RUNS
from crossview.models.dense.presets import DEFAULT_PRESETS, PRESETS, apply_preset
from crossview.models.dense.sgbm_fusion import EDGE_MEDIANS, FUSION_SGBM_RUNS, FusedFields
from crossview.models.matchstereo.specs import matchstereo_spec
from crossview.models.registry import WEIGHTS_DIR, FusedNetwork, register_model
from small_networks import SMALL

OWN = FusedNetwork(0.75, max_pixels=1_234_567, align_px=0.0)
for task in ("stereo", "flow"):
    register_model(matchstereo_spec(f"preset-test-{task}", SMALL, task, fuse=True,
                                    fused_network=OWN), replace=True)
register_model(matchstereo_spec("preset-test-unfused", SMALL, "stereo"), replace=True)
pytestmark = pytest.mark.filterwarnings("ignore::crossview.api.RandomWeightsWarning")


def _pair(h: int = 192, w: int = 256, shift: int = 6) -> tuple[np.ndarray, np.ndarray]:
    """A textured pair ``[H, W, 3]`` uint8, the right view the left moved by ``shift`` px."""
    rng = np.random.default_rng(3)
    coarse = rng.integers(0, 256, (h // 4, (w + shift) // 4 + 1, 3), dtype=np.uint8)
    wide = np.asarray(Image.fromarray(coarse).resize((coarse.shape[1] * 4, h), Image.BICUBIC))
    return np.ascontiguousarray(wide[:, :w]), np.ascontiguousarray(wide[:, shift:shift + w])


@pytest.mark.parametrize("task", ["stereo", "flow"])
@pytest.mark.parametrize("preset", PRESET_NAMES)
def test_a_preset_sets_its_fields_and_keeps_the_rest(task: str, preset: str) -> None:
    laid = apply_preset(OWN, task, preset)
    for field, value in PRESETS[task][preset].items():
        assert getattr(laid, field) == value
    assert laid.align_px == OWN.align_px
    assert laid.max_pixels == PRESETS[task][preset].get("max_pixels", OWN.max_pixels)
    assert apply_preset(OWN, task, None) is OWN


def test_presets_are_ordered_by_work() -> None:
    """Fast does no more work than balanced, balanced no more than best: a smaller or equal
    network scale, no more classical runs, no more median passes, a working size no larger
    (none set: the model's own)."""
    for task, presets in PRESETS.items():
        work = [(p["scale"], p["classical_runs"], len(p["median_passes"]), p["lri"], p["refine"],
                 p.get("max_pixels", np.inf))
                for p in (presets[name] for name in PRESET_NAMES)]
        for faster, slower in itertools.pairwise(work):
            assert all(a <= b for a, b in zip(faster, slower, strict=True)), (task, work)


@pytest.mark.parametrize("model", sorted(DEFAULT_PRESETS))
def test_each_bundled_default_is_one_of_the_presets(model: str) -> None:
    """The weights' own fused settings are what their preset sets (so the curve's point named
    as the default is the default)."""
    meta = json.loads((WEIGHTS_DIR / f"{model}.json").read_text())
    own = FusedNetwork(**meta["fused_network"])
    preset = DEFAULT_PRESETS[model]
    assert apply_preset(own, meta["task"], preset) == own, (model, preset)


def test_fused_network_reads_lists_and_refuses_bad_work() -> None:
    assert FusedNetwork(median_passes=[1, 0]).median_passes == (1, 0)  # as JSON holds it
    with pytest.raises(ValueError, match="classical_runs"):
        FusedNetwork(classical_runs=0)
    with pytest.raises(ValueError, match="median_passes"):
        FusedNetwork(median_passes=(1, 1))
    with pytest.raises(ValueError, match="median_passes"):
        FusedNetwork(median_passes=(-1,))


@pytest.mark.parametrize("task", ["stereo", "flow"])
@pytest.mark.parametrize("preset", PRESET_NAMES)
def test_predict_fields_runs_the_presets_work(task: str, preset: str,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The network runs at the preset's scale (of its working size, where it sets one) and the
    fusion gets its runs and passes."""
    model = crossview.load_model(f"preset-test-{task}")
    seen: dict[str, object] = {}
    network_fields = inference.network_fields

    def spy_network(*args: object, **kwargs: object) -> object:
        seen["size"] = kwargs["size"]
        return network_fields(*args, **kwargs)

    def spy_fusion(x0: torch.Tensor, x1: torch.Tensor, field: torch.Tensor, *,
                   runs: tuple, medians: tuple) -> object:
        seen["runs"], seen["medians"] = runs, medians
        return FusedFields(field, torch.zeros(field.shape[0])) if task == "stereo" else field

    monkeypatch.setattr(inference, "network_fields", spy_network)
    monkeypatch.setattr(inference, "fuse_with_sgbm" if task == "stereo" else "fuse_with_dis",
                        spy_fusion)
    left, right = _pair(544, 640)  # at the least scale, still above the model's least size
    inference.predict_fields(model, left, right, task, preset=preset)
    chosen = PRESETS[task][preset]
    scale, shape = chosen["scale"], (544, 640)
    if "max_pixels" in chosen:  # the whole run at the working size, aspect kept
        factor = (chosen["max_pixels"] / (544 * 640)) ** 0.5
        shape = (int(544 * factor), int(640 * factor))
    assert seen["size"] == (None if scale == 1
                            else inference.scaled_size(model, task, shape, scale))
    if "max_pixels" not in chosen and scale != 1:
        assert seen["size"] == (round(544 * scale), round(640 * scale))
    all_runs = FUSION_SGBM_RUNS if task == "stereo" else FLOW_DIS_RUNS
    assert seen["runs"] == all_runs[:chosen["classical_runs"]]
    assert seen["medians"] == tuple(EDGE_MEDIANS[i] for i in chosen["median_passes"])


def test_no_preset_is_the_models_own_run() -> None:
    """``preset=None`` gives the model's own settings; the preset those equal gives the same
    fields bit for bit (here: a model whose own settings are a preset's)."""
    own = apply_preset(OWN, "stereo", "best")
    register_model(matchstereo_spec("preset-test-own", SMALL, "stereo", fuse=True,
                                    fused_network=own), replace=True)
    model = crossview.load_model("preset-test-own")
    left, right = _pair()
    plain = inference.predict_fields(model, left, right, "stereo").field
    laid = inference.predict_fields(model, left, right, "stereo", preset="best").field
    assert torch.equal(plain, laid)
    faster = inference.predict_fields(model, left, right, "stereo", preset="fast").field
    assert not torch.equal(plain, faster)


def test_presets_are_refused_where_they_cannot_apply() -> None:
    left, right = _pair()
    fused = crossview.load_model("preset-test-stereo")
    with pytest.raises(UserError, match="unknown preset 'quick'"):
        inference.predict_fields(fused, left, right, "stereo", preset="quick")
    with pytest.raises(UserError, match="without it the network runs"):
        inference.predict_fields(fused, left, right, "stereo", preset="fast", fuse=False)
    unfused = crossview.load_model("preset-test-unfused")
    with pytest.raises(UserError, match="does not"):
        inference.predict_fields(unfused, left, right, "stereo", preset="fast")
    with pytest.raises(ValueError, match="median_passes index"):
        inference.fuse_fields(torch.zeros(1, 3, 8, 8), torch.zeros(1, 3, 8, 8),
                              torch.zeros(2, 8, 8, 2), "stereo",
                              dataclasses.replace(OWN, median_passes=(len(EDGE_MEDIANS),)))


@pytest.mark.parametrize("command", ["stereo", "flow"])
@pytest.mark.parametrize(("options", "message"), [
    (["--preset", "quick"], "--preset must be one of fast, balanced, best"),
    (["--preset", "fast", "--no-fuse"], "--no-fuse runs the network alone")])
def test_the_command_line_refuses_a_preset_before_any_work(
        command: str, options: list[str], message: str, tmp_path: object,
        capsys: pytest.CaptureFixture[str]) -> None:
    left, right = tmp_path / "l.png", tmp_path / "r.png"
    for path, image in zip((left, right), _pair(), strict=True):
        Image.fromarray(image).save(path)
    out = tmp_path / "out"
    code, _, err = run_cli([command, str(left), str(right), "-o", str(out), *options], capsys)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0]
    assert not out.exists()
