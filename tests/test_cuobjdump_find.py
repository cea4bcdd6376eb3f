"""A cuobjdump that cannot start on this machine is passed over, saying why (issue 40).

NVIDIA's aarch64 nvidia-cuda-cuobjdump 13.5.37 wheel is tagged manylinux_2_17 but its binary
needs glibc 2.38: on Debian 12 (2.36) it stops at the loader. The gate takes the next
cuobjdump that runs, and where none does the cross-check is not run, with the loader's line.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from gate.errors import ToolError
from gate.stages.crosscheck import find_cuobjdump
from gate.tools import cuobjdump

pytestmark = pytest.mark.integration

LOADER = "cuobjdump: /lib/aarch64-linux-gnu/libc.so.6: version `GLIBC_2.38' not found"


def _broken(folder: Path) -> Path:
    folder.mkdir(parents=True)
    tool = folder / "cuobjdump"
    tool.write_text(f"#!/bin/sh\ncat >&2 <<'END'\n{LOADER}\nEND\nexit 1\n", encoding="utf-8")
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    return tool


def test_a_cuobjdump_that_cannot_start_is_passed_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    working = cuobjdump.find()  # the wheel's, which runs here
    broken = _broken(tmp_path / "first")
    monkeypatch.setenv("PATH", f"{broken.parent}{os.pathsep}{os.environ['PATH']}")
    assert cuobjdump.find() == working


def test_without_one_that_runs_the_cross_check_is_not_run_with_the_loaders_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = _broken(tmp_path / "only")
    monkeypatch.setenv("PATH", f"{broken.parent}{os.pathsep}/usr/bin{os.pathsep}/bin")
    monkeypatch.setattr("sys.path", [])  # no wheel folder either
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setattr(cuobjdump, "_candidate_dirs", lambda: [str(broken.parent)])
    with pytest.raises(ToolError) as raised:
        cuobjdump.find()
    assert raised.value.message == f"no cuobjdump found runs on this machine ({broken}: {LOADER})"
    tool, note = find_cuobjdump(use_cuobjdump=True)
    assert tool is None
    assert note.startswith("cuobjdump cross-check not run: no cuobjdump found runs on this")
