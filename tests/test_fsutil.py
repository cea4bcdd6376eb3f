"""The one atomic writer: a crash at any point leaves the old file or the new one, never half."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gate import fsutil
from gate.errors import EvidenceError

pytestmark = pytest.mark.unit


def test_a_write_that_fails_midway_leaves_the_old_file_and_no_temp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "result.json"
    target.write_bytes(b"old and complete\n")

    def broken_fsync(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", broken_fsync)
    with pytest.raises(EvidenceError, match=r"result\.json: cannot write: No space left on device"):
        fsutil.write_atomic(target, b"new" * 100_000)
    assert target.read_bytes() == b"old and complete\n"
    assert [p.name for p in tmp_path.iterdir()] == ["result.json"]


def test_the_new_content_appears_whole_with_the_mode_asked_for(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "key.pem"
    seen: list[bytes] = []
    real_replace = Path.replace

    def watching_replace(self: Path, other: Path) -> Path:
        # When the rename happens, the temp file already holds every byte, synced.
        seen.append(self.read_bytes())
        return real_replace(self, other)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Path, "replace", watching_replace)
        fsutil.write_atomic(target, b"secret\n", mode=0o600)
    assert seen == [b"secret\n"]
    assert target.read_bytes() == b"secret\n"
    assert target.stat().st_mode & 0o777 == 0o600


def test_digest_and_size_of_a_file(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"abc")
    assert fsutil.digest_file(path) == (
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
        3,
    )
