"""The interface every evidence store implements, and the write-once rule they share.

Keys are POSIX paths relative to the store's root (its folder or bucket prefix).
A put never replaces an object: an identical one already there counts as done
(idempotent reruns), a different one is refused with ObjectExistsError.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from gate.errors import StorageConflictError


class PutOutcome(Enum):
    """What a put did."""

    STORED = "stored"
    PRESENT = "present"


class ObjectExistsError(StorageConflictError):
    """A different object already sits under the key: evidence is never overwritten."""


@dataclass(frozen=True)
class ProgressEvent:
    """Bytes of one object sent so far; ``done == total`` when the object is complete."""

    key: str
    done: int
    total: int
    multipart: bool


ProgressCallback = Callable[[ProgressEvent], None]


class EvidenceStore(ABC):
    """A write-once object store for evidence files."""

    @abstractmethod
    def describe(self) -> str:
        """The store as a person would name it (a folder, ``s3://bucket/prefix``)."""

    @abstractmethod
    def check(self) -> None:
        """Fail early with one clear StorageError when the store cannot be used."""

    @abstractmethod
    def put_file(self, key: str, path: Path, sha256: str, size: int) -> PutOutcome:
        """Store ``path`` under ``key``, verified against ``sha256`` and ``size``."""

    @abstractmethod
    def put_bytes(self, key: str, data: bytes) -> PutOutcome:
        """Store a small object (the run index) under ``key``, verified."""

    @abstractmethod
    def get_bytes(self, key: str) -> bytes | None:
        """A small object's content, or None when the key does not exist."""

    @abstractmethod
    def get_file(self, key: str, dest: Path) -> tuple[str, int]:
        """Download ``key`` into ``dest``; return the sha256 and size of what was written."""

    @abstractmethod
    def list_keys(self, prefix: str) -> Iterator[str]:
        """Every key below the folder ``prefix`` (no trailing slash), in any order."""

    def abort_unfinished(self, prefix: str, keys: frozenset[str]) -> None:
        """Abort the unfinished uploads of ``keys`` (all below ``prefix``) that earlier
        attempts left behind; a store without multipart uploads has none to abort."""
        del prefix, keys

    def location(self, key: str) -> str:
        """Where ``key`` lives, for messages."""
        return f"{self.describe().split(' at ')[0].rstrip('/')}/{key}"
