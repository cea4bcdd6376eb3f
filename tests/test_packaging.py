"""Packaging conventions: an SPDX licence with its file, and [tool.cuda-gate] known to
validate-pyproject through the schema the package registers (as cibuildwheel does)."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parent.parent


def validate(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "validate_pyproject", str(path)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_the_installed_package_declares_its_licence_as_an_spdx_expression() -> None:
    meta = metadata.metadata("cuda-gate")
    assert meta["License-Expression"] == "Apache-2.0"
    assert "LICENSE" in (meta.get_all("License-File") or [])
    assert not [c for c in meta.get_all("Classifier") or [] if c.startswith("License ::")]
    assert (ROOT / "LICENSE").read_text(encoding="utf-8").lstrip().startswith("Apache License")


def test_the_installed_package_carries_the_project_urls_pyproject_declares() -> None:
    import tomllib

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    urls = declared["project"]["urls"]
    meta = metadata.metadata("cuda-gate")
    assert sorted(meta.get_all("Project-URL") or []) == sorted(f"{k}, {v}" for k, v in urls.items())


def test_validate_pyproject_knows_the_tool_cuda_gate_table(tmp_path: Path) -> None:
    names = {e.name for e in metadata.entry_points(group="validate_pyproject.tool_schema")}
    assert "cuda-gate" in names
    ours = validate(ROOT / "pyproject.toml")
    assert ours.returncode == 0, ours.stdout + ours.stderr
    project = tmp_path / "pyproject.toml"
    head = '[project]\nname = "x"\nversion = "1"\n[tool.cuda-gate]\n'
    project.write_text(head + 'smoke = true\ntargets = ["sm_121"]\n', encoding="utf-8")
    good = validate(project)
    assert good.returncode == 0, good.stdout + good.stderr
    project.write_text(head + "smok = true\n", encoding="utf-8")
    bad = validate(project)
    assert bad.returncode != 0
    assert "`tool.cuda-gate` must not contain {'smok'} properties" in bad.stdout + bad.stderr


def test_every_schema_id_is_on_one_domain() -> None:
    import json

    ids = [
        json.loads(p.read_text(encoding="utf-8"))["$id"]
        for p in sorted((ROOT / "gate" / "schemas").glob("*.json"))
    ]
    assert ids
    assert all(i.startswith("https://cuda-gate.dev/") for i in ids), ids


def test_every_data_file_of_the_source_tree_is_installed() -> None:
    """A file the package reads at run time (a CUDA source it compiles, a schema, a rules
    table) must be in the installed package, not only in the checkout: the gate runs from an
    installed wheel."""
    source = {
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "gate").rglob("*")
        if p.is_file() and p.suffix not in (".py", ".pyc") and "__pycache__" not in p.parts
    }
    installed = {str(f) for f in metadata.files("cuda-gate") or []}
    assert source, "no data files found under gate/"
    assert sorted(source - installed) == []
