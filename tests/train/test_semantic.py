from __future__ import annotations

import json

import torch
from safetensors.torch import load_file

from crossview.train.checkpoint import latest_checkpoint, load_checkpoint
from crossview.train.semantic import evaluate_warps, export_weights, train, warp_batch, warp_dataset


def test_warp_batch_keypoints_follow_the_flow() -> None:
    data = warp_dataset("train", 48, 2, seed=0, keypoints=5)
    batch = warp_batch(data, [0, 1])
    assert batch["src"].shape == (2, 3, 48, 48) and batch["kp_src"].shape == (2, 5, 2)
    sample = data[0]
    x, y = batch["kp_src"][0, 0].long().tolist()
    expected = batch["kp_src"][0, 0] + sample["flow"][:, y, x]
    torch.testing.assert_close(batch["kp_tgt"][0, 0], expected)


def test_train_resumes_and_exports(tmp_path) -> None:
    train(tmp_path, grid=3, batch=1, keypoints=8, max_steps=2, checkpoint_every=1)
    assert load_checkpoint(latest_checkpoint(tmp_path))["step"] == 2
    model = train(tmp_path, grid=3, batch=1, keypoints=8, max_steps=3, checkpoint_every=5)
    assert load_checkpoint(latest_checkpoint(tmp_path))["step"] == 3
    steps = [json.loads(line)["step"] for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3]
    path = export_weights(model, tmp_path / "w.safetensors", {"steps": "3"})
    assert set(load_file(str(path))) == set(model.head_state_dict())
    result = evaluate_warps(model, pairs=2, keypoints=4, batch=2)
    for name in ("raw", "raw_softargmax", "refined"):
        assert set(result[name]) == {"pck@0.05", "pck@0.1"}
        assert 0 <= result[name]["pck@0.05"] <= result[name]["pck@0.1"] <= 100


def test_train_starts_from_init_weights_without_a_checkpoint(tmp_path) -> None:
    torch.manual_seed(3)
    source = train(tmp_path / "a", grid=3, batch=1, keypoints=8, max_steps=1)
    path = export_weights(source, tmp_path / "init.safetensors", {})
    started = train(tmp_path / "b", grid=3, batch=1, keypoints=8, max_steps=0, init=path)
    for key, value in load_file(str(path)).items():
        torch.testing.assert_close(started.head_state_dict()[key], value)
