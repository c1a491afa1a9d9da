from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import save_file

from crossview.cli.app import main
from crossview.errors import UserError
from crossview.models.matchstereo.config import MatchStereoConfig
from crossview.models.matchstereo.model import MatchStereo
from crossview.train.checkpoint import load_checkpoint
from crossview.train.grow import grow_into, trained_depths

SMALL = MatchStereoConfig(dims=(8, 8, 8, 8), encoder_depths=(1, 1, 1, 1),
                          decoder_layers=(1, 2, 1, 1), radii=(1, 1, 1, 1), heads=2,
                          encoder_head=0)


def trained(task: str) -> MatchStereo:
    """A small network with random, non-trivial weights everywhere (zero-initialised
    parameters would make a wrong copy pass unnoticed)."""
    torch.manual_seed(0)
    model = MatchStereo(SMALL, task=task)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    return model.eval()


@pytest.mark.parametrize("task", ["stereo", "flow"])
def test_grown_network_computes_the_trained_fields(task: str) -> None:
    small = trained(task)
    big = MatchStereo(dataclasses.replace(SMALL, decoder_layers=(3, 2, 2, 2),
                                          encoder_depths=(2, 1, 3, 1)), task=task).eval()
    grow_into(big, small.state_dict())
    img0, img1 = torch.rand(2, 1, 3, 192, 192).mul(255).unbind(0)
    with torch.no_grad():
        want, got = small(img0, img1), big(img0, img1)
    # the division by each extra layer's field scale costs float rounding, nothing more
    torch.testing.assert_close(got["field"], want["field"], rtol=1e-5, atol=1e-4)
    assert len(got["fields"]) == len(want["fields"]) + 2 * 4
    # every trained parameter is copied; the new layers' residual outputs are zero, the rest
    # (here: their q/k/v) keep their fresh random initialisation and so can learn
    state = big.state_dict()
    for key, value in small.state_dict().items():
        assert torch.equal(state[key], value), key
    assert not state["match_attentions.0.layers.1.mlp.fc2.weight"].any()
    assert not state["match_attentions.3.layers.1.match_attention_cross.proj.weight"].any()
    assert state["match_attentions.0.layers.1.match_attention_self.q.weight"].abs().sum() > 0
    assert trained_depths(state) == {0: 3, 1: 2, 2: 2, 3: 2}
    assert trained_depths(state, "encoder") == {0: 2, 1: 1, 2: 3, 3: 1}
    assert not state["encoder.stages.2.2.token_mixer.pwconv2.weight"].any()
    assert not state["encoder.stages.0.1.mlp.fc2.weight"].any()
    assert state["encoder.stages.2.1.mlp.fc1.weight"].abs().sum() > 0
    # and they learn: the zeroed outputs receive a gradient from the first step
    big(img0, img1)["field"].square().sum().backward()
    new_layer = big.match_attentions[0].layers[2]
    new_block = big.encoder.stages[2][2]
    for linear in (new_layer.mlp.fc2, new_layer.match_attention_self.proj,
                   new_layer.match_attention_cross.proj, new_block.mlp.fc2,
                   new_block.token_mixer.pwconv2):
        assert linear.weight.grad.abs().sum() > 0


def test_weights_that_do_not_fit_name_the_key() -> None:
    small = trained("stereo").state_dict()
    wider = MatchStereo(dataclasses.replace(SMALL, dims=(8, 8, 8, 16),
                                            decoder_layers=(2, 2, 2, 2)))
    with pytest.raises(UserError, match="has shape"):
        grow_into(wider, small)
    shallower = MatchStereo(dataclasses.replace(SMALL, decoder_layers=(1, 1, 1, 1)))
    with pytest.raises(UserError, match=r"unexpected key match_attentions\.1\.layers\.1\."):
        grow_into(shallower, small)
    fewer_blocks = MatchStereo(dataclasses.replace(SMALL, encoder_depths=(1, 1, 1, 0)))
    with pytest.raises(UserError, match=r"unexpected key encoder\.stages\.3\.0\."):
        grow_into(fewer_blocks, small)
    stripped = {k: v for k, v in small.items() if not k.startswith("encoder.stages.1.")}
    with pytest.raises(UserError, match="no trained block of encoder stage 1"):
        grow_into(MatchStereo(SMALL), stripped)
    del small[next(key for key in small if key.startswith("encoder."))]
    with pytest.raises(UserError, match="missing key"):
        grow_into(MatchStereo(SMALL), small)


@pytest.mark.slow
def test_train_grow_starts_from_the_shallower_weights(tmp_path: Path) -> None:
    small = trained("stereo")
    weights = tmp_path / "small.safetensors"
    save_file({k: v.contiguous() for k, v in small.state_dict().items()}, str(weights))
    overrides = {k: list(v) if isinstance(v, tuple) else v
                 for k, v in dataclasses.asdict(SMALL).items()
                 if k in ("dims", "encoder_depths", "radii", "heads", "encoder_head")}
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({
        "task": "stereo",
        "model": {"name": "matchstereo-t",
                  "overrides": {**overrides, "decoder_layers": [2, 2, 1, 1],
                                "encoder_depths": [1, 2, 1, 1]}},
        "data": {"train_size": 2, "val_size": 0, "height": 128, "width": 192},
        "optim": {"lr": 1e-12},
        "train": {"steps": 1, "batch_size": 1, "ckpt_every": 1, "log_every": 1,
                  "out_dir": str(tmp_path / "run")}}))
    with pytest.raises(SystemExit) as done:
        main(["train", str(config), "--init-weights", str(weights), "--grow"])
    assert done.value.code == 0
    state = load_checkpoint(tmp_path / "run" / "step-00000001.pt")["model"]
    # one step at a negligible rate: the trained weights are still there
    torch.testing.assert_close(state["match_attentions.1.layers.1.mlp.fc2.weight"],
                               small.state_dict()["match_attentions.1.layers.1.mlp.fc2.weight"])
    assert state["match_attentions.0.layers.1.mlp.fc2.weight"].abs().max() < 1e-6
    assert state["encoder.stages.1.1.token_mixer.pwconv2.weight"].abs().max() < 1e-6


def test_grow_without_init_weights_is_one_line_and_exit_2(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"task": "stereo", "model": {"name": "matchstereo-t"}}))
    with pytest.raises(SystemExit) as done:
        main(["train", str(config), "--grow"])
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert "--grow needs --init-weights" in err and "Traceback" not in err
