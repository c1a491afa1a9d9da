"""Weight files: the accepted forms, strict key/shape checks, no unpickling of objects."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file
from torch import nn

from crossview.errors import UserError
from crossview.models.weights import (
    SHOWN,
    check_state_dict,
    load_weights,
    read_safetensors,
    read_state_dict,
    record_task,
    write_safetensors,
)


def _net() -> nn.Module:
    return nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))


def _random_state() -> dict[str, torch.Tensor]:
    return {k: torch.randn_like(v) for k, v in _net().state_dict().items()}


@pytest.mark.parametrize("form", ["checkpoint", "bare", "state_dict_key", "safetensors"])
def test_accepted_forms_load_exactly(tmp_path: Path, form: str) -> None:
    state = _random_state()
    path = tmp_path / ("w.safetensors" if form == "safetensors" else "w.pth")
    if form == "safetensors":
        save_file(state, path)
    else:
        content = {"checkpoint": {"model": state, "epoch": 3}, "bare": state,
                   "state_dict_key": {"state_dict": state}}[form]
        torch.save(content, path)
    net = load_weights(_net(), path)
    for key, value in net.state_dict().items():
        assert torch.equal(value, state[key])


def test_mismatches_name_the_offenders() -> None:
    state = _random_state()
    state["0.weight"] = torch.zeros(5, 3)
    state.pop("2.bias")
    state["extra.weight"] = torch.zeros(1)
    with pytest.raises(UserError) as info:
        check_state_dict(_net(), state, source="w.pth")
    message = str(info.value)
    assert "w.pth" in message and "\n" not in message
    assert "missing keys (1): 2.bias" in message
    assert "unexpected keys (1): extra.weight" in message
    assert "0.weight (5, 3) != (4, 3)" in message


def test_long_lists_are_cut() -> None:
    state = {f"k{i}": torch.zeros(1) for i in range(SHOWN + 3)}
    with pytest.raises(UserError, match=r"unexpected keys \(8\): k0, k1, k2, k3, k4, \.\.\."):
        check_state_dict(_net(), {**_random_state(), **state})


def test_arbitrary_objects_are_not_unpickled(tmp_path: Path) -> None:
    class Payload:
        def __reduce__(self):
            return (print, ("unpickled!",))

    path = tmp_path / "evil.pth"
    path.write_bytes(pickle.dumps({"model": Payload()}, protocol=2))
    with pytest.raises(UserError, match="cannot read weights"):
        read_state_dict(path)


@pytest.mark.parametrize("name,content", [("bad.safetensors", b"garbage!"),
                                          ("bad.pth", b"\x00\x01 not a zip")])
def test_corrupt_files(tmp_path: Path, name: str, content: bytes) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(UserError, match=name):
        read_state_dict(path)


def test_missing_file_and_non_state_dict(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no such weights file"):
        read_state_dict(tmp_path / "nope.pth")
    path = tmp_path / "list.pth"
    torch.save([torch.zeros(1)], path)
    with pytest.raises(UserError, match="not a state dict"):
        read_state_dict(path)


@pytest.mark.parametrize("name,content", [("text.pth", b"hello world\n"), ("empty.pth", b"")])
def test_files_the_unpickler_chokes_on_are_user_errors(tmp_path: Path, name: str,
                                                       content: bytes) -> None:
    # torch.load raises KeyError / EOFError on these, not an UnpicklingError
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(UserError, match=f"{name}: cannot read weights \\(not a PyTorch "):
        read_state_dict(path)


def test_a_refused_pickle_says_why_on_one_line(tmp_path: Path) -> None:
    path = tmp_path / "object.pth"
    torch.save({"model": {"w": torch.zeros(1)}, "args": Path("x")}, path)
    with pytest.raises(UserError) as error:
        read_state_dict(path)
    message = str(error.value)
    assert "pickled Python objects other than tensors" in message
    assert "\n" not in message and "\x1b" not in message  # not torch's multi-line advice


class _RunsACommand:
    """Unpickling this would call os.system."""

    def __reduce__(self) -> tuple:
        return os.system, ("exit 0",)


class _Custom:
    """A class of the script that saved it, unknown to torch's allow-list."""


def _raw_pickle(path: Path, content: object) -> None:
    with open(path, "wb") as handle:  # plain pickle, protocol 4: not what torch.save writes
        pickle.dump(content, handle, protocol=4)


@pytest.mark.parametrize(("save", "names"), [
    (lambda p: torch.save({"model": {}, "x": _RunsACommand()}, p), ": posix.system;"),
    (lambda p: torch.save({"model": {"w": torch.zeros(1)}, "x": _Custom()}, p),
     f": {__name__}._Custom;"),
    (lambda p: torch.save({"x": _RunsACommand()}, p, _use_new_zipfile_serialization=False),
     ";"),  # the legacy format: refused, torch cannot list the names
    (lambda p: _raw_pickle(p, {"x": _RunsACommand()}), ";"),
])
def test_pickled_objects_are_refused_for_safety_whatever_torch_says(tmp_path: Path, save,
                                                                    names: str) -> None:
    path = tmp_path / "objects.pth"
    save(path)
    with pytest.raises(UserError) as error:
        read_state_dict(path)
    assert str(error.value) == (f"{path}: cannot read weights (it holds pickled Python objects "
                                f"other than tensors{names} refused for safety, crossview does "
                                "not unpickle "
                                "them; give .safetensors or a plain state dict)")


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
@pytest.mark.parametrize("suffix", [".pth", ".safetensors"])
def test_non_finite_weights_are_refused_naming_the_tensor(tmp_path: Path, value: float,
                                                          suffix: str) -> None:
    state = _random_state()
    state["2.weight"][1, 0] = value
    state["0.bias"][0] = value
    path = tmp_path / f"diverged{suffix}"
    save_file(state, path) if suffix == ".safetensors" else torch.save(state, path)
    with pytest.raises(UserError, match=rf"^{path}: tensor '0.bias' \(and 1 more tensors\) holds "
                                        "NaN or infinite values; these weights are unusable"):
        load_weights(_net(), path)


def _with_task(task: str) -> nn.Module:
    net = _net()
    net.task = task  # as MatchStereo, whose stereo and flow weights have the same keys
    return net


def test_a_file_recording_another_task_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "flow.safetensors"
    save_file(_random_state(), path, metadata={"task": "flow"})
    with pytest.raises(UserError) as error:
        load_weights(_with_task("stereo"), path)
    message = str(error.value)
    assert str(path) in message and "'flow'" in message and "'stereo'" in message
    assert "\n" not in message
    state = read_state_dict(path)  # no expected task: read as it is
    net = load_weights(_with_task("flow"), path)
    assert all(torch.equal(v, state[k]) for k, v in net.state_dict().items())


def test_files_without_a_recorded_task_load_as_before(tmp_path: Path) -> None:
    path = tmp_path / "old.safetensors"
    save_file(_random_state(), path, metadata={"format": "pt"})
    load_weights(_with_task("stereo"), path)
    load_weights(_with_task("flow"), path)


def test_record_task_keeps_tensors_and_metadata(tmp_path: Path) -> None:
    path = tmp_path / "w.safetensors"
    state = _random_state()
    save_file(state, path, metadata={"steps": "12"})
    assert record_task(path, "flow", name="mini") == path
    tensors, metadata = read_safetensors(path)
    assert metadata == {"steps": "12", "name": "mini", "task": "flow"}
    assert tensors.keys() == state.keys() and all(torch.equal(tensors[k], state[k]) for k in state)
    assert [p.name for p in tmp_path.iterdir()] == ["w.safetensors"]  # no temporary left
    with pytest.raises(UserError, match="records task 'flow' but 'stereo' weights"):
        load_weights(_with_task("stereo"), path)


def test_write_safetensors_round_trip(tmp_path: Path) -> None:
    """Tensors come back equal (a non-contiguous or grad-tracking one included), the metadata
    is ``metadata`` plus ``task``, which wins over a ``task`` entry in ``metadata``."""
    state = _random_state()
    state["t"] = torch.randn(4, 3, requires_grad=True).t()  # non-contiguous, tracks gradients
    path = tmp_path / "w.safetensors"
    assert write_safetensors(path, state, "flow", {"steps": "3", "task": "stereo"}) == path
    tensors, metadata = read_safetensors(path)
    assert metadata == {"steps": "3", "task": "flow"}
    assert tensors.keys() == state.keys()
    assert all(torch.equal(tensors[k], v.detach()) for k, v in state.items())
    assert [p.name for p in tmp_path.iterdir()] == ["w.safetensors"]


def test_a_failed_write_leaves_the_old_file(tmp_path: Path) -> None:
    """Atomic: safetensors refuses tensors sharing memory; the file there before is unchanged
    and no temporary file is left in the directory."""
    path = tmp_path / "w.safetensors"
    write_safetensors(path, {"a": torch.ones(2)}, "stereo")
    before = path.read_bytes()
    shared = torch.zeros(3)
    with pytest.raises(RuntimeError):
        write_safetensors(path, {"a": shared, "b": shared}, "flow")
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["w.safetensors"]


def test_exports_and_record_task_write_through_one_function(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """:func:`record_task` and the training export both write with :func:`write_safetensors`
    (one place for the atomic write and the task record)."""
    import crossview.models.weights as weights
    from crossview.models.matchstereo import MatchStereo, MatchStereoConfig
    from crossview.models.matchstereo.bundle import write_bundle

    calls = []

    def spy(path: Path, tensors: dict, task: str, metadata: dict | None = None) -> Path:
        calls.append((Path(path).name, task))
        return write_safetensors(path, tensors, task, metadata)

    monkeypatch.setattr(weights, "write_safetensors", spy)
    save_file(_random_state(), tmp_path / "old.safetensors")
    record_task(tmp_path / "old.safetensors", "flow")
    tiny = MatchStereoConfig(dims=(8, 8, 8, 8), encoder_depths=(1, 1, 1, 1),
                             decoder_layers=(1, 1, 1, 1), radii=(1, 1, 1, 1), heads=2,
                             encoder_head=0)
    write_bundle(MatchStereo(tiny), tmp_path / "new.safetensors", name="n", task="stereo")
    assert calls == [("old.safetensors", "flow"), ("new.safetensors", "stereo")]
