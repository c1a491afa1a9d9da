"""Training configuration: a YAML file validated into nested dataclasses.

Every section is a dataclass with defaults, and every field declares its type and range
(:func:`crossview.settings.setting`): a key the dataclass does not know is an error that names
it with its full path (``train.stpes``), and so is a value of the wrong type or out of range
(``config: optim.lr must be > 0, got -0.001``). ``load_config(path)`` reads a file,
``config_from_dict`` a mapping (the Python API). ``model.overrides`` are checked against the
model's own configuration when the model is built, and ``recipe`` against the options of the
task's recipe (:mod:`crossview.train.recipes`): both by the recipe, before training starts.

The file is read by a strict YAML loader (:class:`ConfigLoader`): PyYAML's safe loader without
what a configuration never needs and an attacker would use: anchors and aliases (a
"billion laughs" file expands a few lines into gigabytes), duplicated keys (the last would win
in silence), nesting beyond :data:`MAX_DEPTH` levels (PyYAML's composer recurses) and numbers
written with more than :data:`MAX_NUMBER_CHARS` characters. Each is one error naming its line.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from crossview.errors import UserError, shown
from crossview.settings import SettingError, build, check, setting

SEED_MAX = 2**31 - 1  # seeds are mixed into 64-bit generator seeds (seed * 1_000_003 + epoch)
POSITIVE = {"low": 0, "low_open": True}
NON_NEGATIVE = {"low": 0}
AT_LEAST_1 = {"low": 1}
SEED = {"low": 0, "high": SEED_MAX}
SCHEDULES = ("one-cycle", "constant", "cosine")
MAX_DEPTH = 32  # a configuration nests 3 levels; ~330 exhaust Python's stack in the composer
MAX_NUMBER_CHARS = 100  # int("9" * 5000) even raises: Python limits integer text to 4300 digits


class _Refused(yaml.MarkedYAMLError):
    """Valid YAML that a configuration refuses (see :class:`ConfigLoader`)."""


def _refuse(problem: str, node_or_event: Any) -> _Refused:
    return _Refused(problem=problem, problem_mark=node_or_event.start_mark)


class ConfigLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses anchors and aliases, duplicate keys, nesting deeper
    than :data:`MAX_DEPTH` and numbers longer than :data:`MAX_NUMBER_CHARS` characters, each
    with the place it was found."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            raise _refuse("anchors and aliases (& and *) are not allowed in a configuration",
                          event)
        if self._depth >= MAX_DEPTH:
            raise _refuse(f"nested deeper than {MAX_DEPTH} levels", event)
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # <<: the merged keys may repeat
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.get(key)
            except TypeError:  # an unhashable key: the safe loader's own error names it
                continue
            if first is not None:
                raise _refuse(f"duplicate key {shown(key)} (first on line {first})", key_node)
            seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep)


def _bounded_number(construct: Any) -> Any:
    def checked(loader: ConfigLoader, node: yaml.ScalarNode) -> Any:
        if len(node.value) > MAX_NUMBER_CHARS:
            raise _refuse(f"a number written with {len(node.value)} characters (at most "
                          f"{MAX_NUMBER_CHARS})", node)
        return construct(loader, node)
    return checked


for _tag, _construct in (("tag:yaml.org,2002:int", yaml.SafeLoader.construct_yaml_int),
                         ("tag:yaml.org,2002:float", yaml.SafeLoader.construct_yaml_float)):
    ConfigLoader.add_constructor(_tag, _bounded_number(_construct))


@dataclass
class ModelConfig:
    """Which model to train: a registry name (or the file of an exported model) plus overrides
    of its configuration fields, and the weights it starts from: ``init_weights``, a
    registered model's name (its bundled or published weights) or a weights file; empty:
    random (``crossview train --init-weights`` replaces it)."""

    name: str = "matchstereo-t"
    overrides: dict[str, Any] = field(default_factory=dict)
    init_weights: str = ""


@dataclass
class DataConfig:
    """Training and validation data (dataset names of :mod:`crossview.data`; each task's recipe
    says which it reads: ``synthetic-stereo``, ``synthetic-flow``, ``synthetic-warps``
    (semantic), ``camera-scenes`` (novel-view), ``depth-scenes`` (multiview-depth)).

    ``augment`` applies to training samples only: ``none`` (the clean render at
    ``height x width``), ``standard`` (RAFT-Stereo / RAFT augmentation: colour, erasing, scale,
    y jitter or flips) or ``camera`` (standard plus per-view sensor effects:
    :mod:`crossview.data.camera_effects`). Augmented scenes are rendered ``render_scale`` times
    larger than the crop so that the random scale can also shrink them.
    ``street_probability``: the share of training scenes that are street layouts
    (:mod:`crossview.data.synthetic.street`); validation keeps the default scenes.

    ``real_scenes``: a folder of real stereo scene folders with ground truth
    (:mod:`crossview.data.real_stereo`; task flow reads each pair as frames with horizontal
    motion, frames swapped and transposed at random); ``real_fraction`` of the training samples are
    augmented crops of them, the rest synthetic. ``real_holdout`` names scenes kept out of
    training; ``val: real-scenes`` validates on them (whole, cropped to multiples of 32).

    ``real``: a folder of unlabelled real pairs for the self-supervised term
    ``loss.photometric_weight``: image sequences for flow
    (:mod:`crossview.data.datasets.image_sequences`; pairs of frames at most ``real_max_gap``
    apart), rectified stereo pairs for stereo (:mod:`crossview.data.datasets.stereo_pairs`);
    each step adds ``real_batch_size`` crops of ``height x width`` of them to the batch.
    """

    train: str = "synthetic-stereo"  # checked by the task's recipe (Recipe.datasets)
    train_size: int = setting(10000, **AT_LEAST_1)
    val: str = "synthetic-stereo"
    val_size: int = setting(16, **NON_NEGATIVE)
    height: int = setting(192, **AT_LEAST_1)
    width: int = setting(256, **AT_LEAST_1)
    seed: int = setting(0, **SEED)
    augment: str = setting("none", choices=("none", "standard", "camera"))
    render_scale: float = setting(1.0, low=1.0)
    street_probability: float = setting(0.0, low=0, high=1)
    real: str = ""
    real_batch_size: int = setting(1, **AT_LEAST_1)
    real_max_gap: int = setting(2, **AT_LEAST_1)
    real_scenes: str = ""
    real_fraction: float = setting(0.5, low=0, high=1)
    real_holdout: tuple[str, ...] = ()


@dataclass
class LossConfig:
    """Weights and parameters of the paper's loss terms (a weight of 0 switches a term off),
    and of the self-supervised term on unlabelled real pairs (``photometric_weight``, needs
    ``data.real``; ``smooth_weight`` weighs its smoothness against its census term:
    :mod:`crossview.train.photometric`)."""

    init_weight: float = setting(1.0, **NON_NEGATIVE)
    self_weight: float = setting(1.0, **NON_NEGATIVE)
    cross_weight: float = setting(1.0, **NON_NEGATIVE)
    gamma: float = setting(0.9, low=0, high=1, low_open=True)
    noc_mask: bool = True
    noc_threshold: float = setting(1.0, **POSITIVE)
    consistency_eps: float = setting(0.01, **NON_NEGATIVE)
    adl_window: int = setting(3, low=1, odd=True)
    adl_cluster_eps: float = setting(1.0, **NON_NEGATIVE)
    adl_alpha: float = setting(0.8, low=0, high=1)
    adl_scale: float = setting(0.8, **POSITIVE)
    photometric_weight: float = setting(0.0, **NON_NEGATIVE)
    smooth_weight: float = setting(0.5, **NON_NEGATIVE)


@dataclass
class OptimConfig:
    """AdamW with a learning-rate schedule and gradient-norm clipping (0: none).

    ``schedule``: ``one-cycle`` (linear warm-up over ``pct_start`` of the steps, then linear
    decay), ``constant``, or ``cosine`` (linear warm-up over ``pct_start`` of the steps, then
    cosine decay to 0). ``lr`` is the peak rate; a recipe may give parameter groups their own
    peak (the semantic recipe's ``backbone_lr``).
    """

    lr: float = setting(4e-4, **POSITIVE)
    weight_decay: float = setting(0.05, **NON_NEGATIVE)
    betas: tuple[float, float] = setting((0.9, 0.999), low=0, high=1, high_open=True)
    pct_start: float = setting(0.05, low=0, high=1)
    grad_clip: float = setting(1.0, **NON_NEGATIVE)
    schedule: str = setting("one-cycle", choices=SCHEDULES)


@dataclass
class TrainConfig:
    """The loop: steps, global batch, precision, cadence of logs, validation and checkpoints.

    ``device`` is checked against this machine when training starts
    (:func:`crossview.device.resolve_device`). ``workers``: processes that make the training
    samples ahead of the steps (0: the training process makes each batch itself); every
    sample depends only on its index, so the batches are the same either way, and a GPU need
    not wait for samples rendered on one CPU core. ``tensorboard``: also write the log as
    TensorBoard events, with pictures of validation predictions, to ``out_dir/tensorboard``
    when the package ``tensorboard`` is installed (:mod:`crossview.train.tensorboard_log`)."""

    steps: int = setting(1000, **AT_LEAST_1)
    batch_size: int = setting(2, **AT_LEAST_1)
    precision: str = setting("fp32", choices=("fp32", "bf16", "fp16"))
    device: str = "cpu"
    seed: int = setting(0, **SEED)
    out_dir: str = "runs/train"
    log_every: int = setting(10, **AT_LEAST_1)
    val_every: int = setting(200, **AT_LEAST_1)
    ckpt_every: int = setting(100, **AT_LEAST_1)
    keep_last: int = setting(3, **AT_LEAST_1)
    max_nonfinite: int = setting(10, **AT_LEAST_1)
    workers: int = setting(0, **NON_NEGATIVE)
    tensorboard: bool = True


@dataclass
class Config:
    """A whole training run; every field is checked on construction (:class:`SettingError`
    naming the key). ``task`` chooses the recipe; ``recipe`` holds its own options."""

    task: str = "stereo"  # one of the registered recipes' (crossview.train.recipe.RECIPES)
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    loss: LossConfig = field(default_factory=LossConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    recipe: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check(self)


def config_from_dict(values: dict[str, Any]) -> Config:
    """Validate a nested mapping (as read from YAML) into a :class:`Config`; every mistake is a
    :class:`UserError` ``config: KEY ...``."""
    if not isinstance(values, dict):
        raise UserError(f"config: the top level must be a mapping, got {type(values).__name__}")
    try:
        return build(Config, values)
    except SettingError as error:
        raise UserError(f"config: {error}") from None


def load_config(path: str | Path) -> Config:
    """Read and validate a YAML training configuration."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"config file not found: {path}")
    try:
        values = yaml.load(path.read_text(), Loader=ConfigLoader) or {}
    except UnicodeDecodeError:
        raise UserError(f"config file {path} is not a text file") from None
    except yaml.YAMLError as error:  # its str() spans several lines: keep the problem and place
        mark = getattr(error, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(error, "problem", None) or type(error).__name__
        kind = "" if isinstance(error, _Refused) else " is not valid YAML"
        raise UserError(f"config file {path}{kind}: {problem}{where}") from None
    return config_from_dict(values)


def config_to_dict(cfg: Config) -> dict[str, Any]:
    """The inverse of :func:`config_from_dict` (tuples become lists, as YAML writes them)."""
    def plain(value: Any) -> Any:
        if isinstance(value, tuple):
            return [plain(v) for v in value]
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        return value

    return plain(dataclasses.asdict(cfg))
