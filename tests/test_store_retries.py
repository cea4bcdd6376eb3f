"""Who retries what, counted: botocore retries each request, cuda-gate only what it cannot.

Each test puts tests/s3proxy.py between the S3 store and a real SeaweedFS server,
makes it answer chosen requests with a fault, and counts the requests the proxy
saw for the object (docs/store.md, "Retries"). botocore's own backoff sleeps as
botocore decides; cuda-gate's pauses are recorded instead of slept, and no test
looks at the clock.
"""

from __future__ import annotations

import hashlib
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from gate.errors import ConfigError, StorageError
from gate.store import StoreSettings, load_settings
from gate.store.base import PutOutcome
from gate.store.s3 import S3Store
from gate.store.settings import DEFAULT_THRESHOLD, MIB, MIN_PART_SIZE, STORE_VARIABLES
from tests.s3proxy import Fault, FaultProxy, Seen
from tests.s3server import WeedServer

pytestmark = [pytest.mark.integration]

SMALL = b"driver: 580.159.04\n" * 8


@dataclass
class Rig:
    """An S3Store reaching a fresh bucket on SeaweedFS through a fault proxy."""

    server: WeedServer
    proxy: FaultProxy
    settings: StoreSettings
    naps: list[float]

    def store(self) -> S3Store:
        """A store built now (so from the environment as it is now); pauses recorded."""
        return S3Store(self.settings, sleep=self.naps.append)

    def requests(self, key: str, method: str | None = None) -> list[Seen]:
        """The requests the proxy saw for ``key`` (below the store's prefix), in order."""
        path = f"/{self.settings.bucket}/{self.settings.prefix}/{key}"
        return [s for s in self.proxy.seen if s.path == path and method in (None, s.method)]

    def parts(self, key: str) -> Counter[int]:
        """How many UploadPart requests the proxy saw for each part number of ``key``."""
        return Counter(
            int(s.param("partNumber") or 0)
            for s in self.requests(key, "PUT")
            if s.param("partNumber")
        )


@pytest.fixture
def rig(server: WeedServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Rig]:
    """A fresh bucket on the module's server behind a proxy."""
    yield from _rig(server, monkeypatch, tmp_path)


@pytest.fixture
def own_rig(
    weed_path: str,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Rig]:
    """A rig on a server of its own, killed afterwards: after some 64 MiB stored, SeaweedFS
    4.48 takes more than 10 s to stop on SIGTERM; killed, it costs nothing."""
    weed = WeedServer(tmp_path_factory.mktemp("weed-big"))
    try:
        weed.start()
        yield from _rig(weed, monkeypatch, tmp_path)
    finally:
        weed.kill()
        weed.cleanup()


def _rig(server: WeedServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Rig]:
    """A fresh bucket behind a proxy; the store configured by the environment alone."""
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
    with FaultProxy(server.endpoint) as proxy:
        monkeypatch.setenv("CUDA_GATE_S3_ENDPOINT", proxy.endpoint)
        settings = load_settings(tmp_path)
        # The defaults: botocore's 3 tries per request, cuda-gate's 3 rounds per part or read.
        assert settings.attempts == 3
        yield Rig(server, proxy, settings, [])


def _striped(path: Path, size: int) -> str:
    """A sparse file of ``size`` bytes, every MiB stamped with its offset; its sha256.

    Sparse, so writing and reading it back costs next to nothing; stamped, so a part
    sent twice, swapped or dropped changes what the server assembles.
    """
    with path.open("wb") as f:
        f.truncate(size)
        for offset in range(0, size, MIB):
            f.seek(offset)
            f.write(f"@{offset}".encode())
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(MIB):
            digest.update(block)
    return digest.hexdigest()


# -- single requests: botocore's tries, and only botocore's ------------------------------


def test_a_put_that_fails_once_is_sent_twice(rig: Rig) -> None:
    rule = rig.proxy.inject(Fault.internal(), method="PUT", times=1)
    assert rig.store().put_bytes("a/driver.txt", SMALL) is PutOutcome.STORED
    assert rule.hits == 1
    assert len(rig.requests("a/driver.txt", "PUT")) == 2
    assert rig.naps == []


def test_a_put_that_keeps_failing_is_sent_as_often_as_botocore_tries(rig: Rig) -> None:
    """Three requests (botocore's standard three tries), not three whole-file rounds of them."""
    rig.proxy.inject(Fault.internal(), method="PUT")
    with pytest.raises(StorageError, match="answered InternalError"):
        rig.store().put_bytes("a/driver.txt", SMALL)
    assert len(rig.requests("a/driver.txt", "PUT")) == 3
    assert len(rig.requests("a/driver.txt", "HEAD")) == 1
    assert rig.naps == []


def test_a_get_that_keeps_failing_is_sent_as_often_as_botocore_tries(rig: Rig) -> None:
    rig.store().put_bytes("a/driver.txt", SMALL)
    rig.proxy.inject(Fault.slow_down(), method="GET")
    with pytest.raises(StorageError, match="answered SlowDown"):
        rig.store().get_bytes("a/driver.txt")
    assert len(rig.requests("a/driver.txt", "GET")) == 3
    assert rig.naps == []


def test_aws_max_attempts_1_sends_a_failing_put_once(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    rig.proxy.inject(Fault.internal(), method="PUT")
    with pytest.raises(StorageError, match="answered InternalError"):
        rig.store().put_bytes("a/driver.txt", SMALL)
    assert len(rig.requests("a/driver.txt", "PUT")) == 1


def test_aws_retry_mode_is_honoured_with_cuda_gates_three_tries(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_RETRY_MODE", "legacy")
    rig.proxy.inject(Fault.internal(), method="PUT")
    store = rig.store()
    assert _retries(store) == {"total_max_attempts": 3, "mode": "legacy"}
    with pytest.raises(StorageError, match="answered InternalError"):
        store.put_bytes("a/driver.txt", SMALL)
    assert len(rig.requests("a/driver.txt", "PUT")) == 3


def test_the_profiles_max_attempts_and_retry_mode_are_honoured(
    rig: Rig, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    config = tmp_path / "aws-config"
    config.write_text("[default]\nmax_attempts = 2\nretry_mode = legacy\n", encoding="utf-8")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    rig.proxy.inject(Fault.internal(), method="PUT")
    store = rig.store()
    assert _retries(store) == {"total_max_attempts": 2, "mode": "legacy"}
    with pytest.raises(StorageError, match="answered InternalError"):
        store.put_bytes("a/driver.txt", SMALL)
    assert len(rig.requests("a/driver.txt", "PUT")) == 2


@pytest.mark.parametrize("value", ["", "x", "0"])
def test_a_max_attempts_botocore_refuses_is_a_configuration_error(
    rig: Rig, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", value)
    with pytest.raises(ConfigError, match="AWS_MAX_ATTEMPTS"):
        rig.store()
    assert rig.proxy.seen == ()


# -- a multipart upload: a failing part is sent again alone -------------------------------


def test_a_part_that_fails_three_times_is_sent_again_alone(own_rig: Rig, tmp_path: Path) -> None:
    """200 MiB in the store's own parts (8 MiB: 25 of them); part 7 fails three times.

    botocore tries part 7 three times, all answered 500; cuda-gate pauses once and sends
    part 7 alone again. Parts 1-6 and 8-25 go up once each, on one multipart upload,
    and nothing is aborted. The file is sparse (stamped every MiB), so the test costs
    little disk and memory: about 5 s here, on 2 cores, so the whole 200 MiB is kept.
    """
    rig = own_rig
    size = 200 * MIB
    assert rig.settings.part_size == DEFAULT_THRESHOLD == 8 * MIB
    big = tmp_path / "libkernels.so"
    sha = _striped(big, size)
    rig.proxy.inject(Fault.internal(), method="PUT", query="partNumber=7", times=3)

    outcome = rig.store().put_file("r/libkernels.so", big, sha, size)

    assert outcome is PutOutcome.STORED
    assert rig.parts("r/libkernels.so") == Counter({7: 4} | {n: 1 for n in range(1, 26) if n != 7})
    posts = rig.requests("r/libkernels.so", "POST")
    assert [sorted(s.params) for s in posts] == [["uploads"], ["uploadId"]]  # create, complete
    assert rig.requests("r/libkernels.so", "DELETE") == []
    assert len(rig.requests("r/libkernels.so", "GET")) == 1  # the read-back
    assert rig.naps == [0.5]


def test_a_part_that_fails_every_round_fails_the_upload_and_aborts_it(
    rig: Rig, tmp_path: Path
) -> None:
    """Three rounds of botocore's three tries; then the upload is aborted, never restarted."""
    big = tmp_path / "big.bin"
    sha = _striped(big, 3 * MIN_PART_SIZE)
    rig.settings = _small_parts(rig.settings)
    rig.proxy.inject(Fault.internal(), method="PUT", query="partNumber=2")
    with pytest.raises(StorageError, match="answered InternalError"):
        rig.store().put_file("r/big.bin", big, sha, 3 * MIN_PART_SIZE)
    assert rig.parts("r/big.bin") == Counter({1: 1, 2: 9})
    posts = rig.requests("r/big.bin", "POST")
    assert [sorted(s.params) for s in posts] == [["uploads"]]
    assert len(rig.requests("r/big.bin", "DELETE")) == 1
    assert rig.naps == [0.5, 1.0]


# -- reads: what botocore cannot retry is read again whole ---------------------------------


def test_a_download_broken_mid_stream_is_read_again(rig: Rig, tmp_path: Path) -> None:
    data = bytes(range(256)) * 8192  # 2 MiB
    rig.store().put_bytes("a/sass.txt", data)
    rule = rig.proxy.inject(Fault.truncate(), method="GET", times=1)
    digest, size = rig.store().get_file("a/sass.txt", tmp_path / "sass.txt")
    assert (digest, size) == (hashlib.sha256(data).hexdigest(), len(data))
    assert (tmp_path / "sass.txt").read_bytes() == data
    assert rule.hits == 1
    assert len(rig.requests("a/sass.txt", "GET")) == 2
    assert rig.naps == [0.5]


def test_a_read_back_that_differs_is_read_again_not_uploaded_again(
    rig: Rig, tmp_path: Path
) -> None:
    big = tmp_path / "big.bin"
    size = 2 * MIN_PART_SIZE + 4321
    sha = _striped(big, size)
    rig.settings = _small_parts(rig.settings)
    rule = rig.proxy.inject(Fault.corrupt(), method="GET", times=1)
    assert rig.store().put_file("r/big.bin", big, sha, size) is PutOutcome.STORED
    assert rule.hits == 1
    assert rig.parts("r/big.bin") == Counter({1: 1, 2: 1, 3: 1})
    assert len(rig.requests("r/big.bin", "GET")) == 2
    assert rig.naps == [0.5]


def test_a_read_back_that_always_differs_is_an_error_after_three_reads(
    rig: Rig, tmp_path: Path
) -> None:
    big = tmp_path / "big.bin"
    size = 2 * MIN_PART_SIZE + 4321
    sha = _striped(big, size)
    rig.settings = _small_parts(rig.settings)
    rig.proxy.inject(Fault.corrupt(), method="GET")
    with pytest.raises(StorageError, match=f"expected {sha} .*, 3 reads"):
        rig.store().put_file("r/big.bin", big, sha, size)
    assert rig.parts("r/big.bin") == Counter({1: 1, 2: 1, 3: 1})
    assert len(rig.requests("r/big.bin", "GET")) == 3
    assert rig.naps == [0.5, 1.0]


def _small_parts(settings: StoreSettings) -> StoreSettings:
    """Files from 5 MiB (S3's smallest part) in parts of 5 MiB: a few parts, quickly."""
    return replace(settings, multipart_threshold=MIN_PART_SIZE, part_size=MIN_PART_SIZE)


def _retries(store: S3Store) -> Any:
    """The client's botocore retry configuration (not in the stubs)."""
    config: Any = store.client.meta.config
    return config.retries
