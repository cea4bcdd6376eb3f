"""Test tiers: every test carries exactly one of the unit / integration / gpu markers.

* unit tests may not start processes (a guard replaces subprocess.Popen);
* gpu tests are skipped, with the reason, where no CUDA device is usable;
* every test runs with its own HOME and XDG folders and without the user's
  ``CUDA_GATE_*`` and ``AWS_*`` settings: no test reads or writes the user's
  evidence store, spool, keys or cloud credentials;
* a test that runs long (a podman or S3 test, a real build) says so while it runs: a
  line every :data:`STILL_RUNNING_EVERY` seconds names it, so a slow session in a CI log
  shows which test it is in.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from tests.s3server import WeedServer

TIERS = ("unit", "integration", "gpu")
# Every variable a test must not inherit: the store, spool and keys, and cloud credentials.
ISOLATED_PREFIXES = ("CUDA_GATE_", "AWS_")
XDG_FOLDERS = ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME")


# Seconds a test runs before a line names it (then again as often); 0 turns it off.
STILL_RUNNING_EVERY = float(os.environ.get("GATE_TEST_STILL_RUNNING", "60") or 0)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    """Name a long test while it runs (with capture suspended for the one line)."""
    done = threading.Event()
    if STILL_RUNNING_EVERY > 0:
        began = time.monotonic()
        thread = threading.Thread(
            target=_still_running, args=(item, began, done), name="still-running", daemon=True
        )
        thread.start()
    try:
        yield
    finally:
        done.set()


def _still_running(item: pytest.Item, began: float, done: threading.Event) -> None:
    config = item.config
    capture = config.pluginmanager.getplugin("capturemanager")
    reporter = config.pluginmanager.getplugin("terminalreporter")
    while not done.wait(STILL_RUNNING_EVERY):
        if reporter is None or capture is None:
            return
        with capture.global_and_fixture_disabled():
            took = int(time.monotonic() - began)
            reporter.write_line(f"[still running after {took} s] {item.nodeid}")


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


@pytest.fixture(scope="session", autouse=True)
def _demangler_loaded() -> None:
    """Load the C++ demangler before any test: where libstdc++ is not found by its soname,
    gate.demangle asks ``ldconfig -p`` (ctypes.util.find_library), a process the unit guard
    would refuse. The decision core matches kernel names by their demangled parts
    (gate.rules.kernels)."""
    from gate.demangle import demangle

    demangle("_Z1fv")


@pytest.fixture(autouse=True)
def _fresh_kernel_names() -> None:
    """Every test parses the kernel names it uses and routes the targets it reads: the
    caches of parsed names, routed target sets and parsed targets would hide a call from
    the tests after the first (and hide them from ``nox -s mutation``, which runs for each
    mutant the tests that reached the mutated function)."""
    from gate.reader import listing
    from gate.rules import kernels
    from gate.scan import cache

    kernels.clear_cache()
    listing.clear_cache()  # routes worked out once per target set
    cache.clear_parsed()  # targets and ISAs parsed once per text


@pytest.fixture(autouse=True)
def _unit_guard(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    if request.node.get_closest_marker("unit"):
        monkeypatch.setattr(subprocess, "Popen", _NoProcesses)


def isolate(monkeypatch: pytest.MonkeyPatch, home: Path) -> None:
    """Point HOME and the XDG folders into ``home``; drop every ``CUDA_GATE_*`` and ``AWS_*``."""
    monkeypatch.setenv("HOME", str(home))
    for name in XDG_FOLDERS:
        folder = home / name.lower()
        folder.mkdir(exist_ok=True)
        monkeypatch.setenv(name, str(folder))
    runtime = home / "xdg_runtime_dir"
    runtime.mkdir(mode=0o700, exist_ok=True)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    for name in list(os.environ):
        if name.startswith(ISOLATED_PREFIXES):
            monkeypatch.delenv(name)
    # With no credentials anywhere, boto3 would otherwise ask the EC2 metadata service.
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


@pytest.fixture(scope="session", autouse=True)
def _session_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Isolation for session- and module-scoped fixtures (a server starts before any test)."""
    home = tmp_path_factory.mktemp("session-home")
    with pytest.MonkeyPatch.context() as monkeypatch:
        isolate(monkeypatch, home)
        yield home


@pytest.fixture(autouse=True)
def _own_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh HOME and XDG folders per test; no ``CUDA_GATE_*`` or ``AWS_*`` from outside.

    A folder of its own (not ``tmp_path``), so tests that list their ``tmp_path``
    see only what they made. Child processes inherit the same environment.
    """
    home = tmp_path_factory.mktemp("home")
    isolate(monkeypatch, home)
    return home


@pytest.fixture
def weed_path() -> str:
    """The `weed` binary for tests that start their own server (fails under CI=true if absent)."""
    from tests.s3server import require_weed  # boto3 only where S3 is tested

    return require_weed()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WeedServer]:
    """A real S3-compatible server (SeaweedFS) on loopback for one test module."""
    from tests.s3server import WeedServer, require_weed  # boto3 only where S3 is tested

    require_weed()
    weed = WeedServer(tmp_path_factory.mktemp("weed"))
    try:
        weed.start()
        yield weed
    finally:
        weed.cleanup()
