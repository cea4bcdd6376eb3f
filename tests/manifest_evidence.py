"""A realistic evidence folder for the manifest, signing and verify tests.

Real files in a temp folder: two real executables (copies of /bin/true and
/bin/false) as the final artifacts, the seed's text files, and a result.json
following the run-record contract, every text passed through the redactor as
the gate's evidence writer does.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gate.attest.verify import MachineFacts
from gate.evidence import mark
from gate.guard.redact import Redactor

DRIVER_VERSION = "580.159.04"
DRIVER_CUDA = "13.0"
TOOLKIT = "13.0"
TOOLKIT_RELEASE = "V13.0.88"
CAPABILITY = "9.0"
HOST_ARCH = "x86_64"
KERNEL = "_Z11write_valuePi"
STATEMENT = "Passed with the current driver, current artifacts, and tested entry points."


@dataclass(frozen=True)
class Evidence:
    """Where the fixture put things."""

    folder: Path
    artifacts: Path

    def artifact(self, name: str) -> Path:
        """The path of one final artifact."""
        return self.artifacts / name


def matching_machine() -> MachineFacts:
    """The machine the fixture's evidence was recorded on."""
    return MachineFacts(
        host_arch=HOST_ARCH,
        driver_version=DRIVER_VERSION,
        driver_cuda_version=DRIVER_CUDA,
        toolkit_version=TOOLKIT,
        capability=CAPABILITY,
        toolkit_release=TOOLKIT_RELEASE,
    )


def sha256(path: Path) -> str:
    """Hex SHA-256 of a file."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def make_evidence(
    root: Path,
    *,
    accepted: bool = True,
    build_flags: str = "-O2",
    environ: Mapping[str, str] | None = None,
    redacted: bool = True,
) -> Evidence:
    """Write artifacts under ``root/artifacts`` and the evidence under ``root/gate-evidence``.

    Text goes through the redactor with ``environ`` (default: the process environment),
    as the gate's evidence writer does, unless ``redacted`` is False.
    """
    artifacts = root / "artifacts"
    folder = root / "gate-evidence"
    artifacts.mkdir(parents=True)
    folder.mkdir(parents=True)
    shutil.copyfile("/bin/true", artifacts / "check")
    shutil.copyfile("/bin/false", artifacts / "helper")

    redactor = Redactor.from_environment(environ)

    def write(name: str, text: str) -> None:
        (folder / name).write_text(redactor.text(text) if redacted else text, encoding="utf-8")

    mark(folder)
    command = (
        f"nvcc {build_flags} -gencode arch=compute_90,code=[sm_90,compute_90] "
        f"-o {artifacts / 'check'} check.cu"
    )
    write("host-arch.txt", f"{HOST_ARCH}\n")
    write(
        "driver.txt",
        f"| NVIDIA-SMI {DRIVER_VERSION}  Driver Version: {DRIVER_VERSION}  "
        f"CUDA Version: {DRIVER_CUDA} |\n",
    )
    write("toolkit.txt", f"Cuda compilation tools, release {TOOLKIT}, {TOOLKIT_RELEASE}\n")
    write("compute-capability.txt", "90\n")
    write("commands.txt", command + "\n")
    write("sass.txt", f"Fatbin elf code:\narch = sm_90\nFunction : {KERNEL}\n")
    write("ptx.txt", f".version 9.0\n.target sm_90\n.visible .entry {KERNEL}(\n")
    write("native.log", "value = 42\n")
    write("ptx-jit.log", "value = 42\n")
    (folder / "logs").mkdir()
    write("logs/build-smoke.log", "nvcc ok\n")
    names = ("check", "helper")
    write("sha256.txt", "".join(f"{sha256(artifacts / n)}  {n}\n" for n in names))
    write("dependencies.txt", "check: libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6\n")
    result = _result(artifacts, folder, command, accepted=accepted)
    write("result.json", json.dumps(result, indent=2, sort_keys=True) + "\n")
    return Evidence(folder=folder, artifacts=artifacts)


def _result(artifacts: Path, folder: Path, command: str, *, accepted: bool) -> dict[str, Any]:
    jit_status = 0 if accepted else 1
    listing = {
        "inspector": "cuobjdump",
        "entries": [
            {"kind": "SASS", "target": "sm_90", "ptx_isa": None, "kernels": [KERNEL]},
            {"kind": "PTX", "target": "sm_90", "ptx_isa": "9.0", "kernels": [KERNEL]},
        ],
    }
    deps = [{"name": "libc.so.6", "resolved": "/lib/x86_64-linux-gnu/libc.so.6"}]
    return {
        "version": 3,
        "tool": {"name": "cuda-gate", "version": "0.1.0"},
        "started": "2026-11-29T18:00:00Z",
        "finished": "2026-11-29T18:01:00Z",
        "run": {"run_id": "20261129T180000Z-1a2b3c", "runner": "h200-01", "runner_class": "h200"},
        "source": {"revision": "a" * 40, "dirty": False, "repository": "acme/kernels"},
        "environment": {
            "host_arch": HOST_ARCH,
            "os": "Debian GNU/Linux 12 (kernel 6.1.0)",
            "driver": {
                "name": "NVIDIA H200",
                "driver_version": DRIVER_VERSION,
                "cuda_version": DRIVER_CUDA,
            },
            "toolkit": {"version": TOOLKIT, "release": TOOLKIT_RELEASE, "nvcc": "/usr/bin/nvcc"},
            "supported_targets": ["sm_75", "sm_80", "sm_90", "sm_100", "sm_120"],
            "container": None,
            "extra_key_from_a_newer_gate": True,
        },
        "device": {"capability": CAPABILITY, "target": "sm_90", "source": "probe", "error": None},
        "requirements": [{"target": "sm_90", "form": "device"}],
        "builds": [
            {
                "name": "smoke",
                "command": command,
                "argv": command.split(),
                "cwd": str(artifacts),
                "returncode": 0,
                "duration": 1.2,
            },
        ],
        "artifacts": [
            {
                "name": name,
                "path": str(artifacts / name),
                "sha256": sha256(artifacts / name),
                "size": (artifacts / name).stat().st_size,
                "host_format": "ELF 64-bit LSB pie executable, x86-64",
                "elf_machine": "x86-64",
                "dependencies": deps,
                "listing": listing,
            }
            for name in ("check", "helper")
        ],
        "executions": [
            {
                "entry_point": "check",
                "path": path,
                "command": f"env {env} ./check",
                "returncode": returncode,
                "expected_returncode": 0,
                "timed_out": False,
                "duration": 0.3,
                "log": log,
                "log_sha256": sha256(folder / log),
                "output_ok": returncode == 0,
                "cache_clean": True,
                "passed": returncode == 0,
            }
            for path, env, log, returncode in (
                ("native", "-u CUDA_FORCE_PTX_JIT CUDA_DISABLE_PTX_JIT=1", "native.log", 0),
                ("jit", "CUDA_FORCE_PTX_JIT=1 CUDA_CACHE_DISABLE=1", "ptx-jit.log", jit_status),
            )
        ],
        "checks": [
            {
                "name": "sass present",
                "classname": "gate.inspect",
                "state": "passed",
                "message": "sm_90",
                "duration": 0.01,
            },
            *(
                []
                if accepted
                else [
                    {
                        "name": "check [jit]",
                        "classname": "gate.execute.jit",
                        "state": "failed",
                        "message": "forced PTX JIT: exit status 1",
                        "duration": 0.3,
                        "cause": "exit-status",
                    }
                ]
            ),
        ],
        "verdict": {
            "accepted": accepted,
            "statement": STATEMENT
            if accepted
            else "not accepted: check [jit]: forced PTX JIT: exit status 1",
            "reasons": [] if accepted else ["check [jit]: forced PTX JIT: exit status 1"],
        },
    }
