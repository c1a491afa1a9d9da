"""The MatchStereo / MatchFlow models by name.

Built in: ``matchstereo-t``, ``matchstereo-s``, ``matchstereo-b`` (stereo) and ``matchflow-b``
(optical flow), the published architectures; their published weights are not shipped: they
are fetched by name from where the authors publish them (:data:`PUBLISHED_AT`, see
:mod:`crossview.models.published`), or passed with ``weights=``. Bundled models are data
only: a ``NAME.safetensors`` and a ``NAME.json`` next to it in ``crossview/models/weights/``
(shipped as package data), as :mod:`crossview.models.matchstereo.bundle` writes them
(``crossview train --export``); the JSON's ``"weights"`` defaults to ``NAME.safetensors``.
A bundle elsewhere is the model named by its path: ``--model runs/my-stereo.safetensors``
(:func:`exported_bundle`).
"""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

from crossview.errors import UserError
from crossview.models.dense.inference import (
    NETWORK_ALONE,
    NETWORK_ALONE_CAPTIONS,
    SELF_FUSED,
    SELF_FUSED_CAPTION,
    dense_predictor,
)
from crossview.models.matchstereo.config import VARIANTS, MatchStereoConfig
from crossview.models.matchstereo.model import MatchStereo
from crossview.models.published import PublishedWeights
from crossview.models.registry import (
    WEIGHTS_DIR,
    FusedNetwork,
    ModelSpec,
    configured,
    register_model,
    register_model_files,
)

# the MatchAttention authors' Hugging Face model repository; a file's download is this + name
PUBLISHED_AT = "https://huggingface.co/Tingman/MatchAttention/resolve/main/"


def matchstereo_spec(name: str, config: MatchStereoConfig, task: str, *,
                     weights: str | None = None, description: str = "",
                     published: str | None = None, refine: bool = False,
                     lri: bool = False, fuse: bool = False,
                     fused_network: FusedNetwork | None = None) -> ModelSpec:
    """The spec of a MatchStereo (``task="stereo"``) or MatchFlow (``"flow"``) network of
    ``config``; overrides replace config fields. ``published``: the file name of the authors'
    checkpoint under :data:`PUBLISHED_AT`; ``refine``: photometric refinement by default
    (:attr:`~crossview.models.registry.ModelSpec.refine`); ``lri``: low-resolution
    initialisation by default (:attr:`~crossview.models.registry.ModelSpec.lri`); ``fuse``:
    fused with SGBM (stereo) or DIS (flow) by default
    (:attr:`~crossview.models.registry.ModelSpec.fuse`), and then scored beside its network
    alone (the variant ``network``) and, for stereo, its network self-fused (``self-fused``);
    ``fused_network``: how the network runs then
    (:attr:`~crossview.models.registry.ModelSpec.fused_network`)."""
    return ModelSpec(name, configured(config, partial(MatchStereo, task=task)), task,
                     weights=weights, description=description,
                     predictor=dense_predictor,
                     published=None if published is None
                     else PublishedWeights(published, PUBLISHED_AT + published),
                     refine=refine, lri=lri, fuse=fuse, fused_network=fused_network,
                     variants=_variants(task) if fuse else {})


def _variants(task: str) -> dict[str, str]:
    """The predictor variants of a fusing model of ``task``: its network alone, and for
    stereo its network's views fused with each other."""
    alone = {NETWORK_ALONE: NETWORK_ALONE_CAPTIONS[task]}
    return {**alone, SELF_FUSED: SELF_FUSED_CAPTION} if task == "stereo" else alone


def bundle_spec(description: Path, name: str | None = None) -> ModelSpec:
    """The spec of the bundle that ``description`` (``NAME.json``) describes, its weights file
    beside it, under ``name`` (default: the JSON's ``"name"``); ``ValueError`` naming the file
    for a description that does not hold one."""
    try:
        meta = json.loads(description.read_text())
        config = MatchStereoConfig(**{k: tuple(v) if isinstance(v, list) else v
                                      for k, v in meta.get("config", {}).items()})
        return matchstereo_spec(
            meta["name"] if name is None else name, config, meta["task"],
            weights=str(description.parent / meta.get("weights",
                                                      f"{description.stem}.safetensors")),
            description=meta.get("description", ""), refine=bool(meta.get("refine", False)),
            lri=bool(meta.get("lri", False)), fuse=bool(meta.get("fuse", False)),
            fused_network=None if "fused_network" not in meta
            else FusedNetwork(**meta["fused_network"]))
    except (ValueError, KeyError, TypeError) as error:
        raise ValueError(f"{description}: bad model description ({error!r})") from None


def register_bundled(folder: Path = WEIGHTS_DIR) -> None:
    """Register every ``*.json`` description of bundled MatchStereo weights in ``folder``."""
    for description in sorted(folder.glob("*.json")):
        register_model(bundle_spec(description), replace=True)


@register_model_files
def exported_bundle(path: Path) -> ModelSpec | None:
    """The model of a bundle that ``crossview train --export`` wrote, named by ``path``: its
    ``NAME.safetensors`` (or ``NAME.json``) with ``NAME.json`` beside it; None for other
    files. A description that holds no bundle is a :class:`UserError` naming it."""
    description = path.with_suffix(".json")
    if path.suffix not in (".safetensors", ".json") or not description.is_file():
        return None
    try:
        return bundle_spec(description, name=str(path))
    except ValueError as error:
        raise UserError(str(error)) from None


for _letter, _variant in (("t", "tiny"), ("s", "small"), ("b", "base")):
    register_model(matchstereo_spec(
        f"matchstereo-{_letter}", VARIANTS[_variant], "stereo",
        description=f"MatchStereo-{_letter.upper()} (published architecture and weights, "
                    "FoundationStereo synthetic data)",
        published=f"matchstereo_{_variant}_fsd.pth"))
register_model(matchstereo_spec(
    "matchflow-b", VARIANTS["base"], "flow",
    description="MatchFlow-B (published architecture and weights, fine-tuned on Sintel)",
    published="matchflow_base_sintel.pth"))
register_bundled()
