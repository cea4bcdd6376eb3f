"""Baselines end to end: real nvcc builds of two releases of a library, real gate runs,
`cuda-gate diff` of their evidence folders, and `run --baseline` against a run stored in
a real SeaweedFS server.

The library is built three ways: release 1 for sm_90 and sm_121 with two kernels,
release 2 without sm_121 (the arch-list bug that shipped), release 3 with sm_121 but
without one kernel. Each gate run stops after inspect, so the tests mean the same on a
machine with a GPU and on one without.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import jsonschema
import pytest

from gate.attest.predicate import PREDICATE_VERSION
from gate.store.settings import STORE_VARIABLES
from gate.system import machine
from tests.s3server import WeedServer

pytestmark = pytest.mark.integration

SCHEMAS = Path(__file__).resolve().parent.parent / "gate" / "schemas"
GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
SOURCE = """\
__global__ void scale(float* x) { x[threadIdx.x] *= 2.0f; }
#ifndef NO_SHIFT
__global__ void shift(float* x) { x[threadIdx.x] += 1.0f; }
#endif
extern "C" void launch(float* x) { scale<<<1, 32>>>(x); }
"""
BOTH = ("90", "121")
BUCKET = "gate-baseline-test"
CLASS = "spark"


@dataclass(frozen=True)
class Release:
    """One built and gated release: its evidence folder and its commit."""

    evidence: Path
    revision: str


def nvcc() -> str:
    found = shutil.which("nvcc")
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail("nvcc is needed for the baseline tests")
        pytest.skip("nvcc not found: the baseline tests build a real library")
    return found


def config_text(arches: tuple[str, ...], defines: tuple[str, ...] = ()) -> str:
    gencode = ", ".join(f'"-gencode", "arch=compute_{a},code=[sm_{a},compute_{a}]"' for a in arches)
    flags = "".join(f'"{d}", ' for d in defines)
    return (
        f'host = "{machine.host_arch()}"\n'
        "smoke = false\n"
        "[[build]]\n"
        'name = "lib"\n'
        f'command = ["{{nvcc}}", "-shared", "-Xcompiler", "-fPIC", {gencode}, {flags}'
        '"-o", "libk.so", "k.cu"]\n'
        "[[artifact]]\n"
        'path = "libk.so"\n'
        "[[entry_point]]\n"
        'command = ["true"]\n'
    )


def clean_env(tmp: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in STORE_VARIABLES
        and not k.startswith(("GITHUB_", "AWS_", "CUDA_GATE_RUNNER", "RUNNER_"))
    }
    env.update(
        XDG_DATA_HOME=str(tmp / "data"),
        RUNNER_NAME="spark-01",
        AWS_CONFIG_FILE=str(tmp / "none"),
        AWS_SHARED_CREDENTIALS_FILE=str(tmp / "none"),
        CUDA_GATE_CACHE_DIR=str(tmp / "cache"),
    )
    env.update(extra)
    return env


def gate(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gate", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


class Project:
    """A git checkout of the library whose releases are committed, tagged and gated."""

    def __init__(self, root: Path, env: dict[str, str]) -> None:
        nvcc()
        self.root, self.env = root, env
        self.path = root / "kernels"
        self.path.mkdir(parents=True)
        subprocess.run([*GIT, "init", "-q"], cwd=self.path, check=True)
        subprocess.run(
            [*GIT, "remote", "add", "origin", "https://github.com/acme/kernels.git"],
            cwd=self.path,
            check=True,
        )
        (self.path / ".gitignore").write_text("libk.so\n", encoding="utf-8")
        (self.path / "k.cu").write_text(SOURCE, encoding="utf-8")

    def release(
        self,
        tag: str,
        arches: tuple[str, ...],
        defines: tuple[str, ...] = (),
        extra: tuple[str, ...] = (),
        store: bool = False,
    ) -> tuple[Release, subprocess.CompletedProcess[str]]:
        """Commit and tag a release built for ``arches``, then gate it (build and inspect)."""
        (self.path / "cuda-gate.toml").write_text(config_text(arches, defines), encoding="utf-8")
        subprocess.run([*GIT, "add", "-A"], cwd=self.path, check=True)
        subprocess.run([*GIT, "commit", "-qm", tag], cwd=self.path, check=True)
        subprocess.run([*GIT, "tag", tag], cwd=self.path, check=True)
        revision = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=self.path, capture_output=True, text=True, check=True
        ).stdout.strip()
        evidence = self.root / f"ev-{tag}"
        args = ["run", "--target", "sm_90", "--stop-after", "inspect", "--no-cuobjdump"]
        args += ["--evidence", str(evidence), "--build-dir", str(self.root / f"build-{tag}")]
        args += ["--quiet", *extra, *([] if store else ["--no-store"])]
        done = gate(args, self.path, self.env)
        assert (evidence / "result.json").is_file(), done.stdout + done.stderr
        return Release(evidence, revision), done


@pytest.fixture(scope="module")
def releases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Release]:
    """v1 (sm_90 + sm_121, two kernels), v2 (no sm_121), v3 (no kernel `shift`)."""
    root = tmp_path_factory.mktemp("baseline")
    project = Project(root, clean_env(root))
    return {
        "v1": project.release("v1", BOTH)[0],
        "v2": project.release("v2", ("90",))[0],
        "v3": project.release("v3", BOTH, ("-DNO_SHIFT",))[0],
    }


def diff(
    old: Path | str, new: Path | str, cwd: Path, *more: str
) -> subprocess.CompletedProcess[str]:
    return gate(["diff", str(old), str(new), *more], cwd, clean_env(cwd))


def schema(name: str) -> jsonschema.Draft202012Validator:
    loaded = json.loads((SCHEMAS / name).read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(loaded)
    return jsonschema.Draft202012Validator(loaded)


def test_a_release_that_lost_sm_121_fails_the_diff_naming_what_was_lost(
    releases: dict[str, Release], tmp_path: Path
) -> None:
    done = diff(releases["v1"].evidence, releases["v2"].evidence, tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "FAIL libk.so: sm_121 dropped" in done.stdout
    assert "FAIL libk.so: compute_121 dropped" in done.stdout
    assert "FAIL libk.so: device 12.1 lost its native route: exact SASS (sm_121)" in done.stdout
    # The table: before / after / change, the target row and the bytes row.
    row = next(line for line in done.stdout.splitlines() if "SASS targets" in line)
    assert row.split() == ["libk.so", "SASS", "targets", "sm_90,", "sm_121", "sm_90", "-sm_121"]
    assert "device code bytes" in done.stdout
    assert "3 regressions against" in done.stdout.splitlines()[-1]


def test_a_release_that_lost_one_kernel_fails_the_diff_naming_the_kernel(
    releases: dict[str, Release], tmp_path: Path
) -> None:
    done = diff(releases["v1"].evidence, releases["v3"].evidence, tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    lost = [line for line in done.stdout.splitlines() if line.startswith("FAIL")]
    # One kernel dropped from the source: one regression, every target it left named.
    assert lost == [
        "FAIL libk.so: lost kernel shift(float*) from sm_90, sm_121, compute_90, compute_121"
    ]
    assert done.stdout.splitlines()[-1].startswith("1 regression against")


def test_a_release_compared_with_itself_passes_and_gains_are_only_reported(
    releases: dict[str, Release], tmp_path: Path
) -> None:
    same = diff(releases["v1"].evidence, releases["v1"].evidence, tmp_path)
    assert same.returncode == 0, same.stdout + same.stderr
    assert same.stdout.splitlines()[-1].startswith("no regression against")
    # v2 -> v1 adds sm_121 back: reported, never a failure.
    gained = diff(releases["v2"].evidence, releases["v1"].evidence, tmp_path)
    assert gained.returncode == 0, gained.stdout + gained.stderr
    assert "+sm_121" in gained.stdout
    assert "FAIL" not in gained.stdout


def test_diff_json_is_versioned_and_matches_its_schema(
    releases: dict[str, Release], tmp_path: Path
) -> None:
    done = diff(releases["v1"].evidence, releases["v2"].evidence, tmp_path, "--json")
    assert done.returncode == 1, done.stderr
    doc = json.loads(done.stdout)
    schema("diff.schema.json").validate(doc)
    assert doc["version"] == 2
    assert doc["regressions"] == 3
    result = releases["v1"].evidence / "result.json"
    assert doc["baseline"]["result_sha256"] == hashlib.sha256(result.read_bytes()).hexdigest()
    assert doc["baseline"]["revision"] == releases["v1"].revision
    assert {(c["rule"], c["what"]) for c in doc["changes"] if c["level"] == "fail"} == {
        ("dropped_target", "sm_121 dropped"),
        ("dropped_target", "compute_121 dropped"),
        (
            "lost_native_route",
            (
                "device 12.1 lost its native route: exact SASS (sm_121) -> "
                "PTX JIT (compute_90, ISA 9.0, driver >= 13.0)"
            ),
        ),
    }


def test_a_rule_configured_to_warn_does_not_fail(
    releases: dict[str, Release], tmp_path: Path
) -> None:
    (tmp_path / "cuda-gate.toml").write_text(
        '[baseline]\ndropped_target = "warn"\nlost_native_route = "warn"\n', encoding="utf-8"
    )
    done = diff(releases["v1"].evidence, releases["v2"].evidence, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "WARN libk.so: sm_121 dropped" in done.stdout
    assert "(3 warnings)" in done.stdout.splitlines()[-1]
    # The kernel rule still fails.
    kernel = diff(releases["v1"].evidence, releases["v3"].evidence, tmp_path)
    assert kernel.returncode == 1, kernel.stdout + kernel.stderr


@pytest.mark.parametrize(
    ("table", "message"),
    [
        (
            'dropped_targets = "warn"',
            "baseline.dropped_targets: unknown key (known: dropped_artifact",
        ),
        ('dropped_target = "ignore"', "baseline.dropped_target: 'ignore': expected one of"),
        ("dropped_target = 1", "baseline.dropped_target"),
    ],
)
def test_a_bad_baseline_table_is_one_config_line(
    releases: dict[str, Release], tmp_path: Path, table: str, message: str
) -> None:
    (tmp_path / "cuda-gate.toml").write_text(f"[baseline]\n{table}\n", encoding="utf-8")
    done = diff(releases["v1"].evidence, releases["v2"].evidence, tmp_path)
    assert done.returncode == 7, done.stdout + done.stderr
    assert message in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert "Traceback" not in done.stderr


def test_what_is_not_evidence_is_bad_input(releases: dict[str, Release], tmp_path: Path) -> None:
    absent = diff(tmp_path / "nowhere", releases["v2"].evidence, tmp_path)
    assert absent.returncode == 6, absent.stderr
    assert f"{tmp_path / 'nowhere'}: no such evidence folder" in absent.stderr
    (tmp_path / "plain").mkdir()
    plain = diff(tmp_path / "plain", releases["v2"].evidence, tmp_path)
    assert plain.returncode == 6, plain.stderr
    assert "result.json: no run record" in plain.stderr


def test_run_with_a_folder_baseline_records_the_loss_in_every_report(
    releases: dict[str, Release], tmp_path: Path
) -> None:
    project = Project(tmp_path, clean_env(tmp_path))
    base = releases["v1"].evidence
    ran, done = project.release("v2", ("90",), extra=("--baseline", str(base)))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "libk.so: compared with the baseline: lost against" in done.stdout
    result = json.loads((ran.evidence / "result.json").read_text(encoding="utf-8"))
    schema("result.schema.json").validate(result)
    (check,) = [c for c in result["checks"] if c["classname"] == "gate.baseline"]
    assert (check["state"], check["cause"]) == ("failed", "wrong-target")
    assert "sm_121 dropped" in check["message"]
    digest = hashlib.sha256((base / "result.json").read_bytes()).hexdigest()
    assert result["baseline"]["result_sha256"] == digest
    summary = (ran.evidence / "summary.md").read_text(encoding="utf-8")
    assert "### Baseline" in summary
    assert "| libk.so | SASS targets | sm_90, sm_121 | sm_90 | -sm_121 |" in summary
    predicate = json.loads((ran.evidence / "manifest.json").read_text(encoding="utf-8"))[
        "predicate"
    ]
    assert predicate["version"] == PREDICATE_VERSION  # baseline is signed since version 3
    assert predicate["baseline"]["result_sha256"] == digest
    assert predicate["baseline"]["regressions"] == 3
    junit = (ran.evidence / "junit.xml").read_text(encoding="utf-8")
    assert 'classname="default.gate.baseline"' in junit


def test_run_against_an_unchanged_baseline_passes_its_check(
    releases: dict[str, Release], tmp_path: Path
) -> None:
    project = Project(tmp_path, clean_env(tmp_path))
    ran, done = project.release("v1", BOTH, extra=("--baseline", str(releases["v1"].evidence)))
    result = json.loads((ran.evidence / "result.json").read_text(encoding="utf-8"))
    (check,) = [c for c in result["checks"] if c["classname"] == "gate.baseline"]
    assert check["state"] == "passed", done.stdout + done.stderr
    assert result["baseline"]["regressions"] == 0


def test_baseline_from_a_run_stored_in_seaweedfs(tmp_path: Path, server: WeedServer) -> None:
    """v1 is gated and stored under its revision; v2 names it by tag with --baseline."""
    server.client().create_bucket(Bucket=BUCKET)
    env = clean_env(
        tmp_path,
        **server.env(),
        CUDA_GATE_STORE=f"s3://{BUCKET}/ci",
        CUDA_GATE_SPOOL_DIR=str(tmp_path / "spool"),
        CUDA_GATE_RUNNER_CLASS=CLASS,
    )
    project = Project(tmp_path, env)
    v1, done = project.release("v1", BOTH, store=True)
    assert f"evidence stored: s3://{BUCKET}/ci" in done.stdout, done.stdout + done.stderr
    v2, done = project.release("v2", ("90",), extra=("--baseline", "v1"), store=True)
    assert done.returncode == 1, done.stdout + done.stderr
    result = json.loads((v2.evidence / "result.json").read_text(encoding="utf-8"))
    digest = hashlib.sha256((v1.evidence / "result.json").read_bytes()).hexdigest()
    assert result["baseline"]["result_sha256"] == digest
    assert result["baseline"]["revision"] == v1.revision
    assert result["baseline"]["location"].startswith(f"s3://{BUCKET}/ci/acme/kernels/{v1.revision}")
    assert "sm_121 dropped" in done.stdout
    # `diff` names stored runs the same way: by tag, by revision.
    by_tag = gate(["diff", "v1", str(v2.evidence)], project.path, env)
    assert by_tag.returncode == 1, by_tag.stdout + by_tag.stderr
    assert "FAIL libk.so: sm_121 dropped" in by_tag.stdout
    by_revision = gate(["diff", v1.revision, "v2", "--json"], project.path, env)
    assert by_revision.returncode == 1, by_revision.stderr
    doc = json.loads(by_revision.stdout)
    assert (doc["baseline"]["revision"], doc["run"]["revision"]) == (v1.revision, v2.revision)
    # No accepted run is stored (no GPU ran either): latest-accepted names nothing, exit 13.
    latest = gate(["diff", "latest-accepted", str(v2.evidence)], project.path, env)
    assert latest.returncode == 13, latest.stdout + latest.stderr
    assert f"no accepted run of runner class {CLASS} is stored for acme/kernels" in latest.stderr
    other = gate(["diff", "v1", "v2", "--runner-class", "h200"], project.path, env)
    assert other.returncode == 13, other.stderr
    assert "no complete run of runner class h200 is stored for v1" in other.stderr
    # The release's baseline job: the run downloaded where the store's credentials are,
    # for a GPU job that gets only the folder (gate.yml).
    fetched = tmp_path / "fetched"
    got = gate(["evidence", "baseline", "v1", "--dest", str(fetched)], project.path, env)
    assert got.returncode == 0, got.stdout + got.stderr
    assert f"of spark-01 at {v1.revision[:12]} (not accepted) into {fetched}" in got.stdout
    assert hashlib.sha256((fetched / "result.json").read_bytes()).hexdigest() == digest
    none = gate(["evidence", "baseline", "latest-accepted", "--dest", str(tmp_path / "n")],
                project.path, env)  # fmt: skip
    assert none.returncode == 13, none.stdout + none.stderr
    assert not (tmp_path / "n").exists()
