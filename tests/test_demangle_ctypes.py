"""Issue 45 item 7: kernel names demangled by libstdc++'s ``__cxa_demangle`` through ctypes
(gate.demangle), with no cxxfilt package (no release since 2021), and no ``wheel`` to build."""

from __future__ import annotations

import re
import shutil
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from gate import demangle, proc

ROOT = Path(__file__).resolve().parent.parent

# Mangled names as nvcc writes kernels: templates, namespaces, anonymous namespaces, cub's.
NAMES = (
    "_Z11write_valuePi",
    "_Z5scalePfi",
    "_Z1fPcS_",
    "_ZN12_GLOBAL__N_11kEv",
    "_ZN2ns5scaleIfEEvPT_i",
    "_ZN3cub6detail11EmptyKernelIvEEvv",
    "_Z3fooIiEvT_",
    "_ZN7cutlass6KernelINS_4gemm6kernel4GemmIiEEEEvNT_6ParamsE",
    "_Zbad",
)


@pytest.fixture
def without_cxxfilt(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No ``cxxfilt`` importable, and the demangler found afresh."""
    monkeypatch.setitem(sys.modules, "cxxfilt", None)
    demangle._demangler.cache_clear()
    yield
    demangle._demangler.cache_clear()


@pytest.mark.unit
def test_names_demangle_without_the_cxxfilt_package(without_cxxfilt: None) -> None:
    del without_cxxfilt
    assert demangle.demangle("_Z11write_valuePi") == "write_value(int*)"
    assert demangle.demangle("_ZN2ns5scaleIfEEvPT_i") == "void ns::scale<float>(float*, int)"
    # Not mangled C++, not UTF-8, a NUL: the name as it is, as cxxfilt gave it.
    for name in ("_Zbad", "plain_c_kernel", "", "_Z\udc80", "scale\0"):
        assert demangle.demangle(name) == name


@pytest.mark.unit
def test_no_cxxfilt_dependency_and_no_wheel_to_build() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    declared = [
        re.split(r"[<>=~!\[ ;]", r, maxsplit=1)[0] for r in project["project"]["dependencies"]
    ]
    assert "cxxfilt" not in declared
    assert [r for r in project["build-system"]["requires"] if r.startswith("wheel")] == []


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("c++filt") is None, reason="no c++filt (binutils) to compare with")
def test_names_demangle_as_cxx_filt_does() -> None:
    filt = shutil.which("c++filt")
    assert filt is not None
    result = proc.run([filt, *NAMES], timeout=60)
    assert result.ok, result.stderr
    assert [demangle.demangle(n) for n in NAMES] == result.stdout.splitlines()
