"""Batches of square synthetic warps: keypoints and flow agree."""

from __future__ import annotations

import torch

from crossview.data.synthetic.warp_batches import warp_batch, warp_dataset


def test_warp_batch_keypoints_follow_the_flow() -> None:
    data = warp_dataset("train", 48, 2, seed=0, keypoints=5)
    batch = warp_batch(data, [0, 1])
    assert batch["src"].shape == (2, 3, 48, 48) and batch["kp_src"].shape == (2, 5, 2)
    sample = data[0]
    x, y = batch["kp_src"][0, 0].long().tolist()
    expected = batch["kp_src"][0, 0] + sample["flow"][:, y, x]
    torch.testing.assert_close(batch["kp_tgt"][0, 0], expected)
