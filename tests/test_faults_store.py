"""Faults around the store: uploads killed during the spool copy, and S3 answering badly.

The spool tests run the real `cuda-gate upload` as a child and stop it (SIGSTOP)
while it copies into the spool, so a SIGTERM lands during the copy every time. The
S3 tests put tests/s3proxy.py between the real CLI and a real SeaweedFS server and
make it answer chosen requests with a 503 SlowDown, a 500, a reset or a delay.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gate.store import pending
from tests.store_helpers import REVISION, make_evidence

pytestmark = [pytest.mark.integration]

BIG_COPY = 96 << 20  # a spool copy that takes a good fraction of a second
RUNNER_DIR = f"acme/kernels/{REVISION}/gpu-box-1"


# -- the spool: a copy interrupted by SIGTERM -----------------------------------------


def _upload(tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    """`cuda-gate upload ARGS` into the local store ``tmp_path/store``, as a child."""
    env = {**os.environ, "CUDA_GATE_SPOOL_DIR": str(tmp_path / "spool")}
    return subprocess.Popen(
        [sys.executable, "-m", "gate", "upload", "--quiet", "--store", str(tmp_path / "store"),
         *args],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _finish(child: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, err = child.communicate(timeout=120)
    return child.returncode, out, err


def _partials(spool: Path) -> list[Path]:
    return sorted(spool.glob("*/*/*/*/.partial-*"))


def _stopped_during_copy(child: subprocess.Popen[str], spool: Path) -> Path:
    """SIGSTOP the child while its partial copy is in the spool; return that folder."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and child.poll() is None:
        found = _partials(spool)
        # Once the big file is being copied: what is there by then is worth removing.
        if found and (found[0] / "libkernels.so").exists():
            os.kill(child.pid, signal.SIGSTOP)
            # Stopped now; the copy was still going if the entry has not appeared.
            if found[0].is_dir() and not pending(spool):
                return found[0]
            os.kill(child.pid, signal.SIGCONT)
            break
        time.sleep(0.001)
    child.kill()
    child.communicate()
    pytest.fail("the upload finished its spool copy before it could be stopped during it")


def _killed_during_copy(tmp_path: Path, evidence: Path) -> Path:
    """Run an upload, SIGTERM it during the spool copy; the partial folder it leaves."""
    child = _upload(tmp_path, str(evidence))
    partial = _stopped_during_copy(child, tmp_path / "spool")
    os.kill(child.pid, signal.SIGTERM)
    os.kill(child.pid, signal.SIGCONT)
    code, _, _ = _finish(child)
    assert code == -signal.SIGTERM
    assert sum(f.stat().st_size for f in partial.rglob("*") if f.is_file()) > 0
    return partial


def test_a_partial_copy_left_by_sigterm_is_removed_by_the_next_upload(tmp_path: Path) -> None:
    evidence = make_evidence(tmp_path / "ev", big=BIG_COPY)
    partial = _killed_during_copy(tmp_path, evidence)
    assert _partials(tmp_path / "spool") == [partial]

    code, out, err = _finish(_upload(tmp_path, str(evidence)))
    assert (code, err) == (0, "")
    assert out.startswith(f"stored {tmp_path / 'store' / RUNNER_DIR}/")
    assert _partials(tmp_path / "spool") == []
    assert list((tmp_path / "spool").iterdir()) == []


def test_a_partial_copy_left_by_sigterm_is_removed_by_resume(tmp_path: Path) -> None:
    evidence = make_evidence(tmp_path / "ev", big=BIG_COPY)
    _killed_during_copy(tmp_path, evidence)

    code, out, err = _finish(_upload(tmp_path, "--resume"))
    assert (code, err) == (0, "")
    assert out.startswith("nothing to resume")
    assert list((tmp_path / "spool").iterdir()) == []


def test_the_partial_copy_of_a_running_upload_is_left_alone(tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    busy = make_evidence(tmp_path / "busy", run_id="20261129T180000Z-busy", big=BIG_COPY)
    other = make_evidence(tmp_path / "other", run_id="20261129T190000Z-other")
    running = _upload(tmp_path, str(busy))
    try:
        partial = _stopped_during_copy(running, spool)
        # Another upload, and a resume, while that one holds its partial copy.
        for args in ([str(other)], ["--resume"]):
            code, _, err = _finish(_upload(tmp_path, *args))
            assert (code, err) == (0, "")
            assert _partials(spool) == [partial]
    finally:
        os.kill(running.pid, signal.SIGCONT)
    code, out, err = _finish(running)
    assert (code, err) == (0, "")
    assert "20261129T180000Z-busy" in out
    assert list(spool.iterdir()) == []


def test_an_unlocked_partial_copy_of_a_live_process_is_left_alone(tmp_path: Path) -> None:
    """Just after its mkdir, before the flock, a partial copy is known by its process id."""
    spool = tmp_path / "spool"
    evidence = make_evidence(tmp_path / "ev")
    with subprocess.Popen(["sleep", "60"]) as sleeper:
        partial = spool / RUNNER_DIR / f".partial-{sleeper.pid}-20261129T180000Z-x-0badf00d"
        (partial / "logs").mkdir(parents=True)
        (partial / "logs" / "native.log").write_text("half\n")
        code, _, err = _finish(_upload(tmp_path, "--resume"))
        assert (code, err) == (0, "")
        assert _partials(spool) == [partial]
        sleeper.kill()
    code, _, err = _finish(_upload(tmp_path, str(evidence)))
    assert (code, err) == (0, "")
    assert list(spool.iterdir()) == []
