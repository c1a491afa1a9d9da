"""How much memory one MatchStereo / MatchFlow inference needs, from its configuration and size.

The estimate is the peak resident memory that ``crossview.api.estimate_disparity`` /
``estimate_flow`` add to the process (float32, CPU, fused MatchAttention kernels) for ``B``
pairs padded to ``H x W`` px (multiples of 32), ``h = H/32``, ``w = W/32``::

    bytes = B * H * W * max(FULL_RES, BASE + PER_CHANNEL * dims[0])      # activations
          + STEREO_COPIES * 4 * B * h * w * w    (stereo)                # initial correlation
          + FLOW_COPIES * 4 * B * (h * w) ** 2   (flow)
          + FIXED

- The activation term is the larger of two peaks: the full-resolution tail (the input images,
  the x4 convex upsampling, the full-size fields and the consistency check), which does not
  depend on the width of the network, and the 1/4-resolution encoder stage, whose ConvFormer
  blocks widen ``dims[0]`` channels four times.
- The correlation term is exact in form: stereo's row-wise volumes ``[B, h, w, w]`` are
  gathered, masked, concatenated, soft-maxed and filled (about ten float32-sized copies alive at
  once, int64 indices included); flow's all-pairs ``[B, hw, hw]`` scores are transposed,
  concatenated, soft-maxed and box-filtered (five copies). Flow's grows with the square of the
  pixel count: an 8000x8000 flow needs about 80 GiB for it alone.
- The terms are added, which overstates flow by up to the smaller of the two where they are
  comparable (2000 to 5000 px a side); where either dominates the sum is close.

Calibration (peak RSS ``VmHWM`` after resetting it through ``/proc/self/clear_refs``, minus
``VmRSS`` before the call, after a warm-up call; random images, two OpenMP threads, torch 2.13
CPU; per padded pixel and pair, the bundled models and published architectures with random
weights):

=====================  ==============  ===========  ================  ================
model (``dims[0]``)    run             padded size  measured B/px     estimate B/px
=====================  ==============  ===========  ================  ================
matchstereo-mini (16)  stereo          256x512      559 (70 MiB)      1033 (FIXED)
matchstereo-mini (16)  stereo          512x1024     499               649
matchstereo-mini (16)  stereo          1024x1024    410               585
matchstereo-mini (16)  stereo          1024x2048    503               555
matchstereo-mini (16)  stereo          2048x2048    413               539
matchstereo-mini (16)  stereo          4000x4000    347 (5.2 GiB)     530 (7.9 GiB)
matchstereo-mini (16)  stereo, B=2     512x512      523               649
matchstereo-mini (16)  stereo, lri     1024x1024    550               780 (+ half)
matchstereo-mini (16)  stereo, bf16    1024x1024    322               585
matchstereo-mini (16)  size=256x256    3008x3008    131 (per input)   161 (per input)
matchflow-mini (16)    flow            512x512      488               782
matchflow-mini (16)    flow            1024x1024    435               606
matchflow-mini (16)    flow            2048x2048    399               624
matchflow-mini (16)    flow            3072x3072    419 (3.7 GiB)     725 (6.4 GiB)
matchstereo-t (32)     stereo          512x512      448               777
matchstereo-t (32)     stereo          1024x1024    540               585
matchstereo-t (32)     stereo          1024x2048    517               555
matchstereo-b (128)    stereo          512x512      1455              1737
matchstereo-b (128)    stereo          1024x1024    1452              1545
=====================  ==============  ===========  ================  ================

Every estimate lies above its measurement, by 6 % to 85 % (most at small sizes, where
:data:`FIXED` dominates, and for mid-size flow, where the two terms are added). ``lri`` adds
the half-resolution pass's estimate; ``size=`` (fixed-resolution inference) adds
``crossview.api.RESIZE_BYTES_PER_PIXEL`` per input pixel for the full-size images and fields.

The initial correlation alone (``InitCorrelation`` on random features) peaked at 5.04 and 5.02
flow score-matrix copies (h = w = 96 and 128) and 9.6 and 10.1 stereo volume copies (128x512,
250x250 tokens); :data:`FLOW_COPIES` and :data:`STEREO_COPIES` add a tenth. The allocator
makes single measurements vary by about 20 % between sizes; the constants sit above every
measurement. bf16 autocast needs less than float32. On CUDA the reference MatchAttention
backend runs instead of the fused kernels and was not measured: the estimate is then a lower
bound.
"""

from __future__ import annotations

from crossview.models.matchstereo.config import MatchStereoConfig

FULL_RES = 520.0  # bytes per padded pixel and pair: the network-width-free full-size tail
BASE = 200.0  # bytes per padded pixel and pair besides the 1/4-resolution encoder stage
PER_CHANNEL = 10.0  # bytes per padded pixel, pair and channel of dims[0]
STEREO_COPIES = 11.0  # float32 copies of the [B, h, w, w] stereo volume alive at once
FLOW_COPIES = 5.5  # float32 copies of the [B, hw, hw] flow scores alive at once
FIXED = 64 * 2**20  # allocator pools and per-call workspaces


def inference_bytes(config: MatchStereoConfig, task: str, batch: int, height: int,
                    width: int) -> int:
    """Peak memory (bytes) of ``crossview.api.estimate_disparity`` / ``estimate_flow`` on
    ``batch`` pairs padded to ``height x width`` px (multiples of 32), as the module docstring
    derives and calibrates it.

    Example:
        >>> from crossview.models.matchstereo.config import VARIANTS
        >>> round(inference_bytes(VARIANTS["tiny"], "stereo", 1, 1024, 1024) / 2**20)
        585
    """
    h, w = height // 32, width // 32
    per_pixel = max(FULL_RES, BASE + PER_CHANNEL * config.dims[0])
    if task == "stereo":
        volume = STEREO_COPIES * 4 * batch * h * w * w
    else:
        volume = FLOW_COPIES * 4 * batch * (h * w) ** 2
    return int(batch * height * width * per_pixel + volume + FIXED)
