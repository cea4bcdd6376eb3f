"""Finding artifacts in folders: which files, in which order, each once.

The walk resolves no path of a plain file (its real path is its real folder's and its
name) and stats no file before opening it; what it yields must be what the resolving
walk gave: a folder's files in sorted order, then its subfolders in sorted order;
symlinked folders not entered; a file reached twice (through a symlink, or a folder
named twice) once; dangling symlinks and FIFOs passed over, never opened.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from gate.reader import artifacts

pytestmark = pytest.mark.unit

GOLDEN = Path(__file__).parent / "golden"


def _listed(paths: list[Path]) -> list[tuple[str, str | None]]:
    out = []
    for found in artifacts.discover(paths):
        assert isinstance(found, artifacts.Found), found
        out.append((str(found.path), found.kind))
    return out


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    (root / "b" / "c").mkdir(parents=True)
    (root / "a").mkdir()
    shutil.copy(GOLDEN / "libkernels.so", root / "z.so")
    shutil.copy(GOLDEN / "libkernels.a", root / "a" / "k.a")
    shutil.copy(GOLDEN / "sm_90a.cubin", root / "b" / "c" / "k.cubin")
    shutil.copy(GOLDEN / "debug.fatbin", root / "b" / "d.fatbin")
    (root / "b" / "notes.txt").write_text("not an artifact\n")
    (root / "b" / "empty").write_bytes(b"")
    os.mkfifo(root / "b" / "pipe")  # opening it would block: it must be passed over
    (root / "b" / "again.so").symlink_to("../z.so")  # the same file: once, as z.so
    (root / "b" / "gone.so").symlink_to("nowhere.so")
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.copy(GOLDEN / "libkernels.so", outside / "lib.so")
    (root / "a" / "out.so").symlink_to(outside / "lib.so")  # yielded by its link's path
    (root / "linked").symlink_to(outside)  # a symlinked folder: not entered
    return root


def test_a_folder_is_walked_in_order_each_file_once(tree: Path) -> None:
    assert _listed([tree]) == [
        (f"{tree}/z.so", "elf"),
        (f"{tree}/a/k.a", "archive"),
        (f"{tree}/a/out.so", "elf"),
        (f"{tree}/b/d.fatbin", "fatbin"),
        (f"{tree}/b/c/k.cubin", "elf"),
    ]


def test_a_file_reached_again_is_not_yielded_again(tree: Path) -> None:
    # The tree named twice, and a subfolder of it, and the outside folder the symlink
    # points into: every file once, the first way it was reached.
    listed = _listed([tree, tree / "b", tree, tree.parent / "outside"])
    assert [p for p, _ in listed] == [
        f"{tree}/z.so",
        f"{tree}/a/k.a",
        f"{tree}/a/out.so",
        f"{tree}/b/d.fatbin",
        f"{tree}/b/c/k.cubin",
    ]


def test_a_folder_named_through_a_symlink_is_walked(tree: Path) -> None:
    assert _listed([tree / "linked"]) == [(f"{tree}/linked/lib.so", "elf")]
    # ... and its file is the one the tree's symlink already reached.
    assert [p for p, _ in _listed([tree, tree / "linked"])][-1] == f"{tree}/b/c/k.cubin"


def test_a_named_file_is_yielded_even_unrecognised_or_twice(tree: Path) -> None:
    notes, lib = tree / "b" / "notes.txt", tree / "z.so"
    assert _listed([notes, lib, tree / "b" / "again.so"]) == [
        (str(notes), None),
        (str(lib), "elf"),
        (f"{tree}/b/again.so", "duplicate"),
    ]
