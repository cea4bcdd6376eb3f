"""A lock audit's ``--json`` says what its console says (issue 45 item 1).

The console names the environment a lock's markers were evaluated for and warns about a
chosen wheel whose tags do not install there; environment.json (version 4) carries both:
``locks`` (each lock, its target, how many requirements the markers left out) and
``warnings``. Real wheels from PyPI, cached as tests/pypi_wheels.py does.
"""

from __future__ import annotations

import json
import shutil
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from packaging.version import Version

from gate.cli import main
from gate.reader.locks import Evaluated, target
from tests.test_lock_markers import AARCH64, MARKUPSAFE, SIX, UNIVERSAL, _wheel

MARKUPSAFE_WARNING = (
    "MarkupSafe==3.0.2: MarkupSafe-3.0.2-cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64"
    ".whl (manylinux2014_x86_64, manylinux_2_17_x86_64) does not install on linux aarch64, "
    "Python 3.12 (--python-platform aarch64-unknown-linux-gnu --python-version 3.12)"
)


def _validator() -> jsonschema.Draft202012Validator:
    text = resources.files("gate").joinpath("schemas/environment.schema.json").read_text("utf-8")
    schema = json.loads(text)
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def _inspect_json(args: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert main(["inspect", "--no-detect", "--json", *args]) == 0
    doc: dict[str, Any] = json.loads(capsys.readouterr().out)
    _validator().validate(doc)
    return doc


@pytest.mark.unit
def test_the_target_and_the_lock_are_records_with_their_json() -> None:
    aarch64 = target("aarch64-manylinux_2_28", "3.12")
    read = Evaluated("w/requirements.txt", aarch64, 2)
    assert read.to_json() == {
        "lock": "w/requirements.txt",
        "target": {
            "system": "linux",
            "machine": "aarch64",
            "python": "3.12",
            "glibc": "2.28",
            "given": "--python-platform aarch64-manylinux_2_28 --python-version 3.12",
            "described": "linux aarch64, Python 3.12 (--python-platform "
            "aarch64-manylinux_2_28 --python-version 3.12)",
        },
        "left_out": 2,
    }
    assert read.note() == (
        f"w/requirements.txt: markers evaluated for {aarch64.describe()}; "
        "2 requirement(s) for other environments left out"
    )
    here = target(None, None).to_json()
    assert here["given"] is None
    assert str(here["described"]).endswith("(this machine)")
    assert Version(str(here["python"])).major == 3


@pytest.mark.integration
def test_the_json_names_the_environment_evaluated_and_the_tag_warnings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copy(_wheel(MARKUPSAFE), tmp_path)
    shutil.copy(_wheel(SIX), tmp_path)
    lock = tmp_path / "requirements.txt"
    lock.write_text("MarkupSafe==3.0.2\n" + UNIVERSAL)
    doc = _inspect_json([*AARCH64, str(lock)], capsys)
    assert doc["version"] == 5
    assert doc["locks"] == [
        {
            "lock": str(lock),
            "target": {
                "system": "linux",
                "machine": "aarch64",
                "python": "3.12",
                "glibc": None,
                "given": "--python-platform aarch64-unknown-linux-gnu --python-version 3.12",
                "described": "linux aarch64, Python 3.12 (--python-platform "
                "aarch64-unknown-linux-gnu --python-version 3.12)",
            },
            "left_out": 2,
        }
    ]
    assert doc["warnings"] == [f"{lock}: {MARKUPSAFE_WARNING}"]
    assert sorted(d["name"] for d in doc["distributions"]) == ["MarkupSafe", "six"]


@pytest.mark.integration
def test_the_json_of_this_machine_and_of_no_lock(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copy(_wheel(SIX), tmp_path)
    lock = tmp_path / "requirements.txt"
    lock.write_text(UNIVERSAL)
    doc = _inspect_json([str(lock)], capsys)
    (read,) = doc["locks"]
    assert read["target"]["given"] is None
    assert read["target"]["described"].endswith("(this machine)")
    assert doc["warnings"] == []
    # A folder of wheels is no lock: nothing evaluated, nothing to warn about.
    doc = _inspect_json([str(tmp_path)], capsys)
    assert doc["locks"] == []
    assert doc["warnings"] == []
