"""Trap stubs and empty kernels, end to end: real nvcc builds, real nvdisasm, real cuda-gate.

nvcc 13.0 builds a kernel under an architecture guard that excludes the built target
into a trap stub (``LDC R1, c[0x0][0x37c] ; BPT.TRAP 0x1 ; BRA self``; gate.rules.stubs
has the disassembly). Our reader's judgement of every kernel in every target must equal
what the same rule reads from cuobjdump -sass (nvdisasm underneath), and `cuda-gate
inspect` and `cuda-gate run --target sm_121` must name the stub.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gate.errors import ToolError
from gate.reader import sass
from gate.reader.read import read_artifact
from gate.rules.stubs import Body, classify
from gate.tools import cuobjdump
from tests.conftest import gpu_unavailable_reason

pytestmark = pytest.mark.integration

SOURCE = """
__global__ void guarded(float *x) {
#if __CUDA_ARCH__ == 1200
  x[threadIdx.x] *= 2.0f;
#else
  asm("trap;");
#endif
}
__global__ void guarded_trap(float *x) {
#if __CUDA_ARCH__ == 800
  x[threadIdx.x] *= 2.0f;
#else
  __trap();
#endif
}
__global__ void guard_no_else(float *x) {
#if __CUDA_ARCH__ >= 1000
  x[threadIdx.x] *= 2.0f;
#endif
}
__global__ void warm_up() {}
__global__ void checks_first(float *x) { if (x[0] < 0) __trap(); x[1] = 2; }
__global__ void real(float *x) { x[threadIdx.x] += 1.0f; }
int main() { return 0; }
"""
ARCHS = ("75", "90", "100", "121")
_FUNCTION = re.compile(r"^\s*Function : (\S+)", re.MULTILINE)
_CODE_FOR = re.compile(r"^\s*code for (sm_\w+)", re.MULTILINE)


def nvcc() -> str:
    found = shutil.which("nvcc")
    assert found is not None, "nvcc is needed (the CI machine has it)"
    return found


def tool() -> str:
    try:
        return cuobjdump.find()
    except ToolError as e:
        if os.environ.get("CI") == "true":
            pytest.fail(f"cuobjdump is needed under CI=true: {e.one_line()}")
        pytest.skip(f"cuobjdump/nvdisasm not installed: {e.one_line()}")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("stubs")
    (folder / "k.cu").write_text(SOURCE, encoding="utf-8")
    codes = [a for arch in ARCHS for a in ("-gencode", f"arch=compute_{arch},code=sm_{arch}")]
    for args, out in ((codes, "app"), (["-G", *codes[:4]], "debug")):
        subprocess.run(
            [nvcc(), "k.cu", *args, "-o", out], cwd=folder, check=True, capture_output=True
        )
    return folder


def by_disassembly(text: str) -> dict[tuple[str, str], Body]:
    """(target, kernel) -> the rule's judgement, from cuobjdump -sass text."""
    out: dict[tuple[str, str], Body] = {}
    for block in re.split(r"(?=^\s*code for sm_)", text, flags=re.MULTILINE):
        target = _CODE_FOR.search(block)
        if target is None:
            continue
        functions = list(_FUNCTION.finditer(block))
        for i, f in enumerate(functions):
            end = functions[i + 1].start() if i + 1 < len(functions) else len(block)
            lines = block[f.end() : end].splitlines()
            found = (sass.parse_line(line) for line in lines)
            out[(target.group(1), f.group(1))] = classify(i for i in found if i is not None)
    return out


def by_reader(path: Path) -> dict[tuple[str, str], Body]:
    out: dict[tuple[str, str], Body] = {}
    for e in read_artifact(path, names=True).listing.entries:
        for k in e.kernels:
            out[(str(e.target), k)] = (
                Body.TRAP if k in e.traps else Body.EMPTY if k in e.empty else Body.CODE
            )
    return out


@pytest.mark.parametrize("name", ["app", "debug"])
def test_our_reader_judges_every_kernel_as_the_disassembly_does(built: Path, name: str) -> None:
    text = cuobjdump.run_tool(tool(), ["-sass"], built / name).stdout
    theirs = by_disassembly(text)  # -G lists device functions (__trap) beside the kernels
    ours = by_reader(built / name)
    assert len(ours) == (24 if name == "app" else 12)
    assert ours == {key: theirs[key] for key in ours}


def test_the_guards_leave_what_the_rule_says(built: Path) -> None:
    ours = by_reader(built / "app")
    assert ours[("sm_121", "_Z7guardedPf")] is Body.TRAP  # == 1200 excludes 12.1
    assert ours[("sm_90", "_Z12guarded_trapPf")] is Body.TRAP
    assert ours[("sm_90", "_Z13guard_no_elsePf")] is Body.EMPTY
    assert ours[("sm_100", "_Z13guard_no_elsePf")] is Body.CODE
    assert ours[("sm_121", "_Z7warm_upv")] is Body.EMPTY
    assert {ours[(f"sm_{a}", "_Z12checks_firstPf")] for a in ARCHS} == {Body.CODE}
    # A -G build moves its parameters first: code, never a stub (a miss, not a false alarm).
    assert set(by_reader(built / "debug").values()) == {Body.CODE}


def gate(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gate", *args],
        cwd=cwd, env=os.environ.copy(), capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip


def test_inspect_names_the_trap_stub_per_kernel_and_target(built: Path) -> None:
    done = gate("inspect", "--names", "--device", "12.1", "app", cwd=built)
    assert done.returncode == 0, done.stderr
    shown = (
        "trap stub: guarded(float*) in sm_75 sm_90 sm_100 sm_121 SASS: present but traps on 12.1"
    )
    assert shown in done.stdout
    assert "empty kernel: warm_up() in sm_75 sm_90 sm_100 sm_121 SASS" in done.stdout
    doc = json.loads(
        gate("inspect", "--names", "--json", "--device", "12.1", "app", cwd=built).stdout
    )
    stubs = {s["kernel"]: s for s in doc["artifacts"][0]["stubs"]["kernels"]}
    assert stubs["_Z7guardedPf"] == {
        "kernel": "_Z7guardedPf", "body": "trap", "targets": ["sm_75", "sm_90", "sm_100", "sm_121"],
        "devices": ["12.1"], "code_elsewhere": False,
    }  # fmt: skip
    assert stubs["_Z13guard_no_elsePf"]["code_elsewhere"] is True
    assert stubs["_Z13guard_no_elsePf"]["devices"] == []  # 12.1 runs sm_121, which has code


@pytest.mark.skipif(gpu_unavailable_reason() is None, reason="a CUDA device is visible here")
def test_run_fails_the_projects_own_trap_stub_for_the_target(built: Path, tmp_path: Path) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    shutil.copy2(built / "app", folder / "app")
    (folder / "cuda-gate.toml").write_text('[[artifact]]\npath = "app"\n', encoding="utf-8")
    done = gate("run", "--target", "sm_121", "--no-store", "--evidence", "ev", cwd=folder)
    assert done.returncode == 1, done.stderr
    result: dict[str, Any] = json.loads((folder / "ev/result.json").read_text(encoding="utf-8"))
    check = next(
        c for c in result["checks"] if c["name"] == "app: no kernel is a trap stub or empty"
    )
    assert check["state"] == "failed"
    assert (
        "guarded(float*): trap stub in sm_75 sm_90 sm_100 sm_121 SASS, present but traps on 12.1"
        in check["message"]
    )
    assert "guarded_trap(float*): trap stub" in check["message"]
