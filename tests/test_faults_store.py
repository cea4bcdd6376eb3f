"""Faults around the store: uploads killed during the spool copy, and S3 answering badly.

The spool tests run the real `cuda-gate upload` as a child and stop it (SIGSTOP)
while it copies into the spool, so a SIGKILL or SIGTERM lands during the copy every time. The
S3 tests put tests/s3proxy.py between the real CLI and a real SeaweedFS server and
make it answer chosen requests with a 503 SlowDown, a 500, a reset or a delay.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gate.errors import ExitCode
from gate.store import local_settings, pending, resume
from gate.store.settings import MIN_PART_SIZE, STORE_VARIABLES
from tests.s3proxy import Fault, FaultProxy
from tests.s3server import WeedServer
from tests.store_helpers import REVISION, make_evidence, run_cli

pytestmark = [pytest.mark.integration]

BIG_COPY = 96 << 20  # a spool copy that takes a good fraction of a second
RUNNER_DIR = f"acme/kernels/{REVISION}/gpu-box-1"


# -- the spool: a copy interrupted by a signal ----------------------------------------


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
    """Run an upload, SIGKILL it during the spool copy; the partial folder it leaves.

    SIGKILL, because nothing can clean up after it: a SIGTERM the gate handles (it
    removes its partial at once, see below), a crash or a power cut cannot be.
    """
    child = _upload(tmp_path, str(evidence))
    partial = _stopped_during_copy(child, tmp_path / "spool")
    os.kill(child.pid, signal.SIGKILL)
    code, _, _ = _finish(child)
    assert code == -signal.SIGKILL
    assert sum(f.stat().st_size for f in partial.rglob("*") if f.is_file()) > 0
    return partial


def test_sigterm_during_the_copy_removes_its_partial_at_once(tmp_path: Path) -> None:
    evidence = make_evidence(tmp_path / "ev", big=BIG_COPY)
    child = _upload(tmp_path, str(evidence))
    _stopped_during_copy(child, tmp_path / "spool")
    os.kill(child.pid, signal.SIGTERM)
    os.kill(child.pid, signal.SIGCONT)
    code, _, err = _finish(child)
    assert code == 128 + signal.SIGTERM
    assert err.strip().splitlines()[-1] == "cuda-gate: interrupted by SIGTERM"
    assert _partials(tmp_path / "spool") == []


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


def test_partial_copies_naming_no_live_process_are_removed(tmp_path: Path) -> None:
    """Those of older versions (no process id in the name) and ones with a number for one."""
    runner = tmp_path / "spool" / RUNNER_DIR
    names = (
        ".partial-20261129T180000Z-1a2b3c-0badf00d",
        ".partial-123456789012345678901234567890-1-0badf00d",
        f".partial-{os.getpid()}-20261129T180000Z-1a2b3c-0badf00d",
        ".partial-0-20261129T180000Z-1a2b3c-0badf00d",
    )
    for name in names:
        (runner / name).mkdir(parents=True)
        (runner / name / "driver.txt").write_text("half\n")
    report = resume(local_settings(tmp_path / "store", tmp_path / "spool"))
    assert report.error() is None
    assert list((tmp_path / "spool").iterdir()) == []


# -- S3: a fault-injecting proxy in front of SeaweedFS --------------------------------

BIG = MIN_PART_SIZE * 2 + 123_457  # three parts
RUN_ID = "20261129T180000Z-1a2b3c"
OTHER_RUN = "20261129T190000Z-other"


def _object_key(name: str, run_id: str = RUN_ID) -> str:
    return f"gate/{RUNNER_DIR}/{run_id}/{name}"


@dataclass
class Rig:
    """`cuda-gate upload` through a fault proxy to a fresh bucket on SeaweedFS."""

    server: WeedServer
    proxy: FaultProxy
    bucket: str
    folder: Path
    monkeypatch: pytest.MonkeyPatch
    capsys: pytest.CaptureFixture[str]

    def upload(self, *args: str) -> tuple[int, str, str]:
        """The exit status, stdout and stderr of `cuda-gate upload --quiet ARGS`."""
        return run_cli(self.monkeypatch, self.capsys, "upload", "--quiet", *args)

    def unfinished(self) -> list[str]:
        """The keys of the bucket's unfinished multipart uploads, asked of the server itself."""
        listing: Any = self.server.client().list_multipart_uploads(Bucket=self.bucket)
        return sorted(upload["Key"] for upload in listing.get("Uploads", []))

    def assert_stored(self, evidence: Path) -> None:
        """The run is complete in the bucket, its big file whole, and gone from the spool."""
        client = self.server.client()
        client.head_object(Bucket=self.bucket, Key=_object_key("index.json"))
        body = client.get_object(Bucket=self.bucket, Key=_object_key("libkernels.so"))["Body"]
        assert body.read() == (evidence / "libkernels.so").read_bytes()
        assert pending(self.folder / "spool") == ()

    def multipart_ran(self) -> bool:
        """The big file went up in its three parts (not one put)."""
        seen = self.proxy.seen
        created = any(s.method == "POST" and "uploads" in s.params for s in seen)
        parts = sum(1 for s in seen if "partNumber" in s.params and s.forwarded)
        return created and parts == 3


@pytest.fixture
def rig(
    server: WeedServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> Iterator[Rig]:
    """A fresh bucket behind a fault proxy, and the environment of an upload through it."""
    # Away from the project's own pyproject.toml: this folder's cuda-gate.toml configures.
    monkeypatch.chdir(tmp_path)
    for name in STORE_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    for name, value in server.env().items():
        monkeypatch.setenv(name, value)
    bucket = f"gate-{uuid.uuid4().hex[:12]}"
    server.client().create_bucket(Bucket=bucket)
    monkeypatch.setenv("CUDA_GATE_STORE", f"s3://{bucket}/gate")
    monkeypatch.setenv("CUDA_GATE_SPOOL_DIR", str(tmp_path / "spool"))
    # Files from 5 MiB (S3's smallest part) go up in parts of 5 MiB; a part or a read that
    # botocore's three tries could not get through is tried in two rounds of them.
    monkeypatch.setenv("CUDA_GATE_MULTIPART_THRESHOLD", str(MIN_PART_SIZE))
    (tmp_path / "cuda-gate.toml").write_text("[store]\nattempts = 2\n", encoding="utf-8")
    with FaultProxy(server.endpoint) as proxy:
        monkeypatch.setenv("CUDA_GATE_S3_ENDPOINT", proxy.endpoint)
        yield Rig(server, proxy, bucket, tmp_path, monkeypatch, capsys)


def test_a_503_burst_with_a_failing_abort_leaves_no_unfinished_upload(
    rig: Rig, tmp_path: Path
) -> None:
    evidence = make_evidence(tmp_path / "ev", big=BIG)
    # Every try botocore makes at the first part in both rounds, then both tries at the abort.
    parts = rig.proxy.inject(Fault.slow_down(), method="PUT", query="partNumber", times=2 * 3)
    aborts = rig.proxy.inject(Fault.slow_down(), method="DELETE", query="uploadId", times=2)
    code, _, err = rig.upload(str(evidence))
    assert code == int(ExitCode.STORAGE)
    assert "uploading libkernels.so to s3://" in err
    assert (parts.hits, aborts.hits) == (2 * 3, 2)
    # The upload is given up, never started again from its first part in this run.
    assert sum(1 for s in rig.proxy.seen if s.method == "POST" and "uploads" in s.params) == 1
    assert rig.unfinished() == [_object_key("libkernels.so")]

    code, _, err = rig.upload("--resume")
    assert (code, err) == (0, "")
    rig.assert_stored(evidence)
    assert rig.unfinished() == []


def test_an_unfinished_upload_that_cannot_be_aborted_keeps_the_run_for_resume(
    rig: Rig, tmp_path: Path
) -> None:
    evidence = make_evidence(tmp_path / "ev", big=BIG)
    rig.proxy.inject(Fault.slow_down(), method="PUT", query="partNumber", times=2 * 3)
    rig.proxy.inject(Fault.slow_down(), method="DELETE", query="uploadId")
    code, _, err = rig.upload(str(evidence))
    assert code == int(ExitCode.STORAGE)
    assert "uploading libkernels.so to s3://" in err
    assert rig.unfinished() == [_object_key("libkernels.so")]
    # The next attempt stores every file, but cannot abort what the first one left.
    code, _, err = rig.upload("--resume")
    assert code == int(ExitCode.STORAGE)
    (line,) = err.strip().splitlines()
    assert "aborting unfinished uploads below s3://" in line
    assert "answered SlowDown" in line
    assert "upload --resume" in line
    # Every file is stored, the index is not: the run is not complete yet.
    assert rig.unfinished() == [_object_key("libkernels.so")]
    assert len(pending(tmp_path / "spool")) == 1

    rig.proxy.clear()
    code, out, err = rig.upload("--resume")
    assert (code, err) == (0, "")
    assert "1 stored, 8 already present" in out
    assert rig.unfinished() == []
    rig.assert_stored(evidence)


def test_the_next_upload_aborts_what_an_earlier_one_left_unfinished(
    rig: Rig, tmp_path: Path
) -> None:
    """Left by a process that was killed, or by an older cuda-gate: the run's keys only."""
    evidence = make_evidence(tmp_path / "ev", big=BIG)
    code, _, err = rig.upload(str(evidence))
    assert (code, err) == (0, "")
    client = rig.server.client()
    for key in (_object_key("libkernels.so"), _object_key("x.bin", OTHER_RUN)):
        upload = client.create_multipart_upload(Bucket=rig.bucket, Key=key)
        client.upload_part(
            Bucket=rig.bucket, Key=key, UploadId=upload["UploadId"], PartNumber=1, Body=b"x" * 1024
        )
    assert len(rig.unfinished()) == 2

    code, out, err = rig.upload(str(evidence))
    assert (code, err) == (0, "")
    assert "0 stored, 9 already present" in out
    # Another run's upload, in progress for all this run knows, stays.
    assert rig.unfinished() == [_object_key("x.bin", OTHER_RUN)]


def test_slow_down_is_retried_and_the_upload_succeeds(rig: Rig, tmp_path: Path) -> None:
    evidence = make_evidence(tmp_path / "ev", big=BIG)
    puts = rig.proxy.inject(Fault.slow_down(), method="PUT", times=2)
    parts = rig.proxy.inject(Fault.slow_down(), method="PUT", query="partNumber", times=2)
    code, out, err = rig.upload(str(evidence))
    assert (code, err) == (0, "")
    assert "9 stored, 0 already present" in out
    assert (puts.hits, parts.hits) == (2, 2)
    assert rig.multipart_ran()
    rig.assert_stored(evidence)
    assert rig.unfinished() == []


@pytest.mark.parametrize(
    ("fault", "said"),
    [(Fault.internal(), "answered InternalError: We encountered an internal error."),
     (Fault.reset(), "Connection was closed before we received a valid response")],
    ids=["persistent-500", "connection-reset"],
)  # fmt: skip
def test_a_persistent_fault_exits_20_and_keeps_the_run_for_resume(
    fault: Fault, said: str, rig: Rig, tmp_path: Path
) -> None:
    evidence = make_evidence(tmp_path / "ev", big=BIG)
    rule = rig.proxy.inject(fault, method="PUT")
    code, out, err = rig.upload(str(evidence))
    assert (code, out) == (int(ExitCode.STORAGE), "")
    (line,) = err.strip().splitlines()
    assert line.startswith("cuda-gate: error: uploading .cuda-gate to s3://")
    assert said in line
    assert line.endswith("(run `cuda-gate upload --resume` when the store is reachable again)")
    assert rule.hits == 3  # botocore's three tries; cuda-gate sends a failed put no more
    (entry,) = pending(tmp_path / "spool")
    assert entry.name == RUN_ID

    rig.proxy.clear()
    code, out, err = rig.upload("--resume")
    assert (code, err) == (0, "")
    assert "9 stored, 0 already present" in out
    rig.assert_stored(evidence)


def test_a_delay_within_the_timeout_succeeds(rig: Rig, tmp_path: Path) -> None:
    evidence = make_evidence(tmp_path / "ev", big=BIG)
    slow = rig.proxy.inject(Fault.delay(3), method="PUT", query="partNumber", times=1)
    start = time.monotonic()
    code, out, err = rig.upload(str(evidence))
    assert (code, err) == (0, "")
    assert time.monotonic() - start >= 3
    assert slow.hits == 1
    assert rig.multipart_ran()
    assert "9 stored, 0 already present" in out
    rig.assert_stored(evidence)
