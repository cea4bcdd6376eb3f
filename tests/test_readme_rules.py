"""The target-forms table of docs/configuration.md is the rules' own table."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gate.rules.require import Requirement
from gate.rules.targets import Capability, Target

pytestmark = pytest.mark.unit

README = Path(__file__).resolve().parent.parent / "docs" / "configuration.md"


def _table() -> dict[str, tuple[list[str], list[str]]]:
    text = README.read_text(encoding="utf-8")
    section = text.split("## What each required target form accepts", 1)[1]
    rows: dict[str, tuple[list[str], list[str]]] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0] not in ("required", "---"):
            rows[cells[0].strip("`")] = (
                re.findall(r"`([^`]+)`", cells[1]),
                re.findall(r"`([^`]+)`", cells[2]),
            )
        elif rows and not line.startswith("|"):
            break
    return rows


@pytest.mark.parametrize("number", ["100", "120", "121"])  # SM numbers that have a family
def test_the_readme_table_is_what_the_rules_accept(number: str) -> None:
    rows = _table()
    assert set(rows) == {"sm_XY", "sm_XYf", "sm_XYa", "device X.Y"}
    for form, (sass, ptx) in rows.items():
        if form == "device X.Y":
            requirement = Requirement.of_device(Capability.parse(number))
        else:
            requirement = Requirement.of_target(Target.parse(form.replace("XY", number)))
        wanted_sass = [s.replace("XY", number) for s in sass]
        wanted_ptx = [p.replace("XY", number) for p in ptx]
        assert [str(t) for t in requirement.accepted(ptx=False)] == wanted_sass, form
        assert [str(t) for t in requirement.accepted(ptx=True)] == wanted_ptx, form
