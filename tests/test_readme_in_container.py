"""The README's first code block, verbatim, in a fresh Debian 12 with only what it asks for.

tests/test_readme_first_hour.py runs the block on this machine, whose other tools could hide
a missing requirement. Here the machine is a Debian bookworm root tree made by mmdebstrap
with exactly the README's list: ``python3``, its ``venv`` module (``python3-venv``), ``g++``
for nvcc's host side (without it not even the probe builds: exit 3 and that hint,
tests/test_failure_lines.py) and ``git``. The CUDA toolkit is this machine's, mounted
read-only and named by ``CUDA_HOME`` (the README's other way to find nvcc; the host test
covers PATH). The commands run as an ordinary user (uid 1000) with an empty HOME, in a
committed copy of the project, with the machine's pip settings (its index, certificates,
wheel folders) as a user's machine has its own. There is no GPU in the container: the gate
stops at the probe with exit 4.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.containers import (
    Podman,
    container_tools_missing,
    cuda_toolkit,
    debian_rootfs,
    require_container_tools,
)
from tests.test_readme_first_hour import SYSTEM_PATH, first_block, project_copy

# What the README says the machine needs, as Debian packages; nothing else goes in.
README_PACKAGES = ("python3", "python3-venv", "g++", "git")
USER = "1000:1000"
HOME, PROJECT = "/home/user", "/src/cuda-gate"
# pip's machine-wide settings (its site configuration files) and the certificates.
PIP_FILES = (Path("/etc/pip.conf"), Path("/etc/xdg/pip"), Path("/etc/ssl/certs"))


@pytest.fixture
def podman(tmp_path: Path) -> Iterator[Podman]:
    """podman with a store of its own, removed afterwards (skips or, under CI, fails when
    podman cannot run here)."""
    require_container_tools()
    engine = Podman(tmp_path / "podman")
    yield engine
    engine.remove_store()


def pip_settings() -> list[str]:
    """The machine's pip settings as podman options: the PIP_* and proxy variables, and,
    read-only, pip's machine-wide configuration, the certificates and every local path
    (``/...``, ``file:///...``) those name: a wheel folder, a local index, constraints."""
    names = {k: v for k, v in os.environ.items() if k.startswith("PIP_") or k.endswith("_proxy")}
    options = [f"--env={name}={value}" for name, value in sorted(names.items())]
    texts = list(names.values())
    configs = [p / "pip.conf" if p.is_dir() else p for p in PIP_FILES]
    texts += [c.read_text(encoding="utf-8") for c in configs if c.is_file()]
    words = (w.removeprefix("file://") for t in texts for w in re.split(r"[\s=,;]+", t))
    named = {Path(w) for w in words if w.startswith("/")}
    # A certificate file inside a folder already mounted is mounted with it.
    paths = {p for p in named | set(PIP_FILES) if p.exists() and p != Path("/")}
    for path in sorted(p for p in paths if not any(p.is_relative_to(q) and p != q for q in paths)):
        options.append(f"--volume={path}:{path}:ro")
    return options


def committed(project: Path) -> str:
    """Commit the copy as a user's clone has it; the commit's hash."""
    git = ["git", "-C", str(project), "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run([*git, "add", "-A"], check=True, timeout=120)
    subprocess.run([*git, "commit", "-q", "--no-gpg-sign", "-m", "clone"], check=True, timeout=120)
    return subprocess.run(
        [*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True, timeout=60
    ).stdout.strip()


def give_to_user(*folders: Path) -> None:
    """Make the folders the container user's, as a user owns their clone and HOME."""
    uid, gid = (int(n) for n in USER.split(":"))
    for folder in folders:
        os.chown(folder, uid, gid)
        for parent, dirs, files in os.walk(folder):
            for name in dirs + files:
                os.chown(Path(parent) / name, uid, gid, follow_symlinks=False)


@pytest.mark.unit
def test_missing_container_tools_fail_under_ci_and_skip_elsewhere(tmp_path: Path) -> None:
    nowhere = {"PATH": str(tmp_path)}
    reason = container_tools_missing(nowhere)
    assert reason is not None
    assert reason.startswith("the container tests need root" if os.geteuid() else "podman, runc")
    with pytest.raises(pytest.fail.Exception, match="CI=true: the container tests must run"):
        require_container_tools({**nowhere, "CI": "true"})
    with pytest.raises(pytest.skip.Exception, match=re.escape(reason)):
        require_container_tools({**nowhere, "CI": "false"})


@pytest.mark.integration
def test_the_readmes_first_block_works_in_a_fresh_debian(tmp_path: Path, podman: Podman) -> None:
    gate, tests = first_block()
    toolkit = cuda_toolkit()
    rootfs = debian_rootfs("bookworm", README_PACKAGES)
    image = f"localhost/cuda-gate-readme:{rootfs.stem}"
    podman.import_rootfs(rootfs, image)
    project, home = project_copy(tmp_path), tmp_path / "home"
    home.mkdir()
    revision = committed(project)
    give_to_user(project, home)
    ci = [f"--env=CI={os.environ['CI']}"] if "CI" in os.environ else []

    def run(line: str, *env: str) -> subprocess.CompletedProcess[str]:
        return podman.run(
            "--network=host", f"--user={USER}", f"--workdir={PROJECT}",
            f"--volume={project}:{PROJECT}", f"--volume={home}:{HOME}",
            f"--volume={toolkit}:{toolkit}:ro", *pip_settings(),
            f"--env=PATH={SYSTEM_PATH}", f"--env=HOME={HOME}", "--env=LANG=C.UTF-8",
            f"--env=CUDA_HOME={toolkit}", *ci, *env,
            image, "bash", "-c", line, timeout=1200,
        )  # fmt: skip

    ran = run(gate)
    # No GPU in the container: the gate stops at the probe with exit 4 (0 with a device).
    assert ran.returncode in (0, 4), ran.stdout[-3000:] + ran.stderr[-3000:]
    assert "Evidence: gate-evidence/" in ran.stdout
    result = json.loads((project / "gate-evidence" / "result.json").read_text(encoding="utf-8"))
    assert result["environment"]["toolkit"]["nvcc"] == f"{toolkit}/bin/nvcc"
    # git works there and the run leaves the clone clean (everything it writes is ignored).
    assert (result["source"]["revision"], result["source"]["dirty"]) == (revision, False)
    assert "home = /usr/bin" in (project / ".venv" / "pyvenv.cfg").read_text(encoding="utf-8")
    assert not (home / ".local").exists() or not any((home / ".local").rglob("nox*"))
    ran = run(tests, "--env=PYTEST_ADDOPTS=-k test_layering")
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    assert " passed" in ran.stdout
    assert "Session tests was successful" in ran.stderr
