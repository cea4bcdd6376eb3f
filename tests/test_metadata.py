"""The package's metadata as pyproject.toml declares it: URLs, SPDX licence, classifiers.

Read with tomllib (building a wheel for its METADATA takes too long for a unit test;
tests/test_packaging.py compares the installed package's metadata with this).
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
import trove_classifiers
from packaging.licenses import canonicalize_license_expression

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parent.parent
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
# Where the documentation names the repository on GitHub: `uses: OWNER/cuda-gate@...`,
# `--repo OWNER/cuda-gate`, `github.com/OWNER/cuda-gate` (not a local `uses: ./cuda-gate`).
_HOME_MENTION = re.compile(
    r"(?:uses: |--repo |github\.com/)([A-Za-z0-9][A-Za-z0-9_.-]*)/cuda-gate\b"
)


def home() -> str:
    return str(PROJECT["urls"]["Homepage"])


def test_the_urls_are_the_repositorys_and_name_one_home() -> None:
    urls = PROJECT["urls"]
    changelog = sorted(ROOT.glob("CHANGELOG*")) + sorted(ROOT.glob("CHANGES*"))
    expected = {"Homepage", "Documentation", "Issues", "Source"} | (
        {"Changelog"} if changelog else set()
    )
    assert set(urls) == expected
    assert re.fullmatch(r"https://github\.com/[A-Za-z0-9_.-]+/cuda-gate", home())
    assert urls["Source"] == home()
    assert urls["Issues"] == f"{home()}/issues"
    assert urls["Documentation"] == f"{home()}#readme"


def test_the_home_is_the_one_the_readme_action_and_workflow_name() -> None:
    owner = home().split("/")[-2]
    files = [ROOT / "README.md", ROOT / "action.yml", *sorted(ROOT.glob(".github/workflows/*.yml"))]
    named = {
        (path.name, found)
        for path in files
        for found in _HOME_MENTION.findall(path.read_text(encoding="utf-8"))
    }
    assert {path for path, _ in named} >= {"README.md", "action.yml", "gate.yml"}
    assert {found for _, found in named} == {owner}, named


def test_the_licence_is_a_valid_spdx_expression_with_its_file_and_no_classifier() -> None:
    licence = PROJECT["license"]
    assert isinstance(licence, str)  # PEP 639: an expression, not a {file = ...} table
    assert canonicalize_license_expression(licence) == licence == "Apache-2.0"
    assert PROJECT["license-files"] == ["LICENSE"]
    assert (ROOT / "LICENSE").is_file()
    # PEP 639: a licence expression and a "License ::" classifier together are an error.
    assert not [c for c in PROJECT["classifiers"] if c.startswith("License ::")]


def test_every_classifier_is_a_current_pypi_classifier() -> None:
    classifiers = PROJECT["classifiers"]
    assert len(set(classifiers)) == len(classifiers)
    assert [c for c in classifiers if c not in trove_classifiers.classifiers] == []
    assert [c for c in classifiers if c in trove_classifiers.deprecated_classifiers] == []
    assert "Environment :: GPU :: NVIDIA CUDA" in classifiers
    assert "Programming Language :: Python :: 3 :: Only" in classifiers
