"""Each exit status means what README "Exit statuses" says, through the real command.

Every case is a defect found by running `cuda-gate` (issue 22, item 8): a usage
error that exited 7, a configuration error that exited 10, a missing run that
exited 20, a store or a target that could never work found only after a whole run.
Each asserts the status, the one error line, and that nothing was left behind.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from gate import proc
from gate.attest.manifest import ENVELOPE_FILE, MANIFEST_FILE, PREDICATE_TYPE, STATEMENT_TYPE
from gate.attest.signing import generate_key_pair
from gate.errors import ExitCode

GOLDEN = Path(__file__).parent / "golden"

pytestmark = pytest.mark.integration


def gate(cwd: Path, *args: str, env: dict[str, str] | None = None) -> proc.Result:
    """`cuda-gate ARGS` as a real process in ``cwd`` (HOME and XDG are the test's own)."""
    merged = {**os.environ, **(env or {})}
    return proc.run([sys.executable, "-m", "gate", *args], cwd=cwd, base_env=merged, timeout=300)


def error_line(result: proc.Result) -> str:
    """The last stderr line, after checking it is the only error and no traceback."""
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    errors = [line for line in lines if "error:" in line]
    assert len(errors) == 1, result.stderr
    return errors[0]


def git_checkout(folder: Path) -> Path:
    """A real git repository with one commit and an origin, as a project's checkout."""
    folder.mkdir(exist_ok=True)
    for argv in (
        ["git", "init", "-q", "."],
        ["git", "remote", "add", "origin", "https://github.com/acme/kernels"],
        ["git", "-c", "user.name=t", "-c", "user.email=t@t.invalid", "commit", "-q",
         "--allow-empty", "-m", "one"],
    ):  # fmt: skip
        result = proc.run(argv, cwd=folder, timeout=60)
        assert result.ok, result.stderr
    return folder


def test_an_unparsable_target_is_a_usage_error(tmp_path: Path) -> None:
    result = gate(tmp_path, "run", "--target=sm121", "--no-store")
    assert result.returncode == ExitCode.USAGE
    assert error_line(result) == (
        "cuda-gate run: error: argument --target: not a CUDA target "
        "(like sm_121, sm_90a, sm_120f, 12.1 or 121): 'sm121'"
    )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (("--device", "13"), "argument --device: ambiguous compute capability '13': write 13.0"),
        (("--device", "9"), "argument --device: ambiguous compute capability '9': write 9.0"),
        (
            ("--require-device", "12"),
            "argument --require-device: ambiguous compute capability '12': write 12.0",
        ),
    ],
)
def test_a_bare_device_number_that_reads_two_ways_is_refused(
    tmp_path: Path, args: tuple[str, ...], line: str
) -> None:
    result = gate(tmp_path, "inspect", "--no-detect", *args, str(GOLDEN / "libkernels.so"))
    assert result.returncode == ExitCode.USAGE
    assert error_line(result).startswith(f"cuda-gate inspect: error: {line} (or sm_")
    assert result.stdout == ""


def test_an_unambiguous_device_number_still_reads_as_before(tmp_path: Path) -> None:
    result = gate(tmp_path, "inspect", "--no-detect", "--json", "--device", "90",
                  "--device", "121", str(GOLDEN / "libkernels.so"))  # fmt: skip
    assert result.returncode == 0, result.stderr
    (art,) = json.loads(result.stdout)["artifacts"]
    assert [d["capability"] for d in art["devices"]] == ["9.0", "12.1"]


def test_a_public_key_as_signing_key_is_a_configuration_error(tmp_path: Path) -> None:
    pub = tmp_path / "cuda-gate.pub"
    pub.write_bytes(generate_key_pair().public_pem)
    work = tmp_path / "work"
    work.mkdir()
    for argv in (("run", "--no-store"), ("sign", str(work / "gate-evidence"))):
        result = gate(work, *argv, "--signing-key", str(pub))
        assert result.returncode == ExitCode.CONFIG, result.stderr
        assert error_line(result) == (
            f"cuda-gate: error: {pub}: a public key, not the private signing key (sign with "
            "the private key, the other file `cuda-gate keygen` wrote (cuda-gate.key))"
        )
        assert list(work.iterdir()) == []


def _unsigned_run(folder: Path) -> Path:
    folder.mkdir()
    statement = {"_type": STATEMENT_TYPE, "subject": [], "predicateType": PREDICATE_TYPE}
    (folder / MANIFEST_FILE).write_text(json.dumps({**statement, "predicate": {}}) + "\n")
    return folder


def test_verify_of_an_unsigned_run_says_evidence_missing(tmp_path: Path) -> None:
    pub = tmp_path / "cuda-gate.pub"
    pub.write_bytes(generate_key_pair().public_pem)
    evidence = _unsigned_run(tmp_path / "gate-evidence")
    hint = f"(sign it with `cuda-gate sign {evidence}`, then verify {ENVELOPE_FILE})"
    absent = gate(tmp_path, "verify", str(evidence / ENVELOPE_FILE), "--key", str(pub))
    assert absent.returncode == ExitCode.EVIDENCE_CHANGED
    assert error_line(absent) == (
        f"cuda-gate: error: {evidence / ENVELOPE_FILE}: not found; the run wrote an unsigned "
        f"{MANIFEST_FILE} only {hint}"
    )
    given = gate(tmp_path, "verify", str(evidence / MANIFEST_FILE), "--key", str(pub))
    assert given.returncode == ExitCode.EVIDENCE_CHANGED
    assert error_line(given) == (
        f"cuda-gate: error: {evidence / MANIFEST_FILE}: an unsigned manifest (an in-toto "
        f"Statement), not its signed envelope {hint}"
    )


def test_evidence_get_of_what_the_store_lacks_says_missing_not_unreachable(
    tmp_path: Path,
) -> None:
    checkout = git_checkout(tmp_path / "checkout")
    store = tmp_path / "store"
    store.mkdir()
    common = ("evidence", "get", "--store", str(store), "--repository", "acme/kernels")
    nobody = gate(checkout, *common, "--runner", "nobody")
    assert nobody.returncode == ExitCode.EVIDENCE_CHANGED
    assert error_line(nobody) == (
        "cuda-gate: error: no complete run of runner 'nobody' is stored for this revision "
        "(`cuda-gate evidence list` shows the stored runs)"
    )
    run = gate(checkout, *common, "--runner", "nobody", "--run", "20261129T180000Z-1a2b3c")
    assert run.returncode == ExitCode.EVIDENCE_CHANGED
    assert error_line(run).endswith(
        "/nobody/20261129T180000Z-1a2b3c: no index, the run is incomplete or absent "
        "(`cuda-gate evidence list` shows the stored runs)"
    )
    assert sorted(p.name for p in checkout.iterdir()) == [".git"]


@pytest.mark.parametrize(
    ("store", "env", "line"),
    [
        (
            "s3://Bad_Bucket!/x",
            {},
            (
                "--store: bucket name 'Bad_Bucket!' holds characters other than letters, "
                "digits, '.', '-' and '_'"
            ),
        ),
        (
            "s3://bucket/x",
            {"CUDA_GATE_S3_ENDPOINT": "notaurl"},
            (
                "environment variable CUDA_GATE_S3_ENDPOINT: 'notaurl' is not an endpoint URL "
                "(http://host:port or https://host)"
            ),
        ),
        ("{file}/sub", {}, "the evidence store {file}/sub: {file} is not a folder"),
    ],
)
def test_a_store_that_cannot_work_fails_before_the_run(
    tmp_path: Path, store: str, env: dict[str, str], line: str
) -> None:
    checkout = git_checkout(tmp_path / "checkout")
    a_file = tmp_path / "a-file"
    a_file.write_text("not a folder\n")
    result = gate(checkout, "run", "--store", store.format(file=a_file), env=env)
    assert result.returncode == ExitCode.CONFIG, result.stderr
    assert error_line(result) == "cuda-gate: error: " + line.format(file=a_file)
    assert sorted(p.name for p in checkout.iterdir()) == [".git"]  # no evidence, no build


def test_a_target_the_toolkit_cannot_build_fails_before_anything_runs(tmp_path: Path) -> None:
    checkout = git_checkout(tmp_path / "checkout")
    calls = tmp_path / "nvcc-calls"
    nvcc = tmp_path / "nvcc"  # a real executable answering as CUDA 13.0's nvcc does
    nvcc.write_text(
        f'#!/bin/sh\necho "$@" >> {calls}\n'
        'if [ "$1" = --list-gpu-code ]; then printf "sm_90\\nsm_100\\nsm_120\\nsm_121\\n"; '
        "exit 0; fi\necho 'nvcc fatal : not expected here' >&2; exit 1\n"
    )
    nvcc.chmod(0o755)
    store = tmp_path / "store"
    result = gate(checkout, "run", "--target", "sm_999", "--nvcc", str(nvcc),
                  "--store", str(store))  # fmt: skip
    assert result.returncode == ExitCode.TOOL, result.stderr
    assert error_line(result) == (
        "cuda-gate: error: sm_999 is not in this toolkit's supported targets (sm_90 sm_100 "
        "sm_120 sm_121) (install a CUDA toolkit that lists it; do not substitute an older "
        "target)"
    )
    assert result.stdout == ""
    assert calls.read_text().splitlines() == ["--list-gpu-code"]  # nothing built
    assert sorted(p.name for p in checkout.iterdir()) == [".git"]
    assert not store.exists()
