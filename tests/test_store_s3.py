"""The S3 store against a real S3-compatible server (SeaweedFS on loopback), faults included."""

from __future__ import annotations

import base64
import hashlib
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import botocore.exceptions
import pytest

from gate.errors import EvidenceChangedError, ExitCode, StorageConflictError, StorageError
from gate.store import (
    ObjectExistsError,
    ProgressEvent,
    StoreSettings,
    fetch_run,
    kept_aside,
    list_runs,
    load_settings,
    open_store,
    pending,
    publish,
    resume,
)
from gate.store.s3 import S3Store
from gate.store.settings import MIN_PART_SIZE, STORE_VARIABLES
from tests.s3server import WeedServer, free_ports
from tests.store_helpers import REVISION, make_evidence, meta, reseal, run_cli, validate_index

pytestmark = [
    pytest.mark.integration,
]

BIG = MIN_PART_SIZE * 2 + 123_457  # three parts


def _environment(monkeypatch: pytest.MonkeyPatch, weed: WeedServer, tmp_path: Path) -> None:
    # Away from the project's own pyproject.toml: only the environment configures the store.
    monkeypatch.chdir(tmp_path)
    for name in STORE_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    for name, value in weed.env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("CUDA_GATE_SPOOL_DIR", str(tmp_path / "spool"))
    monkeypatch.setenv("CUDA_GATE_MULTIPART_THRESHOLD", str(MIN_PART_SIZE))


def _new_bucket(weed: WeedServer, *, lock: bool = False) -> str:
    name = f"gate-{uuid.uuid4().hex[:12]}"
    weed.client().create_bucket(Bucket=name, ObjectLockEnabledForBucket=lock)
    return name


@pytest.fixture
def configure(
    server: WeedServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Callable[..., StoreSettings]:
    """Point the environment at a fresh bucket on the module's server; return the settings."""

    def make(*, lock: bool = False, bucket: str | None = None, **env: str) -> StoreSettings:
        _environment(monkeypatch, server, tmp_path)
        name = bucket or _new_bucket(server, lock=lock)
        monkeypatch.setenv("CUDA_GATE_STORE", f"s3://{name}/gate")
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        return replace(load_settings(tmp_path), attempts=2)

    return make


def _key(settings: StoreSettings, name: str, run_id: str = "20261129T180000Z-1a2b3c") -> str:
    return f"{settings.prefix}/acme/kernels/{REVISION}/gpu-box-1/{run_id}/{name}"


def test_round_trip_with_checksums(
    configure: Callable[..., StoreSettings], server: WeedServer, tmp_path: Path
) -> None:
    settings = configure()
    evidence = make_evidence(tmp_path / "ev")
    result = publish(evidence, meta(), settings)
    assert result.location.startswith(f"s3://{settings.bucket}/gate/acme/kernels/{REVISION}/")
    assert result.uploaded[-1] == "index.json"
    assert pending(settings.spool_dir) == ()

    client = server.client()
    for name in ("result.json", "logs/native.log"):
        head = client.head_object(
            Bucket=settings.bucket, Key=_key(settings, name), ChecksumMode="ENABLED"
        )
        digest = hashlib.sha256((evidence / name).read_bytes())
        assert head["ChecksumSHA256"] == base64.b64encode(digest.digest()).decode()
        assert head["Metadata"]["sha256"] == digest.hexdigest()
    body = client.get_object(Bucket=settings.bucket, Key=_key(settings, "index.json"))["Body"]
    doc = validate_index(body.read())
    assert doc["revision"] == REVISION

    store = open_store(settings)
    run_key = f"acme/kernels/{REVISION}/gpu-box-1/{meta().run_id}"
    assert f"{run_key}/index.json" in set(store.list_keys(""))
    assert sorted(store.list_keys(run_key)) == sorted(f"{run_key}/{n}" for n in result.uploaded)
    runs = list_runs(store, "acme/kernels", REVISION)
    assert [(r.runner, r.complete) for r in runs] == [("gpu-box-1", True)]
    fetch_run(
        store,
        "acme/kernels",
        REVISION,
        runner="gpu-box-1",
        run_id=meta().run_id,
        dest=tmp_path / "back",
    )
    for name in ("driver.txt", "sass.txt", "logs/native.log", "result.json"):
        assert (tmp_path / "back" / name).read_bytes() == (evidence / name).read_bytes()


def test_multipart_upload_verifies_the_whole_file(
    configure: Callable[..., StoreSettings], server: WeedServer, tmp_path: Path
) -> None:
    settings = configure()
    evidence = make_evidence(tmp_path / "ev", big=BIG)
    events: list[ProgressEvent] = []
    publish(evidence, meta(), settings, progress=events.append)
    parts = [e for e in events if e.key.endswith("libkernels.so")]
    assert [e.done for e in parts] == [MIN_PART_SIZE, 2 * MIN_PART_SIZE, BIG, BIG]
    assert all(e.multipart for e in parts)
    head = server.client().head_object(
        Bucket=settings.bucket, Key=_key(settings, "libkernels.so"), ChecksumMode="ENABLED"
    )
    # The server only knows a checksum of part checksums; our metadata carries the file's.
    assert head["ChecksumSHA256"].endswith("-3")
    digest = hashlib.sha256((evidence / "libkernels.so").read_bytes()).hexdigest()
    assert head["Metadata"]["sha256"] == digest
    index = fetch_run(
        open_store(settings),
        "acme/kernels",
        REVISION,
        runner="gpu-box-1",
        run_id=meta().run_id,
        dest=tmp_path / "back",
    )
    assert {f.name: f.size for f in index.files}["libkernels.so"] == BIG
    assert hashlib.sha256((tmp_path / "back" / "libkernels.so").read_bytes()).hexdigest() == digest


def test_conditional_write_refuses_to_overwrite(
    configure: Callable[..., StoreSettings], server: WeedServer, tmp_path: Path
) -> None:
    settings = configure()
    evidence = make_evidence(tmp_path / "ev")
    publish(evidence, meta(), settings)
    again = publish(evidence, meta(), settings)
    assert (again.uploaded, len(again.already_present)) == ((), 8)

    (evidence / "sass.txt").write_text("different SASS\n")
    reseal(evidence)  # a second gate run that reused the run id
    with pytest.raises(StorageConflictError, match="another run with this id") as info:
        publish(evidence, meta(), settings)
    assert int(info.value.exit_code) == 22
    assert pending(settings.spool_dir) == ()
    assert len(kept_aside(settings.spool_dir)) == 1
    client = server.client()
    key = _key(settings, "sass.txt")
    stored = client.get_object(Bucket=settings.bucket, Key=key)["Body"].read()
    assert stored.startswith(b"Function : _Z11write_valuePi")
    # The server itself enforces the condition, not only our HEAD before the put.
    with pytest.raises(botocore.exceptions.ClientError) as refused:
        client.put_object(Bucket=settings.bucket, Key=key, Body=b"x", IfNoneMatch="*")
    assert refused.value.response["Error"]["Code"] == "PreconditionFailed"


def _plant(
    server: WeedServer, settings: StoreSettings, name: str, body: bytes, *, claimed: str, how: str
) -> None:
    """Put ``body`` under the run's key ``name`` claiming ``x-amz-meta-sha256: claimed``."""
    client, key = server.client(), _key(settings, name)
    if how == "multipart":
        upload = client.create_multipart_upload(
            Bucket=settings.bucket,
            Key=key,
            ChecksumAlgorithm="SHA256",
            Metadata={"sha256": claimed},
        )
        parts = []
        for number, chunk in enumerate((body[:MIN_PART_SIZE], body[MIN_PART_SIZE:]), start=1):
            checksum = base64.b64encode(hashlib.sha256(chunk).digest()).decode()
            sent = client.upload_part(
                Bucket=settings.bucket,
                Key=key,
                UploadId=upload["UploadId"],
                PartNumber=number,
                Body=chunk,
                ChecksumSHA256=checksum,
            )
            parts.append({"PartNumber": number, "ETag": sent["ETag"], "ChecksumSHA256": checksum})
        client.complete_multipart_upload(
            Bucket=settings.bucket,
            Key=key,
            UploadId=upload["UploadId"],
            MultipartUpload={"Parts": parts},
        )
        return
    extra = {"ChecksumAlgorithm": "SHA256"} if how == "sha256" else {}
    client.put_object(
        Bucket=settings.bucket, Key=key, Body=body, Metadata={"sha256": claimed}, **extra
    )


@pytest.mark.parametrize(
    "case",
    [
        ("sha256", "driver.txt", "the server's checksum"),
        ("plain", "driver.txt", "read back"),
        ("multipart", "libkernels.so", "read back"),
    ],
)
def test_forged_metadata_does_not_make_other_bytes_present(
    configure: Callable[..., StoreSettings],
    server: WeedServer,
    tmp_path: Path,
    case: tuple[str, str, str],
) -> None:
    how, name, seen = case
    settings = configure()
    evidence = make_evidence(tmp_path / "ev", big=BIG)
    ours = (evidence / name).read_bytes()
    other = bytes(reversed(ours))  # the same size, other bytes
    _plant(server, settings, name, other, claimed=hashlib.sha256(ours).hexdigest(), how=how)
    with pytest.raises(
        ObjectExistsError, match=rf"{name}: it already holds different content"
    ) as info:
        publish(evidence, meta(), settings)
    assert f"({seen})" in str(info.value)
    stored = server.client().get_object(Bucket=settings.bucket, Key=_key(settings, name))
    assert stored["Body"].read() == other
    # The run is kept (set aside in the spool, out of the queue), not dropped.
    assert int(info.value.exit_code) == 22
    assert pending(settings.spool_dir) == ()
    (kept,) = kept_aside(settings.spool_dir)
    assert (kept.folder / "evidence" / name).read_bytes() == ours
    assert kept.index is not None
    assert kept.index.meta == meta()


@pytest.mark.parametrize("how", ["sha256", "plain"])
def test_our_bytes_under_forged_metadata_are_verified_present(
    configure: Callable[..., StoreSettings], server: WeedServer, tmp_path: Path, how: str
) -> None:
    settings = configure()
    evidence = make_evidence(tmp_path / "ev")
    ours = (evidence / "driver.txt").read_bytes()
    _plant(server, settings, "driver.txt", ours, claimed="0" * 64, how=how)
    result = publish(evidence, meta(), settings)
    assert result.already_present == ("driver.txt",)
    assert pending(settings.spool_dir) == ()


def test_object_lock_retention_refuses_delete(
    configure: Callable[..., StoreSettings], server: WeedServer, tmp_path: Path
) -> None:
    settings = configure(
        lock=True, CUDA_GATE_OBJECT_LOCK_MODE="COMPLIANCE", CUDA_GATE_OBJECT_LOCK_DAYS="1"
    )
    publish(make_evidence(tmp_path / "ev", big=BIG), meta(), settings)
    client = server.client()
    for name in ("index.json", "libkernels.so"):
        key = _key(settings, name)
        retention = client.get_object_retention(Bucket=settings.bucket, Key=key)["Retention"]
        assert retention["Mode"] == "COMPLIANCE"
        version = client.head_object(Bucket=settings.bucket, Key=key)["VersionId"]
        with pytest.raises(botocore.exceptions.ClientError) as refused:
            client.delete_object(Bucket=settings.bucket, Key=key, VersionId=version)
        assert refused.value.response["Error"]["Code"] == "AccessDenied"
        assert client.head_object(Bucket=settings.bucket, Key=key)["ContentLength"] > 0


def test_object_lock_on_a_bucket_without_lock_is_one_clear_line(
    configure: Callable[..., StoreSettings], tmp_path: Path
) -> None:
    settings = configure(CUDA_GATE_OBJECT_LOCK_MODE="GOVERNANCE", CUDA_GATE_OBJECT_LOCK_DAYS="3")
    with pytest.raises(StorageError, match="has no Object Lock, but GOVERNANCE retention"):
        publish(make_evidence(tmp_path / "ev"), meta(), settings)
    assert len(pending(settings.spool_dir)) == 1


@pytest.mark.parametrize(
    "wrong",
    [
        (
            "AWS_SECRET_ACCESS_KEY",
            "wrong-secret",
            "refused the credentials (SignatureDoesNotMatch)",
        ),
        ("AWS_ACCESS_KEY_ID", "unknown-key", "refused the credentials (InvalidAccessKeyId)"),
    ],
)
def test_wrong_credentials_give_one_clear_line(
    configure: Callable[..., StoreSettings],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    wrong: tuple[str, str, str],
) -> None:
    variable, value, expected = wrong
    configure()
    monkeypatch.setenv(variable, value)
    make_evidence(tmp_path / "ev")
    code, _, err = run_cli(monkeypatch, capsys, "upload", str(tmp_path / "ev"))
    assert code == int(ExitCode.STORAGE)
    assert len(err.strip().splitlines()) == 1
    assert expected in err
    assert "kept in the spool" in err


def test_missing_bucket_gives_one_clear_line(
    configure: Callable[..., StoreSettings],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    configure(bucket="no-such-bucket-here")
    make_evidence(tmp_path / "ev")
    code, _, err = run_cli(monkeypatch, capsys, "upload", str(tmp_path / "ev"))
    assert code == int(ExitCode.STORAGE)
    assert len(err.strip().splitlines()) == 1
    assert "bucket 'no-such-bucket-here' does not exist" in err


def test_unreachable_endpoint_fails_fast_and_keeps_the_spool(
    configure: Callable[..., StoreSettings],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    (port,) = free_ports(1)
    configure(bucket="any-bucket", CUDA_GATE_S3_ENDPOINT=f"http://127.0.0.1:{port}")
    make_evidence(tmp_path / "ev")
    start = time.monotonic()
    code, _, err = run_cli(monkeypatch, capsys, "upload", str(tmp_path / "ev"))
    assert time.monotonic() - start < 5  # connection refused: no timeout, one quick retry
    assert code == int(ExitCode.STORAGE)
    assert len(err.strip().splitlines()) == 1
    assert "cannot reach s3://any-bucket" in err
    assert "upload --resume" in err
    assert len(pending(tmp_path / "spool")) == 1


@pytest.mark.usefixtures("weed_path")
def test_server_killed_mid_upload_then_resume_completes(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    weed = WeedServer(tmp_path_factory.mktemp("weed-crash"))
    try:
        weed.start()
        _environment(monkeypatch, weed, tmp_path)
        bucket = _new_bucket(weed)
        monkeypatch.setenv("CUDA_GATE_STORE", f"s3://{bucket}/gate")
        settings = replace(load_settings(tmp_path), attempts=2)
        evidence = make_evidence(tmp_path / "ev", big=BIG)

        def crash(event: ProgressEvent) -> None:
            if event.key.endswith("libkernels.so") and event.done == MIN_PART_SIZE:
                weed.kill()

        with pytest.raises(StorageError, match="kept in the spool") as info:
            publish(evidence, meta(), settings, progress=crash)
        assert "cannot reach" in info.value.one_line()
        assert len(pending(settings.spool_dir)) == 1

        weed.start()
        # The index goes last: without it the half-uploaded run reads as incomplete.
        runs = list_runs(open_store(settings), "acme/kernels", REVISION)
        assert [(r.runner, r.complete) for r in runs] == [("gpu-box-1", False)]
        code, out, err = run_cli(monkeypatch, capsys, "upload", "--resume", "--quiet")
        assert (code, err) == (0, "")
        # The marker and driver.txt went up before the crash; the rest (index last) after it.
        assert "7 stored, 2 already present" in out
        assert pending(settings.spool_dir) == ()

        code, out, _ = run_cli(
            monkeypatch,
            capsys,
            "evidence",
            "get",
            "--revision",
            REVISION,
            "--runner",
            "gpu-box-1",
            "--repository",
            "acme/kernels",
            "--dest",
            str(tmp_path / "back"),
        )
        assert code == 0
        for name in ("driver.txt", "libkernels.so", "logs/native.log", "result.json", "sass.txt"):
            assert (tmp_path / "back" / name).read_bytes() == (evidence / name).read_bytes()
        uploads: Any = weed.client().list_multipart_uploads(Bucket=bucket)
        assert uploads.get("Uploads", []) == []
    finally:
        weed.cleanup()


@pytest.mark.usefixtures("weed_path")
def test_transient_outage_is_retried_within_the_same_upload(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    weed = WeedServer(tmp_path_factory.mktemp("weed-blip"))
    try:
        weed.start()
        _environment(monkeypatch, weed, tmp_path)
        bucket = _new_bucket(weed)
        monkeypatch.setenv("CUDA_GATE_STORE", f"s3://{bucket}/gate")
        settings = replace(load_settings(tmp_path), attempts=2)
        naps: list[float] = []

        def crash(event: ProgressEvent) -> None:
            if event.key.endswith("libkernels.so") and event.done == MIN_PART_SIZE and not naps:
                weed.kill()

        def back_during_backoff(seconds: float) -> None:
            naps.append(seconds)
            weed.start()

        store = S3Store(settings, progress=crash, sleep=back_during_backoff)
        evidence = make_evidence(tmp_path / "ev", big=BIG)
        result = publish(evidence, meta(), settings, store=store)
        assert naps == [0.5]
        assert result.uploaded[-1] == "index.json"
        assert pending(settings.spool_dir) == ()
        fetch_run(
            store,
            "acme/kernels",
            REVISION,
            runner="gpu-box-1",
            run_id=meta().run_id,
            dest=tmp_path / "back",
        )
        assert (tmp_path / "back" / "libkernels.so").read_bytes() == (
            evidence / "libkernels.so"
        ).read_bytes()
    finally:
        weed.cleanup()


def test_a_corrupted_spool_is_refused_by_the_server(
    configure: Callable[..., StoreSettings], server: WeedServer, tmp_path: Path
) -> None:
    (port,) = free_ports(1)
    settings = configure()
    offline = replace(settings, endpoint=f"http://127.0.0.1:{port}")
    with pytest.raises(StorageError, match="cannot reach"):
        publish(make_evidence(tmp_path / "ev"), meta(), offline)
    (entry,) = pending(settings.spool_dir)
    spooled = entry / "sass.txt"
    damaged = bytearray(spooled.read_bytes())
    damaged[100] ^= 0x01
    spooled.write_bytes(bytes(damaged))
    # Same size, one bit flipped: the server checks the SHA-256 we send and refuses.
    refused = resume(settings).error()
    assert isinstance(refused, StorageError)
    assert "BadDigest" in refused.one_line()
    spooled.write_bytes(bytes(damaged[:50]))
    damaged_spool = resume(settings).error()
    assert isinstance(damaged_spool, EvidenceChangedError)
    assert "the spooled file is 50 bytes" in damaged_spool.one_line()
    client = server.client()
    listed = client.list_objects_v2(Bucket=settings.bucket).get("Contents", [])
    assert sorted(item["Key"].rsplit("/", 1)[-1] for item in listed) == [
        ".cuda-gate",
        "driver.txt",
        "manifest.json",
        "native.log",
        "result.json",
    ]
    assert pending(settings.spool_dir) == (entry,)


def test_evidence_list_prints_the_runs(
    configure: Callable[..., StoreSettings],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    server: WeedServer,
    tmp_path: Path,
) -> None:
    settings = configure()
    publish(make_evidence(tmp_path / "a"), meta(), settings)
    server.client().put_object(
        Bucket=settings.bucket,
        Key=_key(settings, "driver.txt", run_id="20261129T190000Z-abcdef"),
        Body=b"half a run",
    )
    code, out, _ = run_cli(
        monkeypatch,
        capsys,
        "evidence",
        "list",
        "--revision",
        REVISION,
        "--repository",
        "acme/kernels",
    )
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith(f"acme/kernels @ {REVISION[:12]} in s3://{settings.bucket}/gate")
    # Newest first: the half-written run's id says it started at 19:00.
    assert lines[2].split() == ["incomplete", "-", REVISION[:12], "gpu-box-1", "-", "abcdef"]
    assert lines[3].split() == [
        "accepted", "2026-11-29", "18:00:00", REVISION[:12], "gpu-box-1", "h200", "1a2b3c",
    ]  # fmt: skip
    assert lines[4] == "2 runs: 1 accepted, 1 incomplete"


def test_the_client_leaves_what_the_user_configured_for_aws_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gate.store.s3 import make_client
    from gate.store.settings import StoreSettings

    config = tmp_path / "aws-config"
    config.write_text("[default]\ns3 =\n    addressing_style = path\n", encoding="utf-8")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    for name in ("AWS_MAX_ATTEMPTS", "AWS_RETRY_MODE", "AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    bare = StoreSettings(kind="s3", bucket="bucket")
    # Nothing configured anywhere: cuda-gate's retries; the profile's addressing style.
    client = make_client(bare)
    assert _config(client).retries == {"total_max_attempts": 3, "mode": "standard"}
    assert _config(client).s3 == {"addressing_style": "path"}
    assert _config(client).request_checksum_calculation == "when_supported"
    # The user's AWS settings win over cuda-gate's defaults.
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "7")
    monkeypatch.setenv("AWS_RETRY_MODE", "adaptive")
    monkeypatch.setenv("AWS_REQUEST_CHECKSUM_CALCULATION", "when_required")
    monkeypatch.setenv("AWS_REGION", "eu-north-1")
    client = make_client(bare)
    assert _config(client).retries == {"total_max_attempts": 7, "mode": "adaptive"}
    assert _config(client).request_checksum_calculation == "when_required"
    assert client.meta.region_name == "eu-north-1"
    # ...and what the user gave cuda-gate wins over both.
    given = StoreSettings(
        kind="s3", bucket="bucket", region="us-west-2", path_style=False,
        given=frozenset({"region", "path-style"}),
    )  # fmt: skip
    client = make_client(given)
    assert client.meta.region_name == "us-west-2"
    assert _config(client).s3 == {"addressing_style": "auto"}


def _config(client: Any) -> Any:
    """The client's botocore Config (its attributes are not in the stubs)."""
    return client.meta.config
