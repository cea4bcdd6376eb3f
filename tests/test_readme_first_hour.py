"""The README's first code block, verbatim, on this machine's system Python with a clean HOME.

A release engineer's first hour starts there: a Debian or Ubuntu machine whose only Python is
the distribution's (pip refuses to install into it, PEP 668), nvcc, maybe no GPU. Both
commands run exactly as written, in a copy of the project, with PATH holding only the system
folders and HOME empty; the pip settings of the machine (its index) are kept, as a user's
machine has its own. The tests command runs one small test module (PYTEST_ADDOPTS), not the
whole suite inside itself.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parent.parent
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"


def first_block() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text.split("```sh\n", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.strip()]


def system_python() -> str:
    found = shutil.which("python3", path=SYSTEM_PATH)
    if found is None or not Path(found).resolve().is_relative_to("/usr"):
        pytest.fail(f"no system python3 on {SYSTEM_PATH} (found {found})")
    return found


def project_copy(tmp_path: Path) -> Path:
    """The project as a user's clone has it: every file git tracks or would add."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, check=True,
    ).stdout.split(b"\0")  # fmt: skip
    copy = tmp_path / "cuda-gate"
    for name in filter(None, listed):
        source = ROOT / name.decode()
        if source.is_file():
            target = copy / name.decode()
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    subprocess.run(["git", "init", "-q"], cwd=copy, check=True)
    return copy


def run(line: str, cwd: Path, home: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": SYSTEM_PATH, "HOME": str(home), "LANG": "C.UTF-8", **extra}
    env |= {k: v for k, v in os.environ.items() if k.startswith("PIP_") or k.endswith("_proxy")}
    if "CI" in os.environ:
        env["CI"] = os.environ["CI"]
    return subprocess.run(
        ["bash", "-c", line], cwd=cwd, env=env, capture_output=True, text=True, timeout=1200,
        check=False,
    )  # fmt: skip


def test_the_readmes_first_block_works_with_only_the_system_python(tmp_path: Path) -> None:
    python = system_python()
    gate, tests = first_block()
    assert "python3" in gate.split("#")[0]
    project, home = project_copy(tmp_path), tmp_path / "home"
    home.mkdir()
    ran = run(gate, project, home)
    # This machine has no GPU: the gate builds, inspects and stops at the probe with exit 4
    # (0 where a device is there); anything else is the first hour going wrong.
    assert ran.returncode in (0, 4), ran.stdout[-3000:] + ran.stderr[-3000:]
    assert "Evidence: gate-evidence/" in ran.stdout
    assert (project / "gate-evidence" / "result.json").is_file()
    assert Path(project / ".venv" / "bin" / "python").resolve() == Path(python).resolve()
    assert not (home / ".local").exists() or not any((home / ".local").rglob("nox*"))
    ran = run(tests, project, home, PYTEST_ADDOPTS="-k test_layering")
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    assert " passed" in ran.stdout
    assert "Session tests was successful" in ran.stderr


def test_the_run_says_which_configuration_it_uses_or_where_it_looked(tmp_path: Path) -> None:
    import sys

    project = tmp_path / "project"
    sub = project / "src"
    sub.mkdir(parents=True)
    (project / "cuda-gate.toml").write_text("smoke = true\n", encoding="utf-8")

    def gate(cwd: Path) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "gate", "run", "--stop-after", "environment", "--no-store",
             "--evidence", str(tmp_path / "ev"), "--build-dir", str(tmp_path / "b")],
            cwd=cwd, capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        return done.stderr.splitlines()[0]

    assert gate(project) == f"config: {project / 'cuda-gate.toml'}"
    assert gate(sub) == (
        f"config: none found in {sub} (no cuda-gate.toml, no [tool.cuda-gate] in "
        "pyproject.toml): only the built-in smoke program is gated; "
        f"{project / 'cuda-gate.toml'} is above: run from {project} or pass --config "
        f"{project / 'cuda-gate.toml'}"
    )
    assert gate(tmp_path).endswith("gated; `cuda-gate init` writes one")


def test_a_closed_output_pipe_loses_no_evidence_and_keeps_the_status(tmp_path: Path) -> None:
    """`cuda-gate run ... | head -1`: the run goes on, its evidence is whole, and the exit
    status is the verdict's (1 here), never 0 or a bare 141."""
    import sys

    reader = subprocess.Popen(["head", "-c", "1"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    assert reader.stdin is not None
    done = subprocess.run(
        [sys.executable, "-m", "gate", "run", "--target", "sm_90", "--stop-after", "build",
         "--no-store", "--evidence", str(tmp_path / "ev"), "--build-dir", str(tmp_path / "b")],
        cwd=tmp_path, stdout=reader.stdin, stderr=reader.stdin, timeout=600, check=False,
    )  # fmt: skip
    reader.stdin.close()
    reader.wait(timeout=60)
    assert done.returncode == 1  # --stop-after: not accepted
    for name in ("result.json", "junit.xml", "summary.md", "manifest.json"):
        assert (tmp_path / "ev" / name).is_file(), name
