"""The gate runs only the code it started with (gate.guard.selfcheck; issue 37, item 3).

Unit tests of each step on folders of the test's own: RECORD rows as pip writes them, a
package changed after its digests were noted, and the import hook over a module folder
on ``sys.path`` (a module changed after the hook was armed is refused, one that was not
is compiled from its checked source and never from a ``.pyc`` a build could write).
The whole of it, with a real build appending code to a real install, is in
tests/test_secrets_selfcheck.py.
"""

from __future__ import annotations

import base64
import hashlib
import importlib
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gate.errors import ExitCode
from gate.guard import selfcheck

pytestmark = pytest.mark.unit


def _row(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def test_record_rows_give_each_files_sha256_by_absolute_path(tmp_path: Path) -> None:
    record = "\n".join(
        [
            _row("gate/cli.py", b"print(1)\n"),
            _row('"gate/odd, name.py"', b"x"),
            "gate/__pycache__/cli.cpython-311.pyc,,",
            "cuda_gate-0.1.0.dist-info/RECORD,,",
            "../../../bin/cuda-gate,sha256=" + _row("x", b"#!").split("sha256=")[1],
        ]
    )
    found = selfcheck.record_digests(tmp_path, record)
    assert found == {
        str(tmp_path / "gate" / "cli.py"): hashlib.sha256(b"print(1)\n").hexdigest(),
        str(tmp_path / "gate" / "odd, name.py"): hashlib.sha256(b"x").hexdigest(),
        os.path.normpath(tmp_path / "../../../bin/cuda-gate"): hashlib.sha256(b"#!").hexdigest(),
    }


def _package(root: Path, files: dict[str, bytes]) -> Path:
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return root


def test_a_package_file_unlike_its_record_is_named(tmp_path: Path) -> None:
    site = tmp_path / "site"
    files = {"gate/cli.py": b"a\n", "gate/rules/compat.json": b"{}\n"}
    root = _package(site, files)
    record = "\n".join(_row(name, data) for name, data in files.items())
    records = selfcheck.installed_records([str(site)])
    assert records == {}  # no dist-info yet: a source checkout, nothing to compare
    (site / "cuda_gate-0.1.0.dist-info").mkdir()
    (site / "cuda_gate-0.1.0.dist-info" / "RECORD").write_text(record)
    records = selfcheck.installed_records([str(site)])
    assert records == selfcheck.installed_records([str(site)], "cuda_gate-")
    assert selfcheck.installed_records([str(site)], "numpy-") == {}
    package = root / "gate"
    digests = selfcheck.package_digests(package)
    assert set(digests) == {"cli.py", "rules/compat.json"}
    assert selfcheck.record_problem(package, digests, records) is None
    (package / "rules" / "compat.json").write_bytes(b'{"accepted": true}\n')
    problem = selfcheck.record_problem(package, selfcheck.package_digests(package), records)
    assert problem == (
        f"{package / 'rules' / 'compat.json'}: not the file cuda-gate installed "
        "(RECORD's sha256 differs)"
    )
    (package / "cli.py").unlink()
    problem = selfcheck.record_problem(package, selfcheck.package_digests(package), records)
    assert problem == f"{package / 'cli.py'}: recorded in cuda-gate's RECORD but missing"


def test_check_names_a_package_file_changed_or_added_after_the_start(tmp_path: Path) -> None:
    package = _package(tmp_path, {"gate/cli.py": b"a\n", "gate/__pycache__/cli.pyc": b"x"}) / "gate"
    guard = selfcheck.Guard(package, selfcheck.package_digests(package))
    guard.check()
    (package / "__pycache__" / "cli.pyc").write_bytes(b"a cache is never trusted, never checked")
    guard.check()
    (package / "cli.py").write_bytes(b"a\nimport os; print(os.environ)\n")
    with pytest.raises(selfcheck.GateChangedError) as raised:
        guard.check()
    assert raised.value.exit_code == ExitCode.TOOL
    assert raised.value.message.startswith(f"{package / 'cli.py'}: changed or removed while")
    (package / "cli.py").write_bytes(b"a\n")
    (package / "extra.py").write_bytes(b"")
    with pytest.raises(selfcheck.GateChangedError, match=r"extra\.py: added while"):
        guard.check()


@pytest.fixture
def modules(tmp_path: Path) -> Iterator[Path]:
    """A folder first on sys.path; what the test imports from it is forgotten after."""
    folder = tmp_path / "mods"
    folder.mkdir()
    sys.path.insert(0, str(folder))
    before = set(sys.modules)
    try:
        yield folder
    finally:
        sys.path.remove(str(folder))
        for name in set(sys.modules) - before:
            del sys.modules[name]
        importlib.invalidate_caches()


def _armed(modules: Path, records: dict[str, str] | None = None) -> selfcheck.Guard:
    package = modules.parent / "package"  # the guard's own package: empty here
    package.mkdir(exist_ok=True)
    guard = selfcheck.Guard(package, {})
    guard.arm()
    if records is not None:
        assert guard._hook is not None
        guard._hook.records = records
    return guard


def _settle() -> None:
    """Let the kernel's clock (a coarse one stamps inodes) move past what was just written."""
    start = selfcheck._now_ns()
    while selfcheck._now_ns() == start:
        time.sleep(0.001)


def test_a_module_unchanged_since_arming_is_compiled_from_its_source(modules: Path) -> None:
    (modules / "kept_a.py").write_text("VALUE = 'from source'\n")
    # A .pyc a build could have left: never used by a checked import.
    cached = importlib.util.cache_from_source(str(modules / "kept_a.py"))
    Path(cached).parent.mkdir(exist_ok=True)
    Path(cached).write_bytes(b"not bytecode at all")
    _settle()
    guard = _armed(modules)
    try:
        module = importlib.import_module("kept_a")
        assert module.VALUE == "from source"
        guard.check()
    finally:
        guard.close()


def test_a_module_changed_after_arming_is_refused_and_remembered(modules: Path) -> None:
    guard = _armed(modules)
    try:
        (modules / "late_b.py").write_text("import os\nLEAK = dict(os.environ)\n")
        with pytest.raises(selfcheck.GateChangedError) as raised:
            importlib.import_module("late_b")
        assert "late_b" not in sys.modules
        message = raised.value.message
        assert message == (
            f"{modules / 'late_b.py'}: changed after project code started; "
            "refusing to import late_b"
        )
        with pytest.raises(selfcheck.GateChangedError, match="late_b"):
            guard.check()  # refused even where the importer swallowed the error
    finally:
        guard.close()
    assert importlib.import_module("late_b").LEAK  # the hook is gone once closed


def test_a_module_unlike_its_record_is_refused_whenever_it_changed(modules: Path) -> None:
    path = modules / "recorded_c.py"
    path.write_text("VALUE = 1\n")
    _settle()
    guard = _armed(modules, {str(path): hashlib.sha256(b"VALUE = 2\n").hexdigest()})
    try:
        with pytest.raises(selfcheck.GateChangedError, match="RECORD's sha256 differs"):
            importlib.import_module("recorded_c")
    finally:
        guard.close()


def test_a_module_as_its_record_says_loads_even_if_installed_just_before(modules: Path) -> None:
    guard = _armed(modules)
    path = modules / "fresh_d.py"
    path.write_text("VALUE = 4\n")  # after arming: as pip's install right before a run
    assert guard._hook is not None
    guard._hook.records = {str(path): hashlib.sha256(b"VALUE = 4\n").hexdigest()}
    try:
        assert importlib.import_module("fresh_d").VALUE == 4
    finally:
        guard.close()


def test_preload_imports_every_module_of_the_gate() -> None:
    import pkgutil

    import gate

    selfcheck.preload()
    names = {i.name for i in pkgutil.walk_packages(gate.__path__, "gate.")} - {"gate.__main__"}
    assert names <= set(sys.modules)


def test_a_zip_on_sys_path_made_after_arming_is_refused(modules: Path) -> None:
    import zipfile

    guard = _armed(modules)
    archive = modules.parent / "late.zip"
    with zipfile.ZipFile(archive, "w") as made:
        made.writestr("zipped_e.py", "import os\nLEAK = dict(os.environ)\n")
    sys.path.insert(0, str(archive))
    try:
        with pytest.raises(selfcheck.GateChangedError, match=r"late\.zip: changed after project"):
            importlib.import_module("zipped_e")
    finally:
        sys.path.remove(str(archive))
        sys.path_importer_cache.pop(str(archive), None)
        guard.close()
