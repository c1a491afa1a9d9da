"""Training configuration: a YAML file validated into nested dataclasses.

Every section is a dataclass with defaults; a key the dataclass does not know is an error that
names it with its full path (``train.stpes``), and a value of the wrong type is an error naming
the key and the expected type. ``load_config(path)`` reads a file, ``config_from_dict`` a
mapping (the Python API).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from crossview.errors import UserError


@dataclass
class ModelConfig:
    """Which model to train: a registry name plus overrides of its configuration fields."""

    name: str = "matchstereo-t"
    overrides: dict[str, Any] = field(default_factory=dict)


@dataclass
class DataConfig:
    """Training and validation data (dataset names of :mod:`crossview.data`)."""

    train: str = "synthetic-stereo"
    train_size: int = 10000
    val: str = "synthetic-stereo"
    val_size: int = 16
    height: int = 192
    width: int = 256
    seed: int = 0


@dataclass
class LossConfig:
    """Weights and parameters of the paper's loss terms (a weight of 0 switches a term off)."""

    init_weight: float = 1.0
    self_weight: float = 1.0
    cross_weight: float = 1.0
    gamma: float = 0.9
    noc_mask: bool = True
    noc_threshold: float = 1.0
    consistency_eps: float = 0.01
    adl_window: int = 3
    adl_cluster_eps: float = 1.0
    adl_alpha: float = 0.8
    adl_scale: float = 0.8


@dataclass
class OptimConfig:
    """AdamW with a one-cycle learning-rate schedule and gradient-norm clipping."""

    lr: float = 4e-4
    weight_decay: float = 0.05
    betas: tuple[float, float] = (0.9, 0.999)
    pct_start: float = 0.05
    grad_clip: float = 1.0


@dataclass
class TrainConfig:
    """The loop: steps, global batch, precision, cadence of logs, validation and checkpoints."""

    steps: int = 1000
    batch_size: int = 2
    precision: str = "fp32"
    device: str = "cpu"
    seed: int = 0
    out_dir: str = "runs/train"
    log_every: int = 10
    val_every: int = 200
    ckpt_every: int = 100
    keep_last: int = 3
    max_nonfinite: int = 10


@dataclass
class Config:
    """A whole training run."""

    task: str = "stereo"
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    loss: LossConfig = field(default_factory=LossConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    train: TrainConfig = field(default_factory=TrainConfig)

    def __post_init__(self) -> None:
        if self.task not in ("stereo", "flow"):
            raise UserError(f"config: task must be 'stereo' or 'flow', got {self.task!r}")
        if self.train.precision not in ("fp32", "bf16", "fp16"):
            raise UserError("config: train.precision must be fp32, bf16 or fp16, got "
                            f"{self.train.precision!r}")
        for key in ("steps", "batch_size", "log_every", "val_every", "ckpt_every", "keep_last",
                    "max_nonfinite"):
            if getattr(self.train, key) < 1:
                raise UserError(f"config: train.{key} must be >= 1")
        for key in ("train_size", "height", "width"):
            if getattr(self.data, key) < 1:
                raise UserError(f"config: data.{key} must be >= 1")
        if self.data.val_size < 0:
            raise UserError("config: data.val_size must be >= 0")


def _convert(value: Any, annotation: Any, path: str) -> Any:
    """Check/convert one YAML value against a dataclass field annotation."""
    origin = typing.get_origin(annotation)
    if dataclasses.is_dataclass(annotation):
        if not isinstance(value, dict):
            raise UserError(f"config: {path} must be a mapping, got {value!r}")
        return _build(annotation, value, path)
    if origin is dict:
        if not isinstance(value, dict):
            raise UserError(f"config: {path} must be a mapping, got {value!r}")
        return dict(value)
    if origin is tuple:
        kinds = typing.get_args(annotation)
        if not isinstance(value, list | tuple) or len(value) != len(kinds):
            raise UserError(f"config: {path} must be a list of {len(kinds)} values, got {value!r}")
        return tuple(_convert(v, k, f"{path}[{i}]") for i, (v, k) in enumerate(zip(value, kinds,
                                                                                    strict=True)))
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in typing.get_args(annotation):
            return None
        annotation = next(a for a in typing.get_args(annotation) if a is not type(None))
    if annotation is float and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if annotation in (int, str, bool) and type(value) is annotation:
        return value
    raise UserError(f"config: {path} must be {getattr(annotation, '__name__', annotation)}, "
                    f"got {value!r}")


def _build(cls: type, values: dict[str, Any], prefix: str = "") -> Any:
    hints = typing.get_type_hints(cls)
    known = {f.name for f in dataclasses.fields(cls)}
    kwargs = {}
    for key, value in values.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        if key not in known:
            raise UserError(f"config: unknown key {path!r} (known: {', '.join(sorted(known))})")
        kwargs[key] = _convert(value, hints[key], path)
    return cls(**kwargs)


def config_from_dict(values: dict[str, Any]) -> Config:
    """Validate a nested mapping (as read from YAML) into a :class:`Config`."""
    if not isinstance(values, dict):
        raise UserError(f"config: the top level must be a mapping, got {type(values).__name__}")
    return _build(Config, values)


def load_config(path: str | Path) -> Config:
    """Read and validate a YAML training configuration."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"config file not found: {path}")
    try:
        values = yaml.safe_load(path.read_text()) or {}
    except UnicodeDecodeError:
        raise UserError(f"config file {path} is not a text file") from None
    except yaml.YAMLError as error:  # its str() spans several lines: keep the problem and place
        mark = getattr(error, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(error, "problem", None) or type(error).__name__
        raise UserError(f"config file {path} is not valid YAML: {problem}{where}") from None
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
