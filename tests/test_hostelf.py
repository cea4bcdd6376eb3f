"""Host ELF facts as `file` and ld.so see them, on real gcc-built programs and libraries."""

from __future__ import annotations

import platform
import shutil
import subprocess
from pathlib import Path

import pytest

from gate.errors import BadInputError
from gate.reader.hostelf import HOST_MACHINES, dependencies, read_format
from gate.system.machine import ld_cache

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not found"),
]
# gcc builds for this machine: x86-64 here, ARM aarch64 in the aarch64 tier (nox -s aarch64).
HERE = platform.machine()
MACHINE = HOST_MACHINES[HERE][1]
OTHER = "aarch64" if HERE == "x86_64" else "x86_64"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("elf")
    (root / "lib").mkdir()
    (root / "helper.c").write_text("int helper(void) { return 7; }\n", encoding="utf-8")
    (root / "main.c").write_text(
        "int helper(void);\nint main(void) { return helper(); }\n", encoding="utf-8"
    )
    subprocess.run(
        [
            "gcc",
            "-shared",
            "-fPIC",
            str(root / "helper.c"),
            "-o",
            str(root / "lib" / "libhelper.so"),
        ],
        check=True,
    )
    subprocess.run(
        [
            "gcc",
            str(root / "main.c"),
            "-o",
            str(root / "app"),
            f"-L{root / 'lib'}",
            "-lhelper",
            "-Wl,--enable-new-dtags,-rpath,$ORIGIN/lib",
        ],
        check=True,
    )
    subprocess.run(
        [
            "gcc",
            "-static",
            str(root / "helper.c"),
            str(root / "main.c"),
            "-o",
            str(root / "static-app"),
        ],
        check=False,
    )
    return root


def test_executable_and_library_read_like_file_prints_them(built: Path) -> None:
    app = read_format(built / "app")
    assert app.description.startswith(
        f"app: ELF 64-bit LSB pie executable, {MACHINE}, dynamically linked, interpreter "
    )
    assert app.description.endswith("not stripped")
    assert app.matches_host(HERE)
    assert not app.matches_host(OTHER)
    lib = read_format(built / "lib" / "libhelper.so")
    assert lib.description.startswith(f"libhelper.so: ELF 64-bit LSB shared object, {MACHINE}")
    assert lib.interpreter is None


def test_needed_libraries_resolve_through_runpath_origin(built: Path) -> None:
    app = read_format(built / "app")
    assert "libhelper.so" in app.needed
    assert app.runpath == ("$ORIGIN/lib",)
    deps = {d.name: d for d in dependencies(built / "app", app, ld_cache())}
    assert deps["libhelper.so"].resolved == str((built / "lib" / "libhelper.so").resolve())
    assert deps["libc.so.6"].resolved is not None
    assert deps["libc.so.6"].needed_by == "app"


def test_a_missing_library_is_reported_not_found(built: Path, tmp_path: Path) -> None:
    lonely = tmp_path / "app"
    shutil.copy2(built / "app", lonely)  # its $ORIGIN/lib is not beside the copy
    deps = {d.name: d for d in dependencies(lonely, read_format(lonely), ld_cache())}
    assert deps["libhelper.so"].resolved is None


def test_statically_linked_program_has_no_dependencies(built: Path) -> None:
    if not (built / "static-app").exists():
        pytest.skip("no static libc here")
    fmt = read_format(built / "static-app")
    assert "statically linked" in fmt.description
    assert dependencies(built / "static-app", fmt, ld_cache()) == ()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "empty file"),
        (b"#!/bin/sh\n", "not an ELF file"),
        (
            b"\x7fELF\x02\x01\x01" + b"\0" * 9 + b"\x03\x00>\x00" + b"\0" * 40,
            "truncated ELF header",
        ),
    ],
)
def test_bad_files_are_one_line_errors(tmp_path: Path, content: bytes, message: str) -> None:
    bad = tmp_path / "bad"
    bad.write_bytes(content)
    with pytest.raises(BadInputError, match=message):
        read_format(bad)
