"""A long test says which it is while it runs (tests/conftest.py), so a slow session in a CI
log shows where it is."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parent.parent


def test_a_long_test_is_named_while_it_runs(tmp_path: Path) -> None:
    (tmp_path / "test_long.py").write_text(
        "import time\nimport pytest\n\n@pytest.mark.unit\ndef test_long():\n    time.sleep(2.5)\n",
        encoding="utf-8",
    )
    env = {**os.environ, "GATE_TEST_STILL_RUNNING": "1", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.conftest",
         "-c", str(ROOT / "pyproject.toml"), "--rootdir", str(tmp_path), str(tmp_path)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [line for line in done.stdout.splitlines() if line.startswith("[still running")]
    assert lines[0] == "[still running after 1 s] test_long.py::test_long"
    assert 2 <= len(lines) <= 3
