"""A build that edits the gate's installed files cannot read a secret (issue 37, item 3).

The gate is installed as pip lays a distribution out (its package beside a
``cuda_gate-*.dist-info`` whose RECORD holds each file's SHA-256), in a folder its user
may write, as a virtual environment of one's own is. A build step, an unprivileged
process of that user (tests/test_secrets_proc.py says how), appends code to every module
of that install and to its rules: code that writes out the environment of whatever
process runs it. The gate must not run it: the run ends with one line naming a changed
file (exit 3), nothing signed, and no secret anywhere the build step's code could write.
The next run over the changed install is refused before anything runs.
"""

from __future__ import annotations

import base64
import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gate import __version__
from gate.errors import ExitCode
from gate.evidence import ENVELOPE_FILE, MANIFEST_FILE
from tests.test_secrets_proc import secrets, unprivileged

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parent.parent

# Appended by the build to every module of the installed gate: if the gate ever imports
# one of them again, the secrets it holds land in LEAK.
PAYLOAD = """
import os as _leak_os
with open({leak!r}, "a") as _leak_file:
    _leak_file.write(repr(sorted(_leak_os.environ.items())) + "\\n")
"""

TAMPER = r"""
import pathlib, sys
site, leak = pathlib.Path(sys.argv[1]), sys.argv[2]
payload = {payload!r}.format(leak=leak)
for path in sorted((site / "gate").rglob("*.py")):
    with path.open("a") as f:
        f.write(payload)
compat = site / "gate" / "rules" / "compat.json"
compat.write_text(compat.read_text().replace("sm_90", "sm_90 "))
"""


def install(site: Path) -> Path:
    """The checkout's package laid out as pip installs it: files, METADATA and RECORD."""
    shutil.copytree(ROOT / "gate", site / "gate", ignore=shutil.ignore_patterns("__pycache__"))
    info = site / f"cuda_gate-{__version__}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: cuda-gate\nVersion: {__version__}\n", encoding="utf-8"
    )
    rows = []
    for path in sorted(p for p in site.rglob("*") if p.is_file()):
        data = path.read_bytes()
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        rows.append(f"{path.relative_to(site).as_posix()},sha256={digest},{len(data)}")
    rows.append(f"{info.name}/RECORD,,")
    (info / "RECORD").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return site


def run_gate(tmp_path: Path, site: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "gate", "run", "--target", "sm_90"]  # build, then inspect
    argv += ["--store", f"file://{tmp_path / 'store'}", "--evidence", str(tmp_path / "ev")]
    argv += ["--build-dir", str(tmp_path / "b")]
    return subprocess.run(
        [*unprivileged(), *argv],
        cwd=tmp_path / "project",
        env={**env, "PYTHONPATH": str(site)},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_a_build_that_edits_the_installed_gate_reads_no_secret(tmp_path: Path) -> None:
    site = install(tmp_path / "site")
    leak = tmp_path / "leak.txt"
    project = tmp_path / "project"
    project.mkdir()
    (project / "tamper.py").write_text(TAMPER.format(payload=PAYLOAD), encoding="utf-8")
    script = f"{sys.executable} tamper.py {site} {leak}"
    (project / "cuda-gate.toml").write_text(
        f'smoke = true\n[[build]]\nname = "tamper"\ncommand = ["sh", "-c", "{script}"]\n',
        encoding="utf-8",
    )
    for folder in (tmp_path, project, *(p for p in site.rglob("*") if p.is_dir()), site):
        folder.chmod(0o777)
    given = secrets()
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("CUDA_GATE")}
    env.update(given)
    done = run_gate(tmp_path, site, env)
    # The build did edit the install...
    assert PAYLOAD.format(leak=str(leak)) in (site / "gate" / "cli.py").read_text(encoding="utf-8")
    # ...and the gate ran none of it: no secret (no line at all) where that code writes.
    assert not leak.exists(), "the gate ran code a build appended to it"
    assert done.returncode == int(ExitCode.TOOL), done.stdout + done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("cuda-gate: error:")]
    assert len(errors) == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert errors[0].startswith(f"cuda-gate: error: {site / 'gate'}/"), errors[0]
    assert "while the run's project commands ran; refusing to sign or store" in errors[0]
    assert not (tmp_path / "ev" / MANIFEST_FILE).exists()
    assert not (tmp_path / "ev" / ENVELOPE_FILE).exists()
    assert not (tmp_path / "store").exists()
    for value in given.values():
        for path in (tmp_path / "ev").rglob("*"):
            if path.is_file():
                assert value.encode() not in path.read_bytes(), path
    # The next run over the changed install is refused before it starts anything. (What a
    # build appended to a module Python imports at start-up already ran by then: see
    # docs/secrets.md; so no secret is given to this run.)
    again = run_gate(tmp_path, site, {k: v for k, v in env.items() if k not in given})
    assert again.returncode == int(ExitCode.TOOL), again.stdout + again.stderr
    assert "not the file cuda-gate installed (RECORD's sha256 differs)" in again.stderr
    assert "[1/8]" not in again.stdout + again.stderr  # no stage began
