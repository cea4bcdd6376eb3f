"""One search for the folders NVIDIA's wheels unpack into (site-packages/nvidia/cuN, and a
CUDA 12 wheel's own nvidia/cuda_cupti): gate.system.toolkit.wheel_folders, which the nvcc
search and the cuobjdump search both use.
"""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from gate.system import toolkit
from gate.tools import cuobjdump

pytestmark = pytest.mark.unit


def _tool(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_the_newest_major_comes_first_then_the_order_of_the_folders(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    _tool(a / "nvidia" / "cu12" / "bin" / "cuobjdump")
    _tool(a / "nvidia" / "cu13" / "bin" / "cuobjdump")
    _tool(b / "nvidia" / "cu13" / "bin" / "cuobjdump")
    _tool(b / "nvidia" / "cu9" / "bin" / "cuobjdump")  # 9 < 12 although "cu9" > "cu12"
    (b / "nvidia" / "cuda_cupti" / "lib").mkdir(parents=True)
    (b / "nvidia" / "cublas").mkdir()  # another wheel's folder: not a toolkit folder
    assert toolkit.wheel_folders("bin", [a, b]) == [
        a / "nvidia" / "cu13" / "bin",
        b / "nvidia" / "cu13" / "bin",
        a / "nvidia" / "cu12" / "bin",
        b / "nvidia" / "cu9" / "bin",
    ]
    assert toolkit.wheel_folders("", [b, a]) == [
        b / "nvidia" / "cu13",
        a / "nvidia" / "cu13",
        a / "nvidia" / "cu12",
        b / "nvidia" / "cu9",
    ]


def test_only_what_exists_each_once_and_a_cuda_12_wheels_folder_last(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    _tool(a / "nvidia" / "cu13" / "bin" / "nvcc")
    (b / "nvidia" / "cuda_cupti" / "lib").mkdir(parents=True)
    (b / "nvidia" / "cu13" / "lib").mkdir(parents=True)
    assert toolkit.wheel_folders("bin/nvcc", [a, b, a]) == [a / "nvidia" / "cu13" / "bin" / "nvcc"]
    assert toolkit.wheel_folders("lib", [a, b], cuda12="cuda_cupti") == [
        b / "nvidia" / "cu13" / "lib",
        b / "nvidia" / "cuda_cupti" / "lib",
    ]
    assert toolkit.wheel_folders("", [tmp_path / "none", a]) == [a / "nvidia" / "cu13"]
    assert toolkit.wheel_folders("include", [a, b], cuda12="cuda_cupti") == []


def test_by_default_the_import_path_is_searched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tool = _tool(tmp_path / "nvidia" / "cu14" / "bin" / "cuobjdump")
    monkeypatch.setattr("sys.path", [str(tmp_path)])
    assert toolkit.wheel_folders("bin") == [tool.parent]
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    assert cuobjdump._candidate_dirs() == ["/usr/local/cuda/bin", str(tool.parent)]
