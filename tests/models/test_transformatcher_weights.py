"""TransforMatcher weight files: the tuned backbone travels with the head, the task is recorded,
and weights of another task are refused with one line."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
import yaml
from PIL import Image
from safetensors.torch import save_file

from crossview.cli.app import main as crossview_main
from crossview.errors import UserError
from crossview.models.transformatcher.bundle import export_transformatcher
from crossview.models.transformatcher.inference import load_transformatcher
from crossview.models.transformatcher.model import TransforMatcher, has_tuned_backbone

CLASSIFIER = ("backbone._conv_head", "backbone._bn1", "backbone._fc")


def test_tune_backbone_trains_the_feature_layers_and_not_the_classifier() -> None:
    model = TransforMatcher(grid=3, depth=1)
    src, tgt = torch.rand(2, 1, 3, 48, 48) * 255
    assert not model(src, tgt)["corr"].requires_grad  # frozen: no graph through the backbone
    params = model.tune_backbone()
    names = {n for n, p in model.named_parameters() if p.requires_grad and
             n.startswith("backbone.")}
    assert len(names) == len(params) and names
    assert not any(n.startswith(CLASSIFIER) for n in names)
    assert {n for n in dict(model.backbone.named_parameters())
            if not n.startswith(("_conv_head", "_bn1", "_fc"))} == {
        n.removeprefix("backbone.") for n in names}
    model(src, tgt)["corr"].sum().backward()
    assert model.backbone._conv_stem.weight.grad.abs().sum() > 0
    assert model.backbone._fc.weight.grad is None
    state = model.trained_state_dict()
    assert has_tuned_backbone(state)
    assert not any(k.startswith(CLASSIFIER) for k in state)
    assert any(k.endswith("running_var") for k in state)  # BatchNorm buffers travel too


def test_tuned_weights_load_exactly_and_head_only_weights_keep_imagenet(tmp_path) -> None:
    torch.manual_seed(0)
    tuned = TransforMatcher()
    tuned.tune_backbone()
    with torch.no_grad():
        for p in itertools.chain(tuned.backbone.parameters(), tuned.refiner.parameters()):
            p.add_(torch.randn_like(p) * 0.01)
    path = export_transformatcher(tuned, tmp_path / "tuned.safetensors", {})
    loaded = load_transformatcher(path)
    assert loaded.backbone_tuned
    # The features (tuned) are restored exactly; the classifier, never saved, is ImageNet's.
    reference = TransforMatcher()
    for key, value in loaded.state_dict().items():
        want = (reference if key.startswith(CLASSIFIER) else tuned).state_dict()[key]
        assert torch.equal(value, want), key
    head_only = tmp_path / "head.safetensors"
    save_file(tuned.head_state_dict(), str(head_only))
    plain = load_transformatcher(head_only)
    assert not plain.backbone_tuned
    for key, value in plain.backbone.state_dict().items():
        assert torch.equal(value, reference.backbone.state_dict()[key]), key
    # A file with only part of the backbone is not loaded halfway.
    partial = tuned.trained_state_dict()
    del partial["backbone._blocks.3._bn1.running_mean"]
    with pytest.raises(ValueError, match=r"_blocks\.3\._bn1\.running_mean"):
        TransforMatcher().load_trained_state_dict(partial)


@pytest.fixture(scope="module")
def stereo_file(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("w") / "stereo.safetensors"
    save_file(TransforMatcher(grid=3, depth=1).head_state_dict(), str(path),
              metadata={"task": "stereo"})
    return str(path)


def _semantic_config(tmp_path) -> object:
    path = tmp_path / "semantic.yaml"
    path.write_text(yaml.safe_dump({
        "task": "semantic", "model": {"name": "transformatcher", "overrides": {"grid": 3,
                                                                             "depth": 1}},
        "data": {"train": "synthetic-warps", "val": "synthetic-warps", "train_size": 2},
        "train": {"steps": 1, "batch_size": 1, "out_dir": str(tmp_path / "run")}}))
    return path


def test_weights_of_another_task_are_refused(stereo_file: str, tmp_path, capsys) -> None:
    with pytest.raises(UserError, match="records task 'stereo' but 'semantic'"):
        load_transformatcher(stereo_file)
    rng = np.random.default_rng(0)
    for name in ("src.png", "tgt.png"):
        Image.fromarray(rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)).save(tmp_path / name)
    for run, args in ((crossview_main, ["match", str(tmp_path / "src.png"),
                                        str(tmp_path / "tgt.png"), "--weights", stereo_file,
                                        "-o", str(tmp_path / "out")]),
                      (crossview_main, ["train", str(_semantic_config(tmp_path)),
                                        "--init-weights", stereo_file])):
        capsys.readouterr()
        with pytest.raises(SystemExit) as done:
            run(args)
        assert done.value.code == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "records task 'stereo'" in err
    assert not (tmp_path / "out").exists()
