"""A real container runtime for tests: podman with a store of its own under a temp folder.

The recipe of /work/shared/CONTAINERS.md: the vfs storage driver (no overlay needed), no
default ulimits (the sandbox refuses raising them), and a graph root and run root under
the test's temp folder, never the machine's image store. A test that needs a missing
tool fails under ``CI=true`` and is skipped, saying why, elsewhere.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from gate import proc

BUSYBOX = Path("/bin/busybox")


def need(tool: str, why: str) -> str:
    """The tool's path, or stop: a failure under CI=true, else a skip saying why."""
    found = shutil.which(tool)
    if found:
        return found
    return missing(f"{tool} not found: {why}")


def missing(message: str) -> str:
    """Stop the test for want of a tool: a failure under CI=true, else a skip."""
    if os.environ.get("CI", "").strip().lower() == "true":
        pytest.fail(f"{message} (CI=true: these tests must run, not skip)", pytrace=False)
    pytest.skip(message)


@dataclass(frozen=True)
class Podman:
    """podman with a store of its own under a temp folder (never the machine's)."""

    program: str
    env: dict[str, str]

    def __call__(self, *args: str) -> str:
        result = proc.run([self.program, *args], env_set=self.env, timeout=300)
        assert result.ok, result.output()
        return result.stdout.strip()

    def digest(self, name: str) -> str:
        return self("image", "inspect", "--format", "{{.Digest}}", name)


def podman_store(root: Path) -> Podman:
    """podman with its configuration and image store under ``root`` (created here)."""
    program = need("podman", "apt-get install -y podman runc busybox-static")
    root.mkdir(parents=True)
    (root / "containers.conf").write_text("[containers]\ndefault_ulimits = []\n")
    (root / "storage.conf").write_text(
        f'[storage]\ndriver = "vfs"\ngraphroot = "{root}/graph"\nrunroot = "{root}/run"\n'
    )
    env = {
        "CONTAINERS_CONF": str(root / "containers.conf"),
        "CONTAINERS_STORAGE_CONF": str(root / "storage.conf"),
    }
    return Podman(program, env)
