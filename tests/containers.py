"""Real containers for tests: podman as root with its own store, and fresh Debian root trees.

Two handles on podman: :class:`Podman` (argv lists, for running containers) and
:class:`PodmanStore` (a callable, for importing, building and saving images).

podman runs on the test machines with four adjustments (/work/shared/CONTAINERS.md): runc
and cgroupfs (crun refuses the hosts' hybrid cgroups), no default ulimits (the sandbox
refuses raising RLIMIT_NOFILE), the vfs storage driver (no overlay needed), and a store of
its own under the test's temp folder, so no test touches the machine's images.

A fresh Debian is ``mmdebstrap --variant=apt`` of a suite with the packages a test names:
the machine's own apt sources, no registry. The tarball is kept in the ignored ``.work/``
folder (where the lint's actionlint and the benchmarks keep their downloads), one per set
of packages and day, so a day's runs build it once.
"""

from __future__ import annotations

import datetime
import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from gate import proc

ROOT = Path(__file__).resolve().parent.parent
ROOTFS_CACHE = ROOT / ".work" / "rootfs"
TOOLS = ("podman", "runc", "mmdebstrap")
PACKAGES_HINT = (
    "as root: apt-get install podman runc mmdebstrap busybox-static (.ci/run installs them)"
)


def container_tools_missing(env: Mapping[str, str] | None = None) -> str | None:
    """Why the container tests cannot run here, or None when they can."""
    env = os.environ if env is None else env
    if os.geteuid() != 0:
        return "the container tests need root (podman with its own store, mmdebstrap)"
    missing = [tool for tool in TOOLS if shutil.which(tool, path=env.get("PATH")) is None]
    if missing:
        return f"{', '.join(missing)} not found on PATH ({PACKAGES_HINT})"
    return None


def require_container_tools(env: Mapping[str, str] | None = None) -> None:
    """Stop the test where podman cannot run: a failure under ``CI=true``, else a skip."""
    env = os.environ if env is None else env
    reason = container_tools_missing(env)
    if reason is None:
        return
    if env.get("CI", "").strip().lower() == "true":
        pytest.fail(f"{reason} (CI=true: the container tests must run, not skip)", pytrace=False)
    pytest.skip(reason)


def _checked(argv: Sequence[str], timeout: float, env: Mapping[str, str] | None = None) -> str:
    done = subprocess.run(
        list(argv), capture_output=True, text=True, timeout=timeout, check=False, env=env
    )
    if done.returncode != 0:
        pytest.fail(
            f"{' '.join(argv[:4])} ... exited {done.returncode}: {done.stderr.strip()[-2000:]}",
            pytrace=False,
        )
    return done.stdout


@dataclass(frozen=True)
class Podman:
    """podman with the machine's adjustments and a store under ``folder``.

    Its run-time folder is a short one of its own under /tmp: podman refuses a ``--runroot``
    longer than 50 characters, and pytest's temp folders are longer.
    """

    folder: Path
    runroot: Path = field(
        default_factory=lambda: Path(tempfile.mkdtemp(prefix="podman-", dir="/tmp"))
    )

    def __post_init__(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / "containers.conf").write_text(
            "[containers]\ndefault_ulimits = []\n", encoding="utf-8"
        )

    def argv(self, *args: str) -> list[str]:
        """A podman command line on this store."""
        return [
            "podman",
            "--root", str(self.folder / "root"),
            "--runroot", str(self.runroot),
            "--storage-driver", "vfs",
            "--runtime", "runc",
            "--cgroup-manager", "cgroupfs",
            *args,
        ]  # fmt: skip

    def env(self) -> dict[str, str]:
        """podman's own environment: this machine's, with the containers.conf above."""
        return {**os.environ, "CONTAINERS_CONF": str(self.folder / "containers.conf")}

    def import_rootfs(self, tarball: Path, name: str) -> str:
        """Make image ``name`` of a root tree's tarball; its id."""
        return _checked(self.argv("import", "-q", str(tarball), name), 600, self.env()).strip()

    def run(self, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
        """``podman run --rm ARGS``, output captured, the status left to the caller."""
        return subprocess.run(
            self.argv("run", "--rm", *args), capture_output=True, text=True, timeout=timeout,
            check=False, env=self.env(),
        )  # fmt: skip

    def remove_store(self) -> None:
        """Delete this store's images and the store (vfs layers are whole copies)."""
        subprocess.run(
            self.argv("rmi", "--all", "--force"), capture_output=True, timeout=300,
            check=False, env=self.env(),
        )  # fmt: skip
        shutil.rmtree(self.folder, ignore_errors=True)
        shutil.rmtree(self.runroot, ignore_errors=True)


def debian_rootfs(suite: str, packages: Sequence[str], cache: Path = ROOTFS_CACHE) -> Path:
    """A tarball of a fresh ``suite`` with ``packages`` (mmdebstrap's apt variant), built once a
    day per package set into ``cache``; the day's tarball replaces older ones of the set."""
    args = ["--variant=apt", f"--include={','.join(packages)}", "--format=tar", suite]
    key = hashlib.sha256("\0".join(args).encode()).hexdigest()[:12]
    today = datetime.datetime.now(datetime.UTC).date().isoformat()
    tarball = cache / f"debian-{suite}-{key}-{today}.tar"
    if tarball.is_file():
        return tarball
    cache.mkdir(parents=True, exist_ok=True)
    partial = tarball.with_name(f"{tarball.name}.{os.getpid()}.partial")
    try:
        _checked(["mmdebstrap", "--quiet", *args, str(partial)], 1200)
        partial.replace(tarball)
    finally:
        partial.unlink(missing_ok=True)
    for old in cache.glob(f"debian-{suite}-{key}-*.tar"):
        if old != tarball:
            old.unlink(missing_ok=True)
    return tarball


def cuda_toolkit() -> Path:
    """The folder of the toolkit this machine's nvcc runs: CUDA_HOME, else where the nvcc on
    PATH really lives (through symlinks and a wrapper script's ``exec``), else /usr/local/cuda."""
    candidates = [Path(os.environ["CUDA_HOME"])] if os.environ.get("CUDA_HOME") else []
    nvcc = shutil.which("nvcc")
    if nvcc is not None:
        real = Path(nvcc).resolve()
        candidates.append(real.parent.parent)
        if real.read_bytes()[:2] == b"#!":
            for word in real.read_text(encoding="utf-8", errors="replace").split():
                if word.endswith("/bin/nvcc"):
                    candidates.append(Path(word).resolve().parent.parent)
    candidates.append(Path("/usr/local/cuda"))
    for folder in candidates:
        binary = folder / "bin" / "nvcc"
        if binary.is_file() and binary.read_bytes()[:4] == b"\x7fELF":
            return folder.resolve()
    pytest.fail(f"no CUDA toolkit found (looked in {', '.join(map(str, candidates))})")


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
class PodmanStore:
    """podman as a callable with a store of its own under a temp folder (never the machine's),
    for tests that only import, build and save images."""

    program: str
    env: dict[str, str]

    def __call__(self, *args: str) -> str:
        result = proc.run([self.program, *args], env_set=self.env, timeout=300)
        assert result.ok, result.output()
        return result.stdout.strip()

    def digest(self, name: str) -> str:
        return self("image", "inspect", "--format", "{{.Digest}}", name)


def podman_store(root: Path) -> PodmanStore:
    """podman with its configuration and image store under ``root`` (created here)."""
    return _configured(root, "[containers]\ndefault_ulimits = []\n", "vfs", root / "run")


def _configured(root: Path, containers: str, driver: str, runroot: Path) -> PodmanStore:
    """podman whose containers.conf says ``containers`` and whose storage (``driver``) lives
    under ``root`` (created here), its run-time folder ``runroot``."""
    program = need("podman", "apt-get install -y podman runc busybox-static")
    root.mkdir(parents=True)
    (root / "containers.conf").write_text(containers)
    (root / "storage.conf").write_text(
        f'[storage]\ndriver = "{driver}"\ngraphroot = "{root}/graph"\nrunroot = "{runroot}"\n'
    )
    env = {
        "CONTAINERS_CONF": str(root / "containers.conf"),
        "CONTAINERS_STORAGE_CONF": str(root / "storage.conf"),
    }
    return PodmanStore(program, env)


def podman_runner(root: Path) -> PodmanStore:
    """podman that also runs containers, with a store of its own under ``root``: runc and
    cgroupfs, no default ulimits, overlay storage where the kernel has it (a container of a
    500 MB image starts in a fraction of a second; vfs copies the image for each one), and
    a short run-time folder of its own under /tmp (podman refuses one past 50 characters).
    The caller removes it with :func:`remove_runner`."""
    need("podman", "apt-get install -y podman runc busybox-static")
    runroot = Path(tempfile.mkdtemp(prefix="podman-", dir="/tmp"))
    filesystems = Path("/proc/filesystems").read_text(encoding="utf-8")
    driver = "overlay" if "\toverlay\n" in filesystems else "vfs"
    conf = (
        '[containers]\ndefault_ulimits = []\n[engine]\nruntime = "runc"\n'
        'cgroup_manager = "cgroupfs"\n'
    )
    return _configured(root, conf, driver, runroot)


def remove_runner(podman: PodmanStore) -> None:
    """Delete the runner's containers, images and folders (overlay mounts included)."""
    proc.run([podman.program, "rm", "--all", "--force"], env_set=podman.env, timeout=300)
    proc.run([podman.program, "rmi", "--all", "--force"], env_set=podman.env, timeout=300)
    storage = Path(podman.env["CONTAINERS_STORAGE_CONF"])
    text = storage.read_text(encoding="utf-8")
    for key in ("graphroot", "runroot"):
        start = text.index(f'{key} = "') + len(key) + 4
        shutil.rmtree(text[start : text.index('"', start)], ignore_errors=True)
