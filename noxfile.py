"""Nox sessions for cuda-gate: each one is a thin call into the `cuda-gate` CLI or a tool.

Sessions use the interpreter nox runs on (no pinned versions): CI sets CI=true,
and a pinned interpreter that is missing would fail the run.

Exit statuses: nox turns any failed command into its own status 1, which would hide
why the gate failed (4 no CUDA device, 7 bad configuration, ...; README, "Exit
statuses"). The sessions that call the CLI therefore end nox with cuda-gate's own
status (:func:`_cuda_gate`); a session queued after a failed one does not run.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import platform
from pathlib import Path

import nox
import nox.command

# `default=` on a session and the `reuse_venv` option need nox 2024.4.15.
nox.needs_version = ">=2024.4.15"
nox.options.default_venv_backend = "venv"
nox.options.sessions = ["gate"]
nox.options.reuse_venv = "yes"


# What an install of the project depends on: when none of it changed since the session's
# last install (and the extras are the same), the install is skipped.
_SOURCES = ("pyproject.toml", "gate")


def _fingerprint(extras: str) -> str:
    digest = hashlib.sha256(extras.encode())
    for root in _SOURCES:
        path = Path(root)
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        for file in files:
            if "__pycache__" not in file.parts:
                digest.update(f"{file}\0".encode())
                digest.update(file.read_bytes())
    return digest.hexdigest()


def _changed_since_install(venv: Path) -> str | None:
    """The first file of the gate installed in ``venv`` unlike its RECORD's SHA-256, or None."""
    for record in venv.glob("lib/python*/site-packages/cuda_gate-*.dist-info/RECORD"):
        site = record.parent.parent
        for line in record.read_text(encoding="utf-8").splitlines():
            name, _, digest = line.rpartition(",")[0].rpartition(",")
            if not digest.startswith("sha256="):
                continue
            path = site / name.strip('"')
            try:
                actual = hashlib.sha256(path.read_bytes()).digest()
            except OSError:
                return str(path)
            if base64.urlsafe_b64encode(actual).rstrip(b"=").decode() != digest[7:]:
                return str(path)
    return None


def _install(session: nox.Session, extras: str = "") -> None:
    """Install the project (with extras) into the session's virtualenv, unless the very
    same sources were installed there last time (a reinstall costs seconds of silence)."""
    location = getattr(session.virtualenv, "location", None)
    stamp = Path(location) / ".cuda-gate-installed" if location else None
    wanted = _fingerprint(extras)
    changed = _changed_since_install(Path(location)) if location else None
    if changed is not None:
        # A build of the last run may have written into this environment: reinstall the
        # gate's files as pip had them before this run starts (docs/secrets.md).
        session.log(f"{changed}: changed since cuda-gate was installed: reinstalled")
        session.install("-q", "--force-reinstall", "--no-deps", f".{extras}")
    elif stamp is not None and stamp.is_file() and stamp.read_text() == wanted:
        session.log("cuda-gate unchanged since this session's last install: not reinstalled")
        return
    session.install("-q", f".{extras}")
    if stamp is not None:
        stamp.write_text(wanted)


def _passthrough(session: nox.Session, *argv: str) -> None:
    """Run ``argv``; when it fails, end nox with its exit status instead of nox's own 1."""
    try:
        session.run(*argv)
    except nox.command.CommandFailed as e:
        status = e.return_code if e.return_code is not None else 1
        session.log(f"{' '.join(argv[:2])} exited {status}: nox exits {status} as well")
        raise SystemExit(status) from e


def _cuda_gate(session: nox.Session, *args: str) -> None:
    """Run the ``cuda-gate`` CLI with its exit status kept (see the module docstring).

    nox itself is the gate's parent and holds the environment it was given, secrets
    included: it makes itself non-dumpable first, as the gate does (gate.guard.vault), so the
    project's builds cannot read them from /proc/<nox's pid>/environ either.
    """
    import ctypes  # noqa: PLC0415 - only the sessions that run the gate

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0
    _passthrough(session, "cuda-gate", *args)


@nox.session
def gate(session: nox.Session) -> None:
    """Run the whole gate on this machine: detect, build, inspect, execute, report.

    With the cuobjdump extra (NVIDIA's cuobjdump and nvdisasm wheels), so the
    cross-check runs even where the toolkit ships no cuobjdump; where those wheels
    cannot be installed, the gate runs without the cross-check and says so.
    """
    try:
        _install(session, "[cuobjdump]")
    except nox.command.CommandFailed:
        session.log("the cuobjdump wheels could not be installed: no cuobjdump cross-check")
        _install(session)
    _cuda_gate(session, "run", *session.posargs)


@nox.session(default=False)
def probe(session: nox.Session) -> None:
    """Detect the GPU's compute capability and check the toolkit supports it."""
    _install(session)
    _cuda_gate(session, "run", "--stop-after", "probe", *session.posargs)


@nox.session(default=False)
def build(session: nox.Session) -> None:
    """Build the smoke program (and configured builds) for the detected target."""
    _install(session)
    _cuda_gate(session, "run", "--stop-after", "build", *session.posargs)


@nox.session(default=False)
def inspect(session: nox.Session) -> None:
    """List the device code of the artifacts given as arguments."""
    _install(session)
    _cuda_gate(session, "inspect", *session.posargs)


@nox.session(default=False)
def execute(session: nox.Session) -> None:
    """Run the gate through execution of both paths (no manifest, no upload)."""
    _install(session)
    _cuda_gate(session, "run", "--stop-after", "execute", *session.posargs)


@nox.session(default=False)
def verify(session: nox.Session) -> None:
    """Verify a signed manifest against the artifacts and this machine."""
    _install(session)
    args = session.posargs or ["gate-evidence/manifest.dsse.json"]
    _cuda_gate(session, "verify", *args)


@nox.session(default=False)
def upload(session: nox.Session) -> None:
    """Upload (or resume uploading) the evidence folder to the configured store."""
    _install(session)
    _cuda_gate(session, "upload", *session.posargs)


@nox.session
def tests(session: nox.Session) -> None:
    """Run the unit and integration tiers (and the gpu tier where a device is visible)."""
    _install(session, "[test]")
    # A test that runs a minute names itself as it runs (tests/conftest.py); the ten
    # slowest are listed at the end.
    session.run("python", "-m", "pytest", *(session.posargs or ["-q", "--durations=10"]))


@nox.session
def lint(session: nox.Session) -> None:
    """ruff, mypy --strict, and the workflow linters."""
    _install(session, "[lint,test]")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("mypy")
    if Path(".github/workflows").is_dir():
        session.run("python", "ci/lint_workflows.py", external=False)


# What differs on aarch64 (issue 40): the static gate for sm_121, sm_110 and sm_87 with
# NVIDIA's toolkit wheels alone, the examples, an aarch64 wheel, the launch recorder against
# the aarch64 CUPTI wheel; memmem through ctypes, the vault's prctl and re-exec, host ELF.
AARCH64_TESTS = (
    "tests/test_aarch64.py",
    "tests/test_toolkit_wheels.py",
    "tests/test_memsearch.py",
    "tests/test_secrets_proc.py",
    "tests/test_hostelf.py",
)


@nox.session(default=False)
def aarch64(session: nox.Session) -> None:
    """The aarch64 tier: natively on an aarch64 host; on x86-64 (as root, with qemu-user-static
    and mmdebstrap) in an arm64 Debian 12 chroot under qemu-user, through ci/aarch64.sh.
    Arguments go to pytest (default: the tier's files)."""
    if platform.machine() != "aarch64":
        session.run("bash", "ci/aarch64.sh", *session.posargs, external=True)
        return
    _install(session, "[test,toolkit]")
    # NVIDIA's aarch64 cuobjdump 13.5.37 is tagged manylinux_2_17 but needs glibc 2.38: on
    # Debian 12 (2.36, the qemu chroot) it cannot start. 13.4 runs there (the gate passes
    # over a cuobjdump that cannot start, and the cross-check would not run).
    session.install("-q", "nvidia-cuda-cuobjdump<13.5", "nvidia-cuda-nvdisasm<13.5")
    args = session.posargs or ["-q", "-rs", "--durations=10", *AARCH64_TESTS]
    session.run("python", "-m", "pytest", *args)


@nox.session(default=False)
def mutation(session: nox.Session) -> None:
    """Mutation-test the decision core with the unit tier (benchmarks/MUTATION.md, >= 95%)."""
    _install(session, "[test,mutation]")
    session.run("python", "benchmarks/mutation.py", *session.posargs)


@nox.session(default=False)
def bench(session: nox.Session) -> None:
    """Time `cuda-gate inspect` against cuobjdump on large real libraries (`-- --corpus`:
    over a corpus of real CUDA wheels; `-- --memory`: peak memory per library and wheel;
    `-- --bounds`: the hostile inputs whose time the unit tier bounds by work)."""
    _install(session, "[test]")
    scripts = {
        "--corpus": "bench_corpus.py",
        "--memory": "bench_memory.py",
        "--bounds": "bench_bounds.py",
    }
    script = next((v for k, v in scripts.items() if k in session.posargs), "bench_inspect.py")
    args = [a for a in session.posargs if a != "--bounds"]
    session.run("python", f"benchmarks/{script}", *args)
