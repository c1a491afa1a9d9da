"""Load weights into a model: published ``.pth`` checkpoints, bare state dicts, ``.safetensors``.

Nothing is ever unpickled beyond tensors and plain containers (``torch.load(...,
weights_only=True)``); a file that holds other Python objects is refused for safety, naming
them where torch can list them. Every tensor must be finite: a file holding NaN or infinity
(a diverged training run) is refused naming the tensor. Keys and shapes are checked before
loading, and a mismatch raises a :class:`~crossview.errors.UserError` naming the first
offenders, so a wrong file is reported as what it is rather than as a torch traceback.

MatchStereo and MatchFlow share one architecture, so keys and shapes cannot tell stereo weights
from flow weights. ``.safetensors`` written by crossview therefore record their task in the
file's metadata (key :data:`TASK_KEY`), and a file recording another task than the model's is
refused. Files without that record (older exports, converted ``.pth``) load as before;
:func:`record_task` stamps one into an existing file.
"""

from __future__ import annotations

import math
import os
import pickle
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file
from torch import nn

from crossview.errors import UserError
from crossview.output import atomic_output

SHOWN = 5  # offenders named per kind of mismatch
TASK_KEY = "task"  # .safetensors metadata: the task the weights were trained for

# ``hint(state_dict)``: what a mismatch error adds after the offenders (the registry names the
# models the weights do fit); it starts with "; "
MismatchHint = Callable[[Mapping[str, torch.Tensor]], str]


def read_state_dict(path: str | os.PathLike[str], task: str | None = None
                    ) -> dict[str, torch.Tensor]:
    """Read a state dict from ``path`` on the CPU.

    ``.safetensors`` files are read directly; with ``task``, one whose metadata records another
    task is refused. Anything else goes through ``torch.load(weights_only=True)``: a bare state
    dict, or a checkpoint dict holding it under ``"model"`` or ``"state_dict"`` (the published
    MatchStereo checkpoints use ``"model"``).
    Raises :class:`UserError` for a missing, unreadable, non-state-dict, other-task or
    non-finite file.
    """
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: no such weights file")
    if path.suffix == ".safetensors":
        tensors, metadata = read_safetensors(path)
        recorded = metadata.get(TASK_KEY)
        if task is not None and recorded is not None and recorded != task:
            raise UserError(f"{path}: the file records task {recorded!r} but {task!r} weights "
                            "are expected")
        return check_finite(tensors, path)
    content = load_tensors_only(path)
    if isinstance(content, Mapping):
        for key in ("model", "state_dict"):
            if isinstance(content.get(key), Mapping):
                content = content[key]
                break
    if not isinstance(content, Mapping) or not all(
            isinstance(v, torch.Tensor) for v in content.values()):
        raise UserError(f"{path}: not a state dict (expected name -> tensor, or a checkpoint "
                        "with one under 'model' or 'state_dict')")
    return check_finite(dict(content), path)


def check_finite(tensors: dict[str, torch.Tensor], path: str | os.PathLike[str]
                 ) -> dict[str, torch.Tensor]:
    """``tensors`` unchanged if every floating-point one is finite, else a :class:`UserError`
    naming ``path``, the first tensor holding NaN or infinity and how many do."""
    bad = [key for key, value in tensors.items()
           if value.is_floating_point() and not bool(torch.isfinite(value).all())]
    if bad:
        others = f" (and {len(bad) - 1} more tensors)" if len(bad) > 1 else ""
        raise UserError(f"{path}: tensor {bad[0]!r}{others} holds NaN or infinite values; "
                        "these weights are unusable (a diverged training run?)")
    return tensors


@contextmanager
def _open_safetensors(path: str | os.PathLike[str]) -> Iterator[Any]:
    """The ``safe_open`` handle of a ``.safetensors`` file; :class:`UserError` naming ``path``
    if it cannot be read."""
    try:
        with safe_open(path, framework="pt", device="cpu") as handle:
            yield handle
    except (SafetensorError, OSError, ValueError) as error:
        raise UserError(f"{path}: cannot read weights ({str(error).splitlines()[0]})") from None


def read_safetensors(path: str | os.PathLike[str]
                     ) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """The tensors (on the CPU) and the metadata (``{}`` if none) of a ``.safetensors`` file;
    :class:`UserError` naming ``path`` if it cannot be read."""
    with _open_safetensors(path) as handle:
        return ({key: handle.get_tensor(key) for key in handle.keys()},  # noqa: SIM118 (not iterable)
                handle.metadata() or {})


def safetensors_numel(path: str | os.PathLike[str]) -> int:
    """How many values the tensors of a ``.safetensors`` file hold, read from its header (no
    tensor is read); :class:`UserError` naming ``path`` if it cannot be read."""
    with _open_safetensors(path) as handle:
        return sum(math.prod(handle.get_slice(key).get_shape())
                   for key in handle.keys())  # noqa: SIM118 (not iterable)


def write_safetensors(path: str | os.PathLike[str], tensors: Mapping[str, torch.Tensor],
                      task: str, metadata: Mapping[str, str] | None = None) -> Path:
    """Write ``tensors`` (detached, on the CPU, contiguous) as the ``.safetensors`` file
    ``path`` with ``metadata`` plus ``task`` under :data:`TASK_KEY` (which wins over a ``task``
    in ``metadata``). Atomic: the file is written under a temporary name in the same directory
    and renamed onto ``path``, so ``path`` is either the old file or the complete new one.
    Returns ``path``; the directory must exist (else :class:`UserError`)."""
    path = Path(path)
    tensors = {key: value.detach().to("cpu").contiguous() for key, value in tensors.items()}
    with atomic_output(path) as tmp:
        save_file(tensors, str(tmp), metadata={**(metadata or {}), TASK_KEY: task})
    return path


def record_task(path: str | os.PathLike[str], task: str, **metadata: str) -> Path:
    """Stamp ``task`` (and any further ``metadata`` strings, such as ``name``) into the
    metadata of the existing ``.safetensors`` file ``path``, keeping its tensors and its other
    metadata; the file is rewritten atomically. Returns ``path``.

    Example (weights exported before the task was recorded), from a shell::

        python -c "import crossview.models.weights as w; w.record_task('x.safetensors', 'flow')"
    """
    tensors, existing = read_safetensors(path)
    return write_safetensors(path, tensors, task, {**existing, **metadata})


def load_tensors_only(path: str | os.PathLike[str], what: str = "weights") -> object:
    """``torch.load(path, weights_only=True)`` on the CPU; every failure is one
    :class:`UserError` line ``"{path}: cannot read {what} (why)"``.

    A pickle that torch's weights-only unpickler refuses (its ``pickle.UnpicklingError``,
    whatever the wording) holds Python objects other than tensors and plain containers: it is
    refused for safety, naming the objects where torch can list them. A file that is not a
    pickle at all (no zip archive, no pickle protocol mark) is reported as not a checkpoint.
    """
    weights = what == "weights"  # the hints below are about weight files
    foreign = "not a PyTorch checkpoint" + (" or a .safetensors file" if weights else "")
    try:
        with warnings.catch_warnings():  # a refused file needs no advice about pickle protocols
            warnings.filterwarnings("ignore", message="Detected pickle protocol")
            return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:
        if _is_pickle(path):  # else a stray byte of another file was taken for an opcode
            advice = "; give .safetensors or a plain state dict" if weights else ""
            raise UserError(f"{path}: cannot read {what} (it holds pickled Python objects other "
                            f"than tensors{_unsafe_globals(path)}; refused for safety, crossview "
                            f"does not unpickle them{advice})") from None
        detail = foreign
    except PermissionError:
        detail = "permission denied"
    except (RuntimeError, OSError) as error:  # torch's zip reader on a cut or damaged file
        first = (str(error).splitlines() or [type(error).__name__])[0].split(". ")[0]
        detail = f"truncated or corrupt: {first}"
    except Exception:  # the unpickler fails in many ways (KeyError, EOFError, ...) on other files
        detail = foreign
    raise UserError(f"{path}: cannot read {what} ({detail})")


def starts_like_torch_save(head: bytes) -> bool:
    """Whether ``head``, the first bytes of a file (4 suffice), start like what ``torch.save``
    writes: a zip archive, or a pickle of protocol 2 or later (``PROTO`` opcode)."""
    return head.startswith(b"PK\x03\x04") or head[:1] == b"\x80"


def _is_pickle(path: str | os.PathLike[str]) -> bool:
    """Whether the file ``path`` starts like what ``torch.save`` writes."""
    with open(path, "rb") as handle:
        return starts_like_torch_save(handle.read(4))


def _unsafe_globals(path: str | os.PathLike[str]) -> str:
    """``": posix.system, ..."``: the classes and functions the file's pickle names that torch
    does not allow, as torch lists them (zip checkpoints only; ``""`` when it cannot)."""
    try:
        names = torch.serialization.get_unsafe_globals_in_checkpoint(path)
    except Exception:  # a legacy or damaged file: the refusal stands without the names
        return ""
    return f": {', '.join(names[:SHOWN])}{', ...' if len(names) > SHOWN else ''}" if names else ""


def check_state_dict(model: nn.Module, state_dict: Mapping[str, torch.Tensor],
                     source: str = "weights", hint: MismatchHint | None = None) -> None:
    """Raise :class:`UserError` unless ``state_dict`` has exactly the keys and shapes of ``model``.

    The message names up to :data:`SHOWN` missing keys, unexpected keys and shape mismatches,
    followed by ``hint(state_dict)`` if given.
    """
    expected = model.state_dict()
    missing = [k for k in expected if k not in state_dict]
    unexpected = [k for k in state_dict if k not in expected]
    shapes = [f"{k} {tuple(state_dict[k].shape)} != {tuple(v.shape)}"
              for k, v in expected.items() if k in state_dict and state_dict[k].shape != v.shape]
    problems = [f"{label} ({len(items)}): {', '.join(items[:SHOWN])}"
                + (", ..." if len(items) > SHOWN else "")
                for label, items in (("missing keys", missing), ("unexpected keys", unexpected),
                                     ("shape mismatches", shapes)) if items]
    if problems:
        raise UserError(f"{source} do not fit {type(model).__name__}: " + "; ".join(problems)
                        + (hint(state_dict) if hint is not None else ""))


def load_weights(model: nn.Module, path: str | os.PathLike[str],
                 hint: MismatchHint | None = None) -> nn.Module:
    """Read ``path`` (see :func:`read_state_dict`), check it (``hint`` as in
    :func:`check_state_dict`), load it strictly; return ``model``.

    A model with a ``task`` attribute (MatchStereo: ``"stereo"`` or ``"flow"``) refuses a
    ``.safetensors`` file that records another task."""
    state_dict = read_state_dict(path, task=getattr(model, "task", None))
    check_state_dict(model, state_dict, source=str(path), hint=hint)
    model.load_state_dict(state_dict, strict=True)
    return model
