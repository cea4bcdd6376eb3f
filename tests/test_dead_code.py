"""No dead code in gate/: vulture finds nothing at 80% confidence or more (issue 38).

What the gate uses where vulture cannot see it (a protocol's arguments, a name used only
in a string) is named in tests/vulture_whitelist.py, each with its reason.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parent.parent
WHITELIST = ROOT / "tests" / "vulture_whitelist.py"
MIN_CONFIDENCE = 80
# vulture's exit status when it found dead code (0: none; 1 and 2: it could not look).
DEAD_CODE_FOUND = 3
# Dead on purpose, beside gate/: proof that vulture looked, at this confidence.
CANARY = 'def canary() -> str:\n    return "alive"\n    print("never")\n'


def test_vulture_finds_no_dead_code_in_the_gate(tmp_path: Path) -> None:
    if importlib.util.find_spec("vulture") is None:
        pytest.fail(
            "vulture is not installed: it is in the test extra (pip install -e '.[test]')",
            pytrace=False,
        )
    canary = tmp_path / "canary.py"
    canary.write_text(CANARY, encoding="utf-8")
    argv = [sys.executable, "-m", "vulture", "gate", str(WHITELIST), str(canary)]
    found = subprocess.run(
        [*argv, f"--min-confidence={MIN_CONFIDENCE}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    output = (found.stdout + found.stderr).strip()
    assert found.returncode == DEAD_CODE_FOUND, output
    assert f"{canary}:3: unreachable code after 'return'" in found.stdout, output
    dead = [line for line in found.stdout.splitlines() if not line.startswith(str(canary))]
    assert dead == [], (
        "dead code in gate/: remove it; where the gate does use it, name it in "
        "tests/vulture_whitelist.py with the reason vulture cannot see the use:\n" + "\n".join(dead)
    )
