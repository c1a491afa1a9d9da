"""The parts of a build's key (crossview.cpu_kernels.build_key) that read the machine: the CPU
fingerprint and the compiler identity. How the whole key names builds is tested in
match/test_cpu_build.py, on the fused kernels' real key."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from crossview.cpu_kernels import build_key

CPU = """processor\t: {n}
model name\t: {model}
cpu MHz\t\t: {mhz}
flags\t\t: {flags}
"""
AVX512 = "fpu sse sse2 avx avx2 avx512f"


def _fingerprint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, model: str = "Xeon",
                 flags: str = AVX512, mhz: str = "2200.0") -> str:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("\n".join(CPU.format(n=n, model=model, mhz=mhz, flags=flags)
                                 for n in range(2)))
    monkeypatch.setattr(build_key, "CPUINFO", cpuinfo)
    return build_key.cpu_fingerprint()


@pytest.mark.parametrize(("change", "same"), [
    ({}, True),
    ({"mhz": "3100.5"}, True),  # the clock changes while running; the instruction set does not
    ({"flags": "fpu sse sse2 avx avx2"}, False),  # an older CPU: no AVX-512
    ({"model": "EPYC"}, False),
])
def test_cpu_fingerprint_follows_model_and_flags(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 change: dict[str, str], same: bool) -> None:
    assert (_fingerprint(tmp_path, monkeypatch) == _fingerprint(tmp_path, monkeypatch, **change)
            ) is same


def test_cpu_fingerprint_without_cpuinfo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(build_key, "CPUINFO", tmp_path / "missing")
    assert len(build_key.cpu_fingerprint()) == 12


@pytest.mark.skipif(shutil.which(os.environ.get("CXX", "c++")) is None, reason="no C++ compiler")
def test_compiler_identity_is_what_version_prints() -> None:
    identity = build_key.compiler_identity(os.environ.get("CXX", "c++"))
    assert any(char.isdigit() for char in identity.splitlines()[0]), identity


def test_compiler_identity_of_a_missing_program_raises(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        build_key.compiler_identity(str(tmp_path / "no-such-c++"))
