"""The content-addressed inspection cache: hits, misses, bad entries, atomic writes, where."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from gate.cli import main
from gate.errors import BadInputError
from gate.reader.read import read_artifact
from gate.scan import cache
from gate.scan.cache import cache_dir, inspect_file

GOLDEN = Path(__file__).parent / "golden"
SHA = "0" * 64

pytestmark = pytest.mark.unit


@pytest.fixture
def lib(tmp_path: Path) -> Path:
    copy = tmp_path / "libkernels.so"
    shutil.copy(GOLDEN / "libkernels.so", copy)
    return copy


def _entries(folder: Path) -> list[Path]:
    """The content-addressed entries (not the index of file identities beside them)."""
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.parent.parent == folder
                  and p.parent.name != "files")  # fmt: skip


def test_a_file_read_once_comes_from_the_cache_after(lib: Path, tmp_path: Path) -> None:
    folder = tmp_path / "cache"
    report, digest, size = inspect_file(lib, folder=folder)
    assert (size, len(digest)) == (lib.stat().st_size, 64)
    assert report == read_artifact(lib)
    (entry,) = _entries(folder)
    assert entry.name == f"{digest}.names.json"
    # Change what the entry says: the next call must return it, proving no read.
    doc = json.loads(entry.read_text())
    doc["report"]["kernel_names"].append("_Z6cachedv")  # names are kept by index
    doc["report"]["entries"][0][2] = [len(doc["report"]["kernel_names"]) - 1]
    entry.write_text(json.dumps(doc))
    again, digest2, _ = inspect_file(lib, folder=folder)
    assert digest2 == digest
    assert again.listing.entries[0].kernels == ("_Z6cachedv",)
    assert again.path == str(lib)


def test_names_and_headers_are_separate_entries(lib: Path, tmp_path: Path) -> None:
    folder = tmp_path / "cache"
    inspect_file(lib, folder=folder, names=True)
    headers, _, _ = inspect_file(lib, folder=folder, names=False)
    inspect_file(lib, folder=folder, names=False, scan=False)
    assert not headers.names
    assert [p.name.split(".", 1)[1] for p in _entries(folder)] == [
        "headers-noscan.json", "headers.json", "names.json",
    ]  # fmt: skip


@pytest.mark.parametrize(
    "damage",
    [
        "garbage", "truncated", "foreign", "other version", "wrong sha", "bad field", "empty",
        "name index past the table", "negative name index", "name not a string",
    ],
)  # fmt: skip
def test_bad_entries_are_ignored_and_rewritten(lib: Path, tmp_path: Path, damage: str) -> None:
    folder = tmp_path / "cache"
    good, _, _ = inspect_file(lib, folder=folder)
    (entry,) = _entries(folder)
    text = entry.read_text()
    doc = json.loads(text)
    if damage == "garbage":
        entry.write_bytes(b"\x00\xff not json")
    elif damage == "truncated":
        entry.write_text(text[: len(text) // 2])
    elif damage == "foreign":
        entry.write_text(json.dumps({"hello": "world"}))
    elif damage == "other version":
        doc["reader"] = "0.0.1+0"
        doc["report"]["entries"] = []
        entry.write_text(json.dumps(doc))
    elif damage == "wrong sha":
        doc["sha256"] = SHA
        entry.write_text(json.dumps(doc))
    elif damage == "bad field":
        doc["report"]["entries"][0][1] = "sm_" + "9" * 5000
        entry.write_text(json.dumps(doc))
    elif damage.endswith("index past the table"):
        doc["report"]["entries"][0][2] = [len(doc["report"]["kernel_names"])]
        entry.write_text(json.dumps(doc))
    elif damage.startswith("negative"):
        doc["report"]["entries"][0][2] = [-1]
        entry.write_text(json.dumps(doc))
    elif damage == "name not a string":
        doc["report"]["kernel_names"][0] = 7
        entry.write_text(json.dumps(doc))
    else:
        entry.write_text("")
    again, _, _ = inspect_file(lib, folder=folder)
    assert again == good
    assert json.loads(entry.read_text()) == json.loads(text)  # rewritten whole


def test_writes_are_atomic_and_an_unwritable_cache_is_skipped(lib: Path, tmp_path: Path) -> None:
    folder = tmp_path / "cache"
    inspect_file(lib, folder=folder)
    assert not list(folder.rglob(".*"))  # no temporary file left behind
    blocked = tmp_path / "file-not-folder"
    blocked.write_text("")
    report, _, _ = inspect_file(lib, folder=blocked)
    assert report.error is None


def test_no_cache_neither_reads_nor_writes(lib: Path, tmp_path: Path) -> None:
    folder = tmp_path / "cache"
    inspect_file(lib, folder=folder, use_cache=False)
    assert not folder.exists()


def test_unreadable_files_are_not_cached(tmp_path: Path) -> None:
    bad = tmp_path / "bad.so"
    bad.write_bytes(b"\x7fELF" + b"\xff" * 100)
    folder = tmp_path / "cache"
    with pytest.raises(BadInputError, match=r"bad\.so"):
        inspect_file(bad, folder=folder)
    assert not folder.exists()


def test_where_the_cache_lives(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert cache_dir({"CUDA_GATE_CACHE_DIR": "/x/y", "XDG_CACHE_HOME": "/z"}) == Path("/x/y")
    assert cache_dir({"XDG_CACHE_HOME": "/z"}) == Path("/z/cuda-gate")
    assert cache_dir({"XDG_CACHE_HOME": "rel", "HOME": "/h"}) == Path("/h/.cache/cuda-gate")
    assert cache_dir({"HOME": "/h"}) == Path("/h/.cache/cuda-gate")
    monkeypatch.delenv("CUDA_GATE_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "cuda-gate"


def test_inspect_names_uses_the_cache_and_no_cache_bypasses_it(
    lib: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "cli-cache"
    monkeypatch.setenv("CUDA_GATE_CACHE_DIR", str(folder))
    assert main(["inspect", "--no-detect", "--names", str(lib)]) == 0
    (entry,) = _entries(folder)
    doc = json.loads(entry.read_text())
    assert doc["reader"] == cache.reader_version()
    table = doc["report"]["kernel_names"]
    table[:] = ["_Z6cachedv"] * len(table)  # every kernel of every entry renamed
    entry.write_text(json.dumps(doc))
    capsys.readouterr()
    assert main(["inspect", "--no-detect", "--names", "--json", str(lib)]) == 0
    (art,) = json.loads(capsys.readouterr().out)["artifacts"]
    assert art["kernels"] == 1
    assert main(["inspect", "--no-detect", "--names", "--json", "--no-cache", str(lib)]) == 0
    (art,) = json.loads(capsys.readouterr().out)["artifacts"]
    assert art["kernels"] == 3
    # Headers-only runs never hash or cache: reading headers is faster than hashing.
    assert main(["inspect", "--no-detect", str(lib)]) == 0
    assert len(_entries(folder)) == 1


def test_a_read_without_digests_is_kept_apart_from_one_with(lib: Path, tmp_path: Path) -> None:
    folder = tmp_path / "cache"
    full = read_artifact(lib)
    bare, digest, _ = inspect_file(lib, folder=folder, digests=False)
    # The same report but for each entry's SHA-256, which is left out.
    assert all(e.sha256 for e in full.listing.entries)
    assert [replace(e, sha256="") for e in full.listing.entries] == list(bare.listing.entries)
    (entry,) = _entries(folder)
    assert entry.name == f"{digest}.names-nodigest.json"
    # A reader that needs the digests does not take it: it reads, and keeps its own.
    again, _, _ = inspect_file(lib, folder=folder)
    assert again == full
    assert [p.name.split(".", 1)[1] for p in _entries(folder)] == [
        "names-nodigest.json", "names.json",
    ]  # fmt: skip


def test_a_read_without_digests_takes_an_entry_kept_with_them(lib: Path, tmp_path: Path) -> None:
    folder = tmp_path / "cache"
    full, _, _ = inspect_file(lib, folder=folder)
    bare, _, _ = inspect_file(lib, folder=folder, digests=False)
    assert bare == full  # from the cache: digests and all
    assert [p.name.split(".", 1)[1] for p in _entries(folder)] == ["names.json"]


def test_inspect_leaves_the_digests_out(
    lib: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # cuda-gate inspect shows no entry digest: it never spends the time to compute one.
    folder = tmp_path / "cli-cache"
    monkeypatch.setenv("CUDA_GATE_CACHE_DIR", str(folder))
    assert main(["inspect", "--no-detect", "--names", str(lib)]) == 0
    (entry,) = _entries(folder)
    assert entry.name.endswith(".names-nodigest.json")
    assert all(row[13] == "" for row in json.loads(entry.read_text())["report"]["entries"])
