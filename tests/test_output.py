"""Output locations: all-or-nothing staging of a command's files."""

from __future__ import annotations

from pathlib import Path

import pytest

from crossview.errors import UserError
from crossview.output import staged_outputs


def _listing(root: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(root)): p.read_bytes() if p.is_file() else None
            for p in sorted(root.rglob("*"))}


def test_files_appear_only_when_the_block_succeeds(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "a.txt").write_text("old")
    with staged_outputs(out) as staging:
        (staging / "a.txt").write_text("new")
        (staging / "b.txt").write_text("b")
        assert _listing(out).keys() == {"a.txt", staging.name, f"{staging.name}/a.txt",
                                        f"{staging.name}/b.txt"}
        assert (out / "a.txt").read_text() == "old"  # nothing published yet
    assert _listing(out) == {"a.txt": b"new", "b.txt": b"b"}


@pytest.mark.parametrize("exists", [True, False])
def test_a_failed_block_leaves_the_directory_as_it_was(tmp_path: Path, exists: bool) -> None:
    out = tmp_path / "new" / "out"
    if exists:
        out.mkdir(parents=True)
        (out / "a.txt").write_text("old")
    before = _listing(tmp_path)
    with pytest.raises(KeyboardInterrupt), staged_outputs(out) as staging:
        (staging / "a.txt").write_text("new")
        raise KeyboardInterrupt  # an interruption half-way counts as a failure too
    assert _listing(tmp_path) == before


def test_an_output_name_taken_by_a_directory_publishes_nothing(tmp_path: Path) -> None:
    (tmp_path / "b.txt").mkdir()
    with pytest.raises(UserError, match=r"b\.txt: is a directory"), \
            staged_outputs(tmp_path) as staging:
        (staging / "a.txt").write_text("a")
        (staging / "b.txt").write_text("b")
    assert _listing(tmp_path) == {"b.txt": None}
