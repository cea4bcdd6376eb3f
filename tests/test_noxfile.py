"""The noxfile: the nox it needs, the running interpreter, and exit statuses that survive nox."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOXFILE = ROOT / "noxfile.py"
GOLDEN = ROOT / "tests" / "golden"


def _module() -> ast.Module:
    return ast.parse(NOXFILE.read_text(encoding="utf-8"))


def _assigned(name: str) -> object:
    """The literal value the noxfile assigns to ``nox.<name>`` (dotted), or None."""
    for node in ast.walk(_module()):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if ast.unparse(target) == f"nox.{name}":
                    return ast.literal_eval(node.value)
    return None


@pytest.mark.unit
def test_it_says_which_nox_it_needs_and_uses_the_current_reuse_option() -> None:
    assert _assigned("needs_version") == ">=2024.4.15"
    assert _assigned("options.reuse_venv") == "yes"
    assert "reuse_existing_virtualenvs" not in NOXFILE.read_text(encoding="utf-8")


@pytest.mark.unit
def test_no_session_pins_a_python_version() -> None:
    for node in ast.walk(_module()):
        if isinstance(node, ast.FunctionDef):
            for decorator in node.decorator_list:
                if isinstance(decorator, ast.Call):
                    assert not [k for k in decorator.keywords if k.arg in ("python", "py")], (
                        node.name
                    )


@pytest.mark.unit
def test_the_readme_starts_with_the_two_commands() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert lines[2:6:3] == ["```sh", "```"]  # one block of exactly two commands
    venv = "python3 -m venv .venv && .venv/bin/pip install -q nox && .venv/bin/nox -s "
    assert lines[3].startswith(f"{venv}gate ")
    assert lines[4].startswith(f"{venv}tests ")


@pytest.mark.integration  # mutmut's copy of the tree has no .ci/
def test_ci_runs_the_readmes_test_command() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    command = lines[4].split("#")[0].strip()
    assert command.replace("pip install -q", "pip install -q --disable-pip-version-check") in ci


def _nox(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """Real nox on the real noxfile, in this interpreter's environment (no new virtualenv)."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run(
        [sys.executable, "-m", "nox", "-f", str(NOXFILE), "--no-venv", "--no-install", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.integration
def test_nox_ends_with_the_gates_own_exit_status(tmp_path: Path) -> None:
    # A usage error is cuda-gate's status 2; nox on its own would say 1.
    usage = _nox("-s", "gate", "--", "--no-such-option")
    assert usage.returncode == 2, usage.stderr
    assert "cuda-gate run exited 2: nox exits 2 as well" in usage.stderr
    # A missing public key is a configuration error: 7.
    missing = _nox(
        "-s", "verify", "--", str(tmp_path / "m.dsse.json"), "--key", str(tmp_path / "none.pub")
    )
    assert missing.returncode == 7, missing.stderr
    assert "cannot read the public key" in missing.stdout + missing.stderr


@pytest.mark.integration
def test_a_passing_command_still_ends_nox_with_0() -> None:
    done = _nox("-s", "inspect", "--", str(GOLDEN / "libkernels.so"))
    assert done.returncode == 0, done.stderr
    assert "Session inspect was successful" in done.stderr


@pytest.mark.unit
def test_a_session_reinstalls_only_when_the_sources_or_extras_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util

    import nox.registry

    # Loading the noxfile registers its sessions: into a registry of this test's own, so a
    # second load in one process (mutmut runs the unit tier twice) warns of no duplicate.
    monkeypatch.setattr(nox.registry, "_REGISTRY", {})
    spec = importlib.util.spec_from_file_location("cuda_gate_noxfile", NOXFILE)
    assert spec is not None
    assert spec.loader is not None
    noxfile = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(noxfile)
    (tmp_path / "gate" / "__pycache__").mkdir(parents=True)
    (tmp_path / "pyproject.toml").write_text("[project]\n", encoding="utf-8")
    (tmp_path / "gate" / "cli.py").write_text("x = 1\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    first = noxfile._fingerprint("[test]")
    (tmp_path / "gate" / "__pycache__" / "cli.pyc").write_bytes(b"compiled")
    assert noxfile._fingerprint("[test]") == first  # bytecode is not a source
    assert noxfile._fingerprint("[lint,test]") != first
    (tmp_path / "gate" / "cli.py").write_text("x = 2\n", encoding="utf-8")
    assert noxfile._fingerprint("[test]") != first
    (tmp_path / "gate" / "cli.py").write_text("x = 1\n", encoding="utf-8")
    (tmp_path / "gate" / "new.py").write_text("", encoding="utf-8")
    assert noxfile._fingerprint("[test]") != first


@pytest.mark.unit
def test_a_changed_install_is_found_so_the_next_session_reinstalls_it(tmp_path: Path) -> None:
    import base64
    import hashlib
    from types import SimpleNamespace

    # The function alone, as the noxfile defines it: loading the whole noxfile would
    # register its sessions with nox a second time in this process.
    (found,) = [
        node
        for node in _module().body
        if isinstance(node, ast.FunctionDef) and node.name == "_changed_since_install"
    ]
    namespace: dict[str, object] = {"base64": base64, "hashlib": hashlib, "Path": Path}
    exec(compile(ast.Module([found], []), str(NOXFILE), "exec"), namespace)  # noqa: S102
    noxfile = SimpleNamespace(**namespace)
    site = tmp_path / "lib" / "python3.11" / "site-packages"
    (site / "gate").mkdir(parents=True)
    (site / "gate" / "cli.py").write_bytes(b"main()\n")
    digest = base64.urlsafe_b64encode(hashlib.sha256(b"main()\n").digest()).rstrip(b"=")
    info = site / "cuda_gate-0.1.0.dist-info"
    info.mkdir()
    (info / "RECORD").write_text(
        f"gate/cli.py,sha256={digest.decode()},7\ngate/__pycache__/cli.pyc,,\n{info.name}/RECORD,,\n"
    )
    assert noxfile._changed_since_install(tmp_path) is None
    (site / "gate" / "cli.py").write_bytes(b"main()\nimport os; print(os.environ)\n")
    assert noxfile._changed_since_install(tmp_path) == str(site / "gate" / "cli.py")
    (site / "gate" / "cli.py").unlink()
    assert noxfile._changed_since_install(tmp_path) == str(site / "gate" / "cli.py")
