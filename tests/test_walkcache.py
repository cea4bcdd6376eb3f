"""A warm re-audit: what each file of a tree is, remembered between audits by its identity.

An environment audited with the inspection cache is walked again without opening any
file that is unchanged since (one stat each), and its reports come from the cache by the
SHA-256 the walk remembered; anything changed, added, removed or changed just before a
walk must give the answer a cold audit gives. Real nvcc-built golden binaries
(tests/golden) laid out as an installed environment.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gate.reader import artifacts, distributions
from gate.reader.artifacts import shown
from gate.reader.distributions import Audit
from gate.reader.listing import Kind
from gate.reader.read import ArtifactReport
from gate.scan import cache as inspection_cache
from gate.scan.audit import audit_paths
from gate.scan.cache import RACY_NS

GOLDEN = Path(__file__).parent / "golden"
SM120 = GOLDEN / "libkernels.so"  # sm_80, sm_120 SASS, compute_80 PTX
SM90_PTX = GOLDEN / "debug.fatbin"  # sm_90 SASS, compute_90 PTX
SM90A = GOLDEN / "sm_90a.cubin"  # sm_90a only


def _settle() -> None:
    """Wait until what was just written may be remembered (see RACY_NS)."""
    time.sleep(RACY_NS / 1e9 + 0.05)


def _install(site: Path, name: str, files: dict[str, Path | bytes]) -> None:
    info = site / f"{name}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    rows = [f"{info.name}/METADATA,,"]
    for rel, source in files.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        if isinstance(source, bytes):
            (site / rel).write_bytes(source)
        else:
            shutil.copyfile(source, site / rel)
        rows.append(f"{rel},sha256=x,1")
    (info / "RECORD").write_text("\n".join(rows) + "\n")


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CUDA_GATE_CACHE_DIR", str(tmp_path / "cache"))
    root = tmp_path / "venv"
    site = root / "lib" / "python3.12" / "site-packages"
    site.mkdir(parents=True)
    (root / "pyvenv.cfg").write_text("home = /usr/bin\n")
    _install(
        site,
        "fastlib",
        {
            "fastlib/libk.so": SM120,
            "fastlib/kern.cubin": SM90A,
            "fastlib/__init__.py": b"# not an artifact\n",
            "fastlib/data.bin": b"\0" * 64,
        },
    )
    _install(site, "other", {"other/k.fatbin": SM90_PTX, "other/README": b"text\n"})
    (site / "stray").mkdir()
    shutil.copyfile(SM90A, site / "stray" / "loose.cubin")
    _settle()
    return root


def _audit(root: Path, *, cache: bool = True) -> Audit:
    return audit_paths([root], names=True, cache=cache, digests=False)


def _shape(audit: Audit) -> list[tuple[str, list[str], list[list[str]]]]:
    """Each group's name, members and each member's targets (what a verdict reads)."""
    return [
        (
            g.distribution.name,
            list(g.members),
            [sorted(f"{e.kind.value} {e.target}" for e in r.listing.entries) for r in g.reports],
        )
        for g in audit.groups
    ]


def _count_probes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every file the walk opens for its first bytes, from now on."""
    opened: list[str] = []
    probe = artifacts._kind

    def counted(path: str | Path) -> object:
        opened.append(os.fspath(path))
        return probe(path)

    monkeypatch.setattr(artifacts, "_kind", counted)
    return opened


def _remembered() -> dict[str, list[object]]:
    """The files the one tree document of the cache remembers, by path in the tree."""
    (entry,) = (inspection_cache.cache_dir() / "trees").glob("*.json")
    files = json.loads(entry.read_text())["files"]
    assert isinstance(files, dict)
    return files


@pytest.mark.integration
def test_a_warm_audit_opens_no_unchanged_file_and_answers_as_a_cold_one(
    env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cold = _audit(env)
    assert _audit(env, cache=False) == cold
    files = _remembered()
    # Every file remembered, artifacts with the SHA-256 of their bytes.
    kinds = {k: (row[5], row[6]) for k, row in files.items()}
    assert kinds["lib/python3.12/site-packages/fastlib/__init__.py"] == (None, None)
    kind, digest = kinds["lib/python3.12/site-packages/fastlib/libk.so"]
    assert kind == "elf"
    assert digest == inspection_cache.inspect_file(SM120, use_cache=False)[1]
    opened = _count_probes(monkeypatch)
    identities: list[str] = []
    looked_up = inspection_cache.cached_file

    def by_identity(*args: object, **kwargs: object) -> object:
        identities.append(str(args[0]))
        return looked_up(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(inspection_cache, "cached_file", by_identity)
    documents: list[str] = []
    load = inspection_cache._load

    def report_document(entry: str, *args: object, **kwargs: object) -> object:
        documents.append(entry)
        return load(entry, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(inspection_cache, "_load", report_document)
    warm = _audit(env)
    assert opened == []
    assert identities == []  # the walk's SHA-256 named each report
    assert documents == []  # small reports are in the tree's own document
    assert warm == cold
    assert [g.distribution.name for g in warm.groups] == [
        "fastlib",
        "other",
        "lib/python3.12/site-packages/stray/",
    ]


@pytest.fixture
def site(env: Path) -> Path:
    """The environment's site-packages, once it has been audited with the cache."""
    _audit(env)
    return env / "lib" / "python3.12" / "site-packages"


@pytest.mark.integration
def test_a_file_changed_added_or_removed_gives_the_cold_answer(
    env: Path, site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Written in place: a file of no kind becomes a cubin, a library another one.
    (site / "fastlib" / "data.bin").write_bytes(SM90A.read_bytes())
    (site / "fastlib" / "libk.so").write_bytes(SM90_PTX.read_bytes())
    (site / "other" / "k.fatbin").unlink()
    shutil.copyfile(SM120, site / "stray" / "new.so")
    _settle()
    opened = _count_probes(monkeypatch)
    warm = _audit(env)
    assert sorted(Path(p).name for p in opened) == ["data.bin", "libk.so", "new.so"]
    assert _shape(warm) == _shape(_audit(env, cache=False))
    fastlib = dict(zip(warm.groups[0].members, warm.groups[0].reports, strict=True))
    assert [str(t) for t in fastlib["fastlib/data.bin"].listing.targets(Kind.SASS)] == ["sm_90a"]
    assert fastlib["fastlib/libk.so"].listing.has_ptx  # debug.fatbin's bytes now
    files = _remembered()
    assert "lib/python3.12/site-packages/other/k.fatbin" not in files
    assert "lib/python3.12/site-packages/stray/new.so" in files


@pytest.mark.integration
def test_a_file_changed_just_before_the_walk_is_not_remembered(
    env: Path, site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (site / "fastlib" / "data.bin").write_bytes(b"\1" * 64)  # no settling
    _audit(env)
    files = _remembered()
    assert "lib/python3.12/site-packages/fastlib/data.bin" not in files
    assert "lib/python3.12/site-packages/fastlib/libk.so" in files
    # Rewritten within the same tick of the clock, its times may not move: it is opened
    # again however soon it changes next.
    (site / "fastlib" / "data.bin").write_bytes(SM90A.read_bytes()[:64])
    opened = _count_probes(monkeypatch)
    _audit(env)
    assert [Path(p).name for p in opened] == ["data.bin"]


@pytest.mark.integration
@pytest.mark.parametrize(
    "damage",
    [
        b"not json",
        b'{"format": "cuda-gate-walk-cache"}',
        b'{"format": "cuda-gate-walk-cache", "reader": "0+0", "root": "/", "files": {}}',
    ],
)
def test_a_damaged_or_foreign_tree_document_is_ignored_and_written_again(
    env: Path, damage: bytes
) -> None:
    cold = _audit(env)
    (entry,) = (inspection_cache.cache_dir() / "trees").glob("*.json")
    entry.write_bytes(damage)
    assert _audit(env) == cold
    assert json.loads(entry.read_text())["files"]


@pytest.mark.integration
def test_rows_of_the_wrong_shape_are_not_believed(env: Path) -> None:
    """A row whose kind is no text, or whose digest names a report the cache lacks, is
    probed and read again."""
    cold = _audit(env)
    (entry,) = (inspection_cache.cache_dir() / "trees").glob("*.json")
    doc = json.loads(entry.read_text())
    for row in doc["files"].values():
        if row[5] == "elf":
            row[5] = 7
        elif row[6] is not None:
            row[6] = "0" * 64
    entry.write_text(json.dumps(doc))
    assert _audit(env) == cold


@pytest.mark.integration
def test_a_kept_report_is_taken_only_for_its_mode_and_only_when_it_parses(env: Path) -> None:
    names = _audit(env)
    headers = audit_paths([env], names=False, cache=True)
    assert headers == audit_paths([env], names=False, cache=False)
    assert all(not r.names for g in headers.groups for r in g.reports)
    # The document now holds the headers-only reports: a names audit reads its own again.
    assert _audit(env) == names
    (entry,) = (inspection_cache.cache_dir() / "trees").glob("*.json")
    doc = json.loads(entry.read_text())
    assert doc["mode"] == "names-nodigest"
    assert doc["reports"]
    for report in doc["reports"].values():
        report["entries"] = "damaged"
    entry.write_text(json.dumps(doc))
    assert _audit(env) == names  # each from its cache document, by SHA-256


@pytest.mark.integration
def test_a_path_that_is_not_utf8_is_remembered_and_read_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDA_GATE_CACHE_DIR", str(tmp_path / "cache"))
    root = tmp_path / "tree"
    odd = Path(os.fsdecode(os.fsencode(str(root)) + b"/lib\xff"))
    odd.mkdir(parents=True)
    shutil.copyfile(SM90A, odd / "k.cubin")
    _settle()
    cold = _audit(root)
    warm = _audit(root)
    assert warm == cold
    (member,) = cold.groups[0].members
    assert member == "lib\\xff/k.cubin"
    # The file's identity is kept too: the inspection of one file takes it back.
    report, _, _ = inspection_cache.inspect_file(odd / "k.cubin", by_identity=True)
    assert report.listing.entries


_PARTS = st.sampled_from(["a", "b.so", ".", "..", "", ".x", "...", "x y", "lib\udcff"])


@pytest.mark.unit
@given(st.lists(_PARTS, min_size=1, max_size=6), st.booleans())
def test_a_record_row_is_joined_as_normpath_joins_it(parts: list[str], absolute: bool) -> None:
    row = ("/" if absolute else "") + "/".join(parts)
    if not row:
        return
    base = "/env/site-packages/"
    text = f'"{row}",sha256=x,1\n' if "," in row or '"' in row else f"{row},sha256=x,1\n"
    assert distributions.record_files(base, text) == {os.path.normpath(os.path.join(base, row))}  # noqa: PTH118


@pytest.mark.unit
@given(st.lists(_PARTS.filter(bool), min_size=1, max_size=6))
def test_a_path_under_its_folder_is_shown_as_relpath_shows_it(parts: list[str]) -> None:
    base = Path("/env/work/.venv/site-packages")
    path = Path(str(base) + "/" + "/".join(parts))
    report = ArtifactReport(shown(path), "elf")
    expected = shown(os.path.relpath(path, base))
    assert distributions.relative_path(path, base, report) == expected


def _shown_before(path: str) -> str:
    """shown() as it was before its fast path for plain ASCII: the reference."""
    text = os.fsdecode(path)
    try:
        text = text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return re.sub(r"[\x00-\x1f\x7f]", lambda m: f"\\x{ord(m.group(0)):02x}", text)


@pytest.mark.unit
@given(st.text(max_size=20))
def test_shown_escapes_exactly_the_control_and_non_utf8_characters(text: str) -> None:
    assert shown(text) == _shown_before(text)
