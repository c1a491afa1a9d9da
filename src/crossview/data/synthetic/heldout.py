"""The fixed-seed held-out synthetic benchmarks, by dataset name.

``get_heldout("synthetic-stereo")`` and ``get_heldout("synthetic-flow")`` return a few hundred
pairs generated on the fly with seed :data:`HELDOUT_SEED` and ``split="heldout"``: their random
streams are keyed differently from every training stream (see
:mod:`crossview.data.synthetic.dataset`) and their photographic textures come only from the
held-out photographs, so no training run ever sees them. ``"synthetic-warp"`` is the held-out
semantic-matching set (warped held-out photographs with keypoints).

A benchmark is its name plus the defaults below; passing another ``length`` or ``size`` gives
a different (smaller or larger) benchmark, which a report should say.
"""

from __future__ import annotations

from crossview.data.synthetic.dataset import SyntheticDataset
from crossview.data.synthetic.flow import FlowConfig, SyntheticFlow
from crossview.data.synthetic.stereo import StereoConfig, SyntheticStereo
from crossview.data.synthetic.warps import SyntheticWarps, WarpConfig
from crossview.errors import UserError

HELDOUT_SEED = 20240917
DEFAULTS: dict[str, tuple[int, tuple[int, int]]] = {  # name -> (length, (H, W))
    "synthetic-stereo": (200, (256, 512)),
    "synthetic-flow": (200, (256, 512)),
    "synthetic-warp": (200, (240, 240)),
}


def heldout_names() -> tuple[str, ...]:
    """The dataset names :func:`get_heldout` accepts."""
    return tuple(DEFAULTS)


def get_heldout(name: str, *, length: int | None = None,
                size: tuple[int, int] | None = None) -> SyntheticDataset:
    """The held-out benchmark ``name`` as a torch Dataset (samples as documented in
    :mod:`crossview.data.synthetic.stereo`, ``.flow`` and ``.warps``).

    Example:
        >>> ds = get_heldout("synthetic-stereo", length=2, size=(32, 64))
        >>> len(ds), tuple(ds[0]["disparity"].shape)
        (2, (32, 64))
    """
    if name not in DEFAULTS:
        raise UserError(f"unknown synthetic dataset {name!r}; expected one of "
                        f"{', '.join(DEFAULTS)}")
    default_length, default_size = DEFAULTS[name]
    n = default_length if length is None else length
    hw = default_size if size is None else size
    if n < 1 or len(hw) != 2 or min(hw) < 16:
        raise UserError(f"{name}: length must be >= 1 and size at least 16x16, got "
                        f"length={n}, size={hw}")
    hw = (int(hw[0]), int(hw[1]))
    if name == "synthetic-stereo":
        return SyntheticStereo(n, seed=HELDOUT_SEED, split="heldout", config=StereoConfig(size=hw))
    if name == "synthetic-flow":
        return SyntheticFlow(n, seed=HELDOUT_SEED, split="heldout", config=FlowConfig(size=hw))
    return SyntheticWarps(n, seed=HELDOUT_SEED, split="heldout",
                          config=WarpConfig(size=hw, num_keypoints=64))
