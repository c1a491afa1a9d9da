"""``--save-confidence``: each view's per-pixel confidence in [0, 1]
(:mod:`crossview.geometry.confidence`) as ``NAME_VIEW_confidence.npy`` (float32) and
``NAME_VIEW_confidence.png`` (8-bit grey, 255 = 1)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from crossview.lazy import lazy_import
from crossview.output import check_finite

if TYPE_CHECKING:
    import torch

api = lazy_import("crossview.api")
np = lazy_import("numpy")

SaveConfidence = Annotated[bool, typer.Option(
    "--save-confidence", help="Also save the per-pixel confidence in [0, 1] (.npy and .png).")]


def confidence_picture(confidence: np.ndarray) -> np.ndarray:
    """``[H, W]`` in [0, 1] -> uint8 grey ``[H, W]`` (``round(255 c)``)."""
    return np.round(np.clip(confidence, 0, 1) * 255).astype(np.uint8)


@dataclass(frozen=True)
class ConfidenceOutput:
    """The confidence files of the views ``views`` (names as the raw files': ``disp``,
    ``disp_right``, ``flow`` ...); ``tensors(result)`` gives their confidences ``[B, H, W]``;
    ``source`` names what made them (the model), for the error when one is not finite."""

    views: tuple[str, ...]
    tensors: Callable[[Any], list[torch.Tensor]]
    source: str

    def check(self, images: list[tuple[np.ndarray, np.ndarray]]) -> None:
        """Nothing to check: any pair has a confidence."""

    def file_names(self, name: str) -> list[str]:
        return [f"{name}_{view}_confidence{suffix}" for view in self.views
                for suffix in (".npy", ".png")]

    def writers(self, images: tuple[np.ndarray, np.ndarray], result: Any
                ) -> list[Callable[[Path], None]]:
        """Writers of batch row 0's confidences, in :meth:`file_names` order."""
        writers: list[Callable[[Path], None]] = []
        for confidence in self.tensors(result)[: len(self.views)]:
            values = confidence[0].cpu().numpy().astype(np.float32)
            check_finite(values, f"{self.source} gave a non-finite confidence")
            picture = confidence_picture(values)
            writers += [lambda path, v=values: api.write_npy(path, v),
                        lambda path, p=picture: api.write_image(path, p)]
        return writers
