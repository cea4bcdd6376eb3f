"""A lock written by pip-compile (pip-tools) is read as pip reads it (issue 45 items 1, 2).

tests/test_lock_markers.py reads a lock made by ``uv pip compile --universal``; pip-compile
writes its own shape: a comment header, ``--find-links`` option lines, each pin's
``--hash`` options on continuation lines after a ``\\``, and ``# via`` comments. The lock is
made at test time by pip-compile from a local folder of real wheels (``--no-index``, no
network, pip's own configuration left out). pip-tools is in the test extra: the test
looks for ``pip-compile`` in ``$GATE_PIP_COMPILE``, beside the test interpreter, then on
PATH; without it the test is skipped saying so, and fails under CI.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from gate import proc
from gate.cli import main
from gate.errors import ExitCode
from tests.pypi_wheels import ROOT
from tests.test_lock_markers import AARCH64, SIX, SIX_SHA256, _wheel

pytestmark = pytest.mark.integration

REQUIREMENTS = 'six==1.17.0 ; python_version >= "3"\nsix==1.16.0 ; python_version < "3"\n'


def _pip_compile() -> str:
    named = os.environ.get("GATE_PIP_COMPILE")
    beside = Path(sys.executable).parent / "pip-compile"
    found = named or (str(beside) if beside.is_file() else shutil.which("pip-compile"))
    if not found:
        missing = "pip-compile not found (pip install pip-tools, or set GATE_PIP_COMPILE)"
        if os.environ.get("CI") == "true":
            pytest.fail(missing)  # the test extra installs it: CI must run this test
        pytest.skip(missing)
    return found


@pytest.fixture
def lock(tmp_path: Path) -> Path:
    """requirements.txt as pip-compile --generate-hashes writes it, six's wheel in wheels/."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    shutil.copy(_wheel(SIX), wheels)
    (tmp_path / "requirements.in").write_text(REQUIREMENTS)
    # pip's configuration (an index, --find-links of this machine) is not the test's.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull
    done = proc.run(
        [_pip_compile(), "--generate-hashes", "--no-index", "--find-links", "wheels",
         "--strip-extras", "--cache-dir", str(ROOT / ".work" / "pip-tools-cache"), "-q",
         "-o", "requirements.txt", "requirements.in"],
        timeout=300, cwd=tmp_path, base_env=env,
    )  # fmt: skip
    assert done.ok, done.output()  # local wheels only: nothing outside can fail it
    return tmp_path / "requirements.txt"


def test_a_pip_compile_lock_is_read_here_and_for_aarch64(
    lock: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = lock.read_text()
    # pip-compile's shape: option lines, a hash on a continuation line, a "via" comment.
    assert "--find-links wheels\n" in text
    assert f'six==1.17.0 ; python_version >= "3" \\\n    --hash=sha256:{SIX_SHA256}' in text
    assert "# via -r requirements.in" in text
    assert main(["inspect", "--no-detect", str(lock)]) == 0
    out = capsys.readouterr().out
    assert out.count("six 1.17.0") == 1
    assert f"{lock}: markers evaluated for linux" in out
    assert "(this machine)" in out
    assert main(["inspect", "--no-detect", *AARCH64, str(lock)]) == 0
    out = capsys.readouterr().out
    assert out.count("six 1.17.0") == 1
    assert f"{lock}: markers evaluated for linux aarch64, Python 3.12 (" in out
    assert main(["inspect", "--no-detect", "--json", *AARCH64, str(lock)]) == 0
    doc = json.loads(capsys.readouterr().out)
    (read,) = doc["locks"]
    assert (read["target"]["machine"], read["left_out"]) == ("aarch64", 0)


def test_a_wheel_the_pip_compile_hashes_do_not_allow_fails_naming_both(
    lock: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wheel = lock.parent / "wheels" / SIX.pattern
    wheel.write_bytes(wheel.read_bytes() + b"\0")  # the bytes changed since the lock
    changed = hashlib.sha256(wheel.read_bytes()).hexdigest()
    assert main(["inspect", "--no-detect", str(lock)]) == ExitCode.BAD_INPUT
    err = capsys.readouterr().err
    assert f"six==1.17.0: {wheel}: sha256 is {changed}, the lock allows {SIX_SHA256}" in err
