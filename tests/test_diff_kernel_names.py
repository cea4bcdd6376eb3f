"""A C++ kernel dropped between two real runs is named as C++ spells it (issue 42, item 2).

A library of two kernels, ``scale(float*, int)`` and ``shift(float*)``, is built by real
nvcc for sm_90 (SASS and PTX) and gated with ``cuda-gate run --target sm_90 --no-store``;
then built without ``scale`` and gated again against the first run (``--baseline``).
``cuda-gate diff`` of the two, the second run's console, summary.md and junit.xml name
the kernel ``scale(float*, int)``; the JSON keeps its symbol, ``_Z5scalePfi``. The one
kernel is one regression, and the closing line counts it once.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from gate.system import machine
from tests.test_baseline import SCHEMAS, clean_env, gate, nvcc

pytestmark = pytest.mark.integration

SOURCE = """\
#ifndef NO_SCALE
__global__ void scale(float* x, int n) { if (threadIdx.x < n) x[threadIdx.x] *= 2.0f; }
#endif
__global__ void shift(float* x) { x[threadIdx.x] += 1.0f; }
"""
SYMBOL, NAME = "_Z5scalePfi", "scale(float*, int)"
LOST = f"lost kernel {NAME} from sm_90, compute_90"


def config(*defines: str) -> str:
    flags = "".join(f'"{d}", ' for d in defines)
    return (
        f'host = "{machine.host_arch()}"\n'
        "smoke = false\n"
        "[[build]]\n"
        'name = "lib"\n'
        'command = ["{nvcc}", "-shared", "-Xcompiler", "-fPIC", '
        '"-gencode", "arch=compute_90,code=[sm_90,compute_90]", '
        f'{flags}"-o", "libk.so", "k.cu"]\n'
        "[[artifact]]\n"
        'path = "libk.so"\n'
        "[[entry_point]]\n"
        'command = ["true"]\n'
    )


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    """The run with ``scale``, the run without it (against the first), and its stdout."""
    nvcc()
    root = tmp_path_factory.mktemp("dropped")
    env = clean_env(root)
    (root / "k.cu").write_text(SOURCE, encoding="utf-8")
    runs = []
    for name, defines, more in (("ev1", (), ()), ("ev2", ("-DNO_SCALE",), ("--baseline", "ev1"))):
        (root / "cuda-gate.toml").write_text(config(*defines), encoding="utf-8")
        args = ["run", "--target", "sm_90", "--no-store", "--evidence", name]
        done = gate([*args, "--build-dir", f"build-{name}", *more], root, env)
        assert (root / name / "result.json").is_file(), done.stdout + done.stderr
        runs.append(done)
    return root / "ev1", root / "ev2", runs[1].stdout


def test_diff_names_the_dropped_kernel_demangled_and_counts_it_once(
    pair: tuple[Path, Path, str],
) -> None:
    old, new, _ = pair
    done = gate(["diff", str(old), str(new)], old.parent, clean_env(old.parent))
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert [line for line in lines if line.startswith(("FAIL", "WARN"))] == [
        f"FAIL libk.so: {LOST}"
    ]
    assert SYMBOL not in done.stdout  # one kernel of its name: no symbol needed
    # The closing line: the one regression and the changes only reported, each counted once.
    assert lines[-1] == f"1 regression against {old}; 2 more changes reported, not judged"
    assert sum("regression" in line for line in lines) == 1


def test_diff_json_keeps_the_symbol_beside_the_demangled_sentence(
    pair: tuple[Path, Path, str],
) -> None:
    old, new, _ = pair
    done = gate(["diff", str(old), str(new), "--json"], old.parent, clean_env(old.parent))
    assert done.returncode == 1, done.stderr
    doc = json.loads(done.stdout)
    schema = json.loads((SCHEMAS / "diff.schema.json").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator(schema).validate(doc)
    assert doc["regressions"] == 1
    assert [c for c in doc["changes"] if c["level"] == "fail"] == [
        {
            "artifact": "libk.so",
            "level": "fail",
            "rule": "dropped_kernel",
            "what": LOST,
            "kernel": SYMBOL,
        }
    ]


def test_the_run_against_its_baseline_names_the_kernel_in_every_view(
    pair: tuple[Path, Path, str],
) -> None:
    _, new, stdout = pair
    assert f"lost against ev1: {LOST}" in " ".join(stdout.split())  # the table wraps it
    assert f"FAIL libk.so: {LOST}" in stdout
    assert f"libk.so: {LOST}" in (new / "summary.md").read_text(encoding="utf-8")
    junit = (new / "junit.xml").read_text(encoding="utf-8")
    assert LOST in junit
    assert SYMBOL not in junit
    result = json.loads((new / "result.json").read_text(encoding="utf-8"))
    (change,) = [c for c in result["baseline"]["changes"] if c["level"] == "fail"]
    assert (change["what"], change["kernel"]) == (LOST, SYMBOL)
