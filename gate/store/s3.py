"""S3-compatible evidence store through boto3 (AWS, MinIO, Ceph, SeaweedFS).

Every put carries its SHA-256 so the server checks the bytes it received; large
files go up in parts and the whole file's sha256 is then verified by reading the
object back (servers give only a composite checksum for multipart objects).
Writes are conditional (``If-None-Match: *``): evidence is never overwritten.
An object already under a key counts as ours only by a digest the server
computed or by its bytes, never by the ``sha256`` metadata a writer claimed.

Who retries what (docs/store.md, "Retries"): botocore retries every request, as
the user's AWS configuration says; cuda-gate sends again only what botocore
cannot: a part whose requests all failed (alone, the parts stored stay), and a
read whose body broke mid-stream or whose read-back differs (read again whole).
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import hashlib
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, TypeVar

import boto3
import botocore.config
import botocore.exceptions
import botocore.session

from gate.errors import ConfigError, StorageError
from gate.store.base import (
    EvidenceStore,
    ObjectExistsError,
    ProgressCallback,
    ProgressEvent,
    PutOutcome,
)
from gate.store.settings import StoreSettings

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

T = TypeVar("T")
_CREDENTIAL_CODES = {
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "InvalidToken",
    "ExpiredToken",
    "InvalidClientTokenId",
}
_TRANSIENT_CODES = {
    "RequestTimeout",
    "RequestTimeTooSkewed",
    "SlowDown",
    "Throttling",
    "ThrottlingException",
    "InternalError",
    "ServiceUnavailable",
}
_TRANSIENT_EXCEPTIONS = (
    botocore.exceptions.EndpointConnectionError,
    botocore.exceptions.ConnectionClosedError,
    botocore.exceptions.ConnectTimeoutError,
    botocore.exceptions.ReadTimeoutError,
    botocore.exceptions.ResponseStreamingError,
    botocore.exceptions.HTTPClientError,
)
# A body that broke after botocore handed the response over: botocore retried the
# request, it cannot retry the body (a truncated body, a reset, a stalled read).
_BROKEN_BODY = (
    botocore.exceptions.ResponseStreamingError,
    botocore.exceptions.IncompleteReadError,
    botocore.exceptions.ReadTimeoutError,
    botocore.exceptions.ConnectionClosedError,
)
_BACKOFF = 0.5


class _ReadBackError(Exception):
    """The bytes read back are not the bytes put: read again, then a StorageError."""


def make_client(settings: StoreSettings, *, attempts: int = 3) -> S3Client:
    """A boto3 S3 client from the settings and the standard AWS configuration.

    cuda-gate passes a setting to botocore only where the user gave it to cuda-gate
    (``settings.given``) or gave it nowhere: what the environment or the profile says
    (``AWS_MAX_ATTEMPTS``, ``AWS_RETRY_MODE``, ``addressing_style``,
    ``AWS_REQUEST_CHECKSUM_CALCULATION``) is never overridden. Where neither
    says, each request is tried ``attempts`` times in botocore's standard retry mode. The
    region is cuda-gate's setting, else ``AWS_REGION`` as the AWS CLI reads it, else
    botocore's own chain (``AWS_DEFAULT_REGION``, the profile).

    botocore owns request retries (docs/store.md, "Retries"); a retry setting botocore
    refuses (``AWS_MAX_ATTEMPTS=x``, an empty one) is a ConfigError naming the settings.
    """
    core = botocore.session.get_session()
    try:
        profile: dict[str, Any] = dict(core.get_scoped_config())
    except botocore.exceptions.ProfileNotFound:
        profile = {}

    def user_set(variable: str, key: str) -> bool:
        # As botocore reads them: a variable that is set, even empty, wins over the profile.
        return variable in os.environ or key in profile

    given = settings.given
    options: dict[str, Any] = {}
    region = settings.region or os.environ.get("AWS_REGION") or None
    if region:
        options["region_name"] = region
    if "path-style" in given:
        options["s3"] = {"addressing_style": "path" if settings.path_style else "auto"}
    retries: dict[str, Any] = {}
    if not user_set("AWS_MAX_ATTEMPTS", "max_attempts"):
        retries["total_max_attempts"] = attempts
    if not user_set("AWS_RETRY_MODE", "retry_mode"):
        retries["mode"] = "standard"
    if retries:
        options["retries"] = retries
    # No AWS setting names a connect timeout (botocore's is 60 s): cuda-gate's applies.
    options["connect_timeout"] = settings.connect_timeout
    config = botocore.config.Config(**options)
    session = boto3.session.Session(botocore_session=core)
    try:
        return session.client("s3", endpoint_url=settings.endpoint, config=config)
    except (ValueError, botocore.exceptions.InvalidRetryConfigurationError) as e:
        # botocore refuses AWS_MAX_ATTEMPTS=x, AWS_RETRY_MODE=x (or the profile's) this way.
        raise ConfigError(
            f"the AWS retry configuration (AWS_MAX_ATTEMPTS, AWS_RETRY_MODE or the profile's "
            f"max_attempts, retry_mode) is not usable: {e}"
        ) from e


def _b64(hex_digest: str) -> str:
    return base64.b64encode(bytes.fromhex(hex_digest)).decode()


class S3Store(EvidenceStore):
    """Evidence in a bucket under ``<prefix>/``."""

    def __init__(
        self,
        settings: StoreSettings,
        client: S3Client | None = None,
        *,
        progress: ProgressCallback | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.settings = settings
        self.client = client if client is not None else make_client(settings)
        # Aborting a failed upload tries twice only: the store is failing already, and
        # abort_unfinished aborts the upload before the run's index when this fails too.
        self._probe = client if client is not None else make_client(settings, attempts=2)
        self.bucket = settings.bucket
        self.progress = progress
        self._sleep = sleep
        # Multipart uploads this client is sending now: never aborted as unfinished.
        self._active: set[str] = set()

    def describe(self) -> str:
        """``s3://bucket/prefix at endpoint``."""
        return self.settings.describe()

    def _key(self, key: str) -> str:
        return f"{self.settings.prefix}/{key}" if self.settings.prefix else key

    # -- errors ---------------------------------------------------------------------------

    def _error(self, e: Exception, action: str) -> StorageError:
        """One line a person can act on, for any boto3 failure."""
        where = f"s3://{self.bucket}" + (
            f" at {self.settings.endpoint}" if self.settings.endpoint else ""
        )
        if isinstance(e, botocore.exceptions.NoCredentialsError):
            return StorageError(
                f"{action}: no AWS credentials found for {where}",
                hint="set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE",
            )
        if isinstance(e, botocore.exceptions.ClientError):
            error = e.response.get("Error", {})
            return self._refusal(action, where, str(error.get("Code", "?")), error.get("Message"))
        if isinstance(e, botocore.exceptions.EndpointConnectionError):
            return StorageError(f"{action}: cannot reach {where}: {e}")
        return StorageError(f"{action}: {where}: {e}")

    def _refusal(self, action: str, where: str, code: str, message: str | None) -> StorageError:
        """The server answered with an error code: name the cause a person can fix."""
        if code == "NoSuchBucket":
            return StorageError(f"{action}: bucket {self.bucket!r} does not exist at {where}")
        if code in _CREDENTIAL_CODES:
            return StorageError(
                f"{action}: {where} refused the credentials ({code})",
                hint="check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY or AWS_PROFILE",
            )
        if code in {"AccessDenied", "403"}:
            return StorageError(f"{action}: access denied by {where} ({code})")
        return StorageError(f"{action}: {where} answered {code}: {message or 'no message'}")

    @staticmethod
    def _transient(e: Exception) -> bool:
        """Worth another round at a part: botocore's tries at it are spent, the fault may pass."""
        if isinstance(e, _TRANSIENT_EXCEPTIONS):
            return True
        if isinstance(e, botocore.exceptions.ClientError):
            status = int(e.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
            return e.response.get("Error", {}).get("Code") in _TRANSIENT_CODES or status >= 500
        return False

    @contextlib.contextmanager
    def _failure(self, action: str) -> Iterator[None]:
        """Any boto3 failure inside becomes one StorageError line; nothing is retried here."""
        try:
            yield
        except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as e:
            raise self._error(e, action) from e

    def _pause(self, attempt: int) -> None:
        self._sleep(_BACKOFF * 2 ** (attempt - 1))

    def _read(
        self, key: str, consume: Callable[[Iterator[bytes]], T], *, checksum: bool = False
    ) -> T:
        """GET ``key`` and hand its body to ``consume``, reading it again whole when the
        body breaks mid-stream or ``consume`` finds that the bytes differ.

        The GET itself is botocore's to retry; its failure is raised as it came. Only
        what botocore cannot retry (it has handed the body over) is retried here, up
        to ``settings.attempts`` reads.
        """
        for attempt in range(1, self.settings.attempts + 1):
            mode: dict[str, Any] = {"ChecksumMode": "ENABLED"} if checksum else {}
            response = self.client.get_object(Bucket=self.bucket, Key=self._key(key), **mode)
            try:
                return consume(response["Body"].iter_chunks(1 << 20))
            except (*_BROKEN_BODY, _ReadBackError) as e:
                if attempt == self.settings.attempts:
                    if isinstance(e, _ReadBackError):
                        raise StorageError(str(e)) from e
                    raise
                self._pause(attempt)
        raise AssertionError("unreachable")  # pragma: no cover

    # -- interface ----------------------------------------------------------------------

    def check(self) -> None:
        """List one key (names missing buckets and bad credentials), and check Object Lock."""
        action = "checking the evidence store"
        try:
            self.client.list_objects_v2(Bucket=self.bucket, Prefix=self._key(""), MaxKeys=1)
        except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as e:
            raise self._error(e, action) from e
        if self.settings.object_lock_mode is None:
            return
        try:
            lock = self.client.get_object_lock_configuration(Bucket=self.bucket)
            enabled = lock.get("ObjectLockConfiguration", {}).get("ObjectLockEnabled") == "Enabled"
        except botocore.exceptions.ClientError as e:
            if "ObjectLockConfiguration" not in str(e.response.get("Error", {}).get("Code")):
                raise self._error(e, action) from e
            enabled = False
        except botocore.exceptions.BotoCoreError as e:
            raise self._error(e, action) from e
        if not enabled:
            raise StorageError(
                f"{action}: bucket {self.bucket!r} has no Object Lock, but "
                f"{self.settings.object_lock_mode} retention is configured",
                hint="create the bucket with Object Lock enabled or unset the object-lock mode",
            )

    def _existing(self, key: str) -> dict[str, Any] | None:
        """The object's HEAD, with the checksum the server computed (ChecksumMode), or None."""
        try:
            head = self.client.head_object(
                Bucket=self.bucket, Key=self._key(key), ChecksumMode="ENABLED"
            )
        except botocore.exceptions.ClientError as e:
            if e.response.get("Error", {}).get("Code") in {"404", "NoSuchKey", "NotFound"}:
                return None
            raise
        return dict(head)

    def _compare(self, key: str, head: dict[str, Any], sha256: str, size: int) -> PutOutcome:
        """PRESENT when the object already there holds these bytes; ObjectExistsError if not.

        Only a digest the server computed is trusted: ``x-amz-meta-sha256`` is whatever
        the writer claimed, so an object with forged metadata must not count as ours.
        A full-object SHA-256 checksum (the server verified it when the object was
        put) is compared directly; a composite one (multipart: a checksum of part
        checksums) or none at all means reading the object back and hashing it.
        """
        found_size = head.get("ContentLength")
        if found_size == size:
            checksum = head.get("ChecksumSHA256")
            composite = head.get("ChecksumType") == "COMPOSITE" or "-" in str(checksum or "")
            if checksum and not composite:
                found, how = base64.b64decode(checksum).hex(), "the server's checksum"
            else:
                found, how = self._digest(key), "read back"
            if found == sha256:
                return PutOutcome.PRESENT
            detail = f"sha256 {found} ({how}), {found_size} bytes"
        else:
            detail = f"{found_size} bytes, expected {size}"
        raise ObjectExistsError(
            f"refusing to overwrite {self.location(key)}: it already holds different content "
            f"({detail})"
        )

    def _digest(self, key: str) -> str:
        """The SHA-256 of the object's bytes as the server returns them."""

        def hashed(blocks: Iterator[bytes]) -> str:
            digest = hashlib.sha256()
            for block in blocks:
                digest.update(block)
            return digest.hexdigest()

        return self._read(key, hashed)

    def _lock_args(self) -> dict[str, Any]:
        if self.settings.object_lock_mode is None or self.settings.object_lock_days is None:
            return {}
        until = dt.datetime.now(dt.UTC) + dt.timedelta(days=self.settings.object_lock_days)
        return {
            "ObjectLockMode": self.settings.object_lock_mode,
            "ObjectLockRetainUntilDate": until,
        }

    def put_file(self, key: str, path: Path, sha256: str, size: int) -> PutOutcome:
        """Upload one file unless it is there already; verify what the server stored."""
        multipart = size >= self.settings.multipart_threshold
        with self._failure(f"uploading {path.name} to {self.location(key)}"):
            head = self._existing(key)
            if head is not None:
                return self._compare(key, head, sha256, size)
            if multipart:
                outcome = self._put_multipart(key, path, sha256, size)
                self._verify_readback(key, sha256, size)
            else:
                outcome = self._put_single(key, path, sha256, size)
        if self.progress is not None:
            self.progress(ProgressEvent(key, size, size, multipart))
        return outcome

    def put_bytes(self, key: str, data: bytes) -> PutOutcome:
        """Upload a small object conditionally, with its SHA-256."""
        sha = hashlib.sha256(data).hexdigest()
        with self._failure(f"uploading {self.location(key)}"):
            head = self._existing(key)
            if head is not None:
                return self._compare(key, head, sha, len(data))
            return self._put_body(key, data, sha, len(data))

    def _put_single(self, key: str, path: Path, sha256: str, size: int) -> PutOutcome:
        with path.open("rb") as body:
            return self._put_body(key, body, sha256, size)

    def _put_body(self, key: str, body: bytes | BinaryIO, sha256: str, size: int) -> PutOutcome:
        try:
            response = self.client.put_object(
                Bucket=self.bucket,
                Key=self._key(key),
                Body=body,
                ChecksumSHA256=_b64(sha256),
                IfNoneMatch="*",
                Metadata={"sha256": sha256},
                **self._lock_args(),
            )
        except botocore.exceptions.ClientError as e:
            return self._precondition(e, key, sha256, size)
        returned = response.get("ChecksumSHA256")
        if returned is not None and returned != _b64(sha256):
            raise StorageError(f"{self.location(key)}: the server stored checksum {returned}")
        return PutOutcome.STORED

    def _precondition(
        self, e: botocore.exceptions.ClientError, key: str, sha256: str, size: int
    ) -> PutOutcome:
        """A conditional write lost the race: fine if the winner stored the same bytes."""
        if e.response.get("Error", {}).get("Code") not in {"PreconditionFailed", "412"}:
            raise e
        head = self._existing(key)
        if head is None:
            raise e
        return self._compare(key, head, sha256, size)

    def abort_unfinished(self, prefix: str, keys: frozenset[str]) -> None:
        """Abort the multipart uploads of ``keys`` left unfinished, except this client's own.

        An attempt whose parts failed and whose abort failed too (a burst of 503s)
        leaves an upload the bucket keeps, and bills, until someone aborts it; so
        does an upload killed part-way. Only the keys this run writes are touched.
        """
        with self._failure(f"aborting unfinished uploads below {self.location(prefix)}"):
            self._abort_listed(self._key(prefix) + "/", keys)

    def _abort_listed(self, prefix: str, keys: frozenset[str]) -> None:
        wanted = {self._key(key) for key in keys}
        paginator = self.client.get_paginator("list_multipart_uploads")
        for page in paginator.paginate(Bucket=self.bucket, Prefix=prefix):
            for upload in page.get("Uploads", []):
                key, upload_id = upload.get("Key"), upload.get("UploadId")
                if key not in wanted or upload_id is None or upload_id in self._active:
                    continue
                try:
                    self.client.abort_multipart_upload(
                        Bucket=self.bucket, Key=key, UploadId=upload_id
                    )
                except botocore.exceptions.ClientError as e:
                    # Aborted meanwhile (a retry whose first answer was lost): done.
                    if e.response.get("Error", {}).get("Code") != "NoSuchUpload":
                        raise

    def _put_multipart(self, key: str, path: Path, sha256: str, size: int) -> PutOutcome:
        full = self._key(key)
        upload = self.client.create_multipart_upload(
            Bucket=self.bucket,
            Key=full,
            ChecksumAlgorithm="SHA256",
            Metadata={"sha256": sha256},
            **self._lock_args(),
        )
        upload_id = upload["UploadId"]
        self._active.add(upload_id)
        try:
            parts = self._send_parts(key, path, upload_id, size)
            self.client.complete_multipart_upload(
                Bucket=self.bucket,
                Key=full,
                UploadId=upload_id,
                MultipartUpload={"Parts": parts},  # type: ignore[typeddict-item]
                IfNoneMatch="*",
            )
        except botocore.exceptions.ClientError as e:
            self._abort_quietly(full, upload_id)
            return self._precondition(e, key, sha256, size)
        except BaseException:
            self._abort_quietly(full, upload_id)
            raise
        finally:
            self._active.discard(upload_id)
        return PutOutcome.STORED

    def _send_parts(self, key: str, path: Path, upload_id: str, size: int) -> list[dict[str, Any]]:
        parts: list[dict[str, Any]] = []
        done = 0
        with path.open("rb") as f:
            while chunk := f.read(self.settings.part_size):
                number = len(parts) + 1
                checksum = base64.b64encode(hashlib.sha256(chunk).digest()).decode()
                response = self._send_part(key, upload_id, number, chunk, checksum)
                if response.get("ChecksumSHA256", checksum) != checksum:
                    raise StorageError(f"{self.location(key)}: part {number} stored corrupted")
                parts.append(
                    {"PartNumber": number, "ETag": response["ETag"], "ChecksumSHA256": checksum}
                )
                done += len(chunk)
                if self.progress is not None:
                    self.progress(ProgressEvent(key, done, size, multipart=True))
        return parts

    def _send_part(
        self, key: str, upload_id: str, number: int, chunk: bytes, checksum: str
    ) -> dict[str, Any]:
        """Send one part; when botocore's tries at it all failed on a transient fault,
        send that part alone again after a pause, up to ``settings.attempts`` rounds.

        Giving up on a part gives up the whole upload (a resume starts the file anew),
        so a part, unlike any other request, gets more than botocore's tries; the parts
        already stored stay and are never sent again.
        """
        for attempt in range(1, self.settings.attempts + 1):
            try:
                return dict(
                    self.client.upload_part(
                        Bucket=self.bucket,
                        Key=self._key(key),
                        UploadId=upload_id,
                        PartNumber=number,
                        Body=chunk,
                        ChecksumSHA256=checksum,
                    )
                )
            except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as e:
                if attempt == self.settings.attempts or not self._transient(e):
                    raise
                self._pause(attempt)
        raise AssertionError("unreachable")  # pragma: no cover

    def _abort_quietly(self, full_key: str, upload_id: str) -> None:
        # When this fails too, abort_unfinished aborts the upload before the run's index.
        with contextlib.suppress(
            botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError
        ):
            self._probe.abort_multipart_upload(Bucket=self.bucket, Key=full_key, UploadId=upload_id)

    def _verify_readback(self, key: str, sha256: str, size: int) -> None:
        """Read the whole object back and compare its sha256: parts alone prove less.

        A read-back that differs is read again (a proxy or a cache may have damaged
        that read, not the object); one that differs every time is a StorageError.
        """

        def check(blocks: Iterator[bytes]) -> None:
            digest = hashlib.sha256()
            got = 0
            for block in blocks:
                digest.update(block)
                got += len(block)
            if (digest.hexdigest(), got) != (sha256, size):
                raise _ReadBackError(
                    f"{self.location(key)}: read back sha256 {digest.hexdigest()} ({got} bytes), "
                    f"expected {sha256} ({size} bytes), {self.settings.attempts} reads"
                )

        self._read(key, check)

    def get_bytes(self, key: str) -> bytes | None:
        """A small object's content, or None when absent."""
        with self._failure(f"reading {self.location(key)}"):
            try:
                return self._read(key, b"".join, checksum=True)
            except botocore.exceptions.ClientError as e:
                if e.response.get("Error", {}).get("Code") in {"NoSuchKey", "404"}:
                    return None
                raise

    def get_file(self, key: str, dest: Path) -> tuple[str, int]:
        """Download ``key`` to ``dest``, hashing as it streams."""

        def download(blocks: Iterator[bytes]) -> tuple[str, int]:
            digest = hashlib.sha256()
            size = 0
            with dest.open("wb") as out:
                for block in blocks:
                    digest.update(block)
                    size += len(block)
                    out.write(block)
            return digest.hexdigest(), size

        with self._failure(f"downloading {self.location(key)}"):
            return self._read(key, download, checksum=True)

    def list_keys(self, prefix: str) -> Iterator[str]:
        """Every key below ``prefix``, relative to the store prefix."""
        full = self._key(prefix) + "/" if prefix else self._key("")
        strip = len(self._key(""))
        paginator = self.client.get_paginator("list_objects_v2")
        try:
            for page in paginator.paginate(Bucket=self.bucket, Prefix=full):
                for item in page.get("Contents", []):
                    yield item["Key"][strip:]
        except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as e:
            raise self._error(e, f"listing {self.location(prefix)}") from e
