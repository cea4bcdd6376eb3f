"""The workflows and the composite action keep the hardening and the shape the issue asks for.

`nox -s lint` runs zizmor (auditor persona), check-jsonschema and actionlint on the same
files; these tests pin the project's own rules, reading the YAML as GitHub does.
"""

from __future__ import annotations

import importlib.util
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = ROOT / ".github" / "workflows"
FILES = sorted(WORKFLOWS.glob("*.yml"))
ACTION = ROOT / "action.yml"
PINNED = [*FILES, ACTION]
USES = re.compile(r"^\s*(?:-\s+)?uses:\s*(\S+)(.*)$", re.M)
# The jobs that may mint an OIDC token or write attestations, and the callers that grant them.
ID_TOKEN_JOBS = {
    ("gate.yml", "store"),
    ("gate.yml", "baseline"),
    ("release.yml", "attest"),
    ("release.yml", "release"),
    ("release.yml", "cuda-gate"),
    ("pr.yml", "cuda-gate"),
}
ATTESTATION_JOBS = {("release.yml", "attest"), ("release.yml", "release")}
UPLOAD = "actions/upload-artifact"
DOWNLOAD = "actions/download-artifact"
OWN_SOURCE = {"repository": "${{ job.workflow_repository }}", "ref": "${{ job.workflow_sha }}"}


def _load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
    return data


def _jobs(path: Path) -> dict[str, dict[str, Any]]:
    jobs: dict[str, dict[str, Any]] = _load(path)["jobs"]
    return jobs


def test_there_are_the_four_workflows_the_action_and_dependabot() -> None:
    assert {f.name for f in FILES} == {"aarch64.yml", "gate.yml", "pr.yml", "release.yml"}
    assert _load(ACTION)["runs"]["using"] == "composite"
    ecosystems = {u["package-ecosystem"] for u in _load(ROOT / ".github/dependabot.yml")["updates"]}
    assert ecosystems == {"github-actions", "pip"}


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_no_default_permissions_and_no_pull_request_target(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert _load(path)["permissions"] == {}
    code = "\n".join(line.split("#", 1)[0] for line in text.splitlines())
    assert "pull_request_target" not in code
    assert "secrets: inherit" not in text


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_oidc_and_attestation_rights_only_where_they_are_used(path: Path) -> None:
    for name, job in _jobs(path).items():
        permissions = job.get("permissions")
        assert isinstance(permissions, dict), f"{path.name}:{name} sets no permissions"
        if "id-token" in permissions:
            assert (path.name, name) in ID_TOKEN_JOBS, f"{path.name}:{name}"
        if "attestations" in permissions:
            assert (path.name, name) in ATTESTATION_JOBS, f"{path.name}:{name}"


@pytest.mark.parametrize("path", PINNED, ids=lambda p: p.name)
def test_actions_are_pinned_by_commit_with_a_version_comment(path: Path) -> None:
    for ref, rest in USES.findall(path.read_text(encoding="utf-8")):
        if ref.startswith("./"):
            continue
        assert re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", ref), ref
        assert re.match(r"\s+# v\d+\.\d+\.\d+", rest), f"{ref}: no version comment"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_no_checkout_keeps_the_token(path: Path) -> None:
    for name, job in _jobs(path).items():
        for step in job.get("steps", []):
            if str(step.get("uses", "")).startswith("actions/checkout@"):
                assert step["with"]["persist-credentials"] is False, f"{path.name}:{name}"


def test_every_job_uses_this_workflows_own_cuda_gate() -> None:
    """A job that runs ./cuda-gate first checks out the commit the caller pinned."""
    action_inputs = set(_load(ACTION)["inputs"])
    users = 0
    for name, job in _jobs(WORKFLOWS / "gate.yml").items():
        steps = job.get("steps", [])
        for i, step in enumerate(steps):
            if step.get("uses") != "./cuda-gate":
                continue
            users += 1
            sources = [
                s["with"]
                for s in steps[:i]
                if str(s.get("uses", "")).startswith("actions/checkout@")
                and s["with"].get("path") == "cuda-gate"
            ]
            assert sources, name
            assert {k: sources[-1][k] for k in OWN_SOURCE} == OWN_SOURCE
            assert set(step.get("with", {})) <= action_inputs, name
    assert users == 6  # classes, baseline, gate, sign, store, report
    for job in _jobs(WORKFLOWS / "release.yml").values():
        for step in job.get("steps", []):
            if step.get("uses") == "./":
                assert set(step.get("with", {})) <= action_inputs


def test_the_gpu_job_is_isolated_and_recorded() -> None:
    gate = _jobs(WORKFLOWS / "gate.yml")["gate"]
    assert gate["environment"] == "${{ inputs.approval-environment }}"
    assert gate["runs-on"] == "${{ matrix.runs_on }}"
    assert gate["container"]["options"] == "--gpus all"
    assert gate["env"]["CUDA_GATE_IMAGE"] == "${{ matrix.container }}"
    # The digest is the reference's pin, read from inside (gate.container.info), not a variable.
    assert "CUDA_GATE_IMAGE_DIGEST" not in gate["env"]
    assert gate["permissions"] == {"contents": "read"}
    runs = [s.get("run", "") for s in gate["steps"]]
    assert sum("find . -mindepth 1 -delete" in r for r in runs) == 2
    [step] = [s for s in gate["steps"] if s.get("uses") == "./cuda-gate"]
    # No store credentials in the job that runs the checkout's code.
    assert "--no-store" in step["with"]["args"]
    assert not [k for s in gate["steps"] for k in s.get("env", {}) if k.startswith("AWS_")]
    action = ACTION.read_text(encoding="utf-8")
    assert 'export CUDA_CACHE_PATH="$RUNNER_TEMP/cuda-gate-jit-cache"' in action
    assert '"${GATE_PACKAGE:-$ACTION_PATH}"' in action


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_the_store_is_reached_through_oidc_with_static_keys_only_as_fallback(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    # Static keys never go straight into the AWS variables: they would win over the role.
    assert not re.search(r"AWS_(ACCESS_KEY_ID|SECRET_ACCESS_KEY): \$\{\{", text)
    for job in _jobs(path).values():
        for step in job.get("steps", []):
            if str(step.get("uses", "")).startswith("aws-actions/configure-aws-credentials@"):
                assert "role-to-assume" in step["with"]
                assert "aws-access-key-id" not in step["with"]
    if path.name == "gate.yml":
        store = _jobs(path)["store"]
        [aws] = [s for s in store["steps"] if "configure-aws-credentials" in str(s.get("uses"))]
        assert aws["with"]["role-to-assume"] == "${{ inputs.store-role-to-assume }}"
        assert aws["if"] == "${{ inputs.store-role-to-assume != '' }}"


def test_release_attests_the_gate_predicate_and_the_wheel() -> None:
    jobs = _jobs(WORKFLOWS / "release.yml")
    attested = {
        s["with"]["predicate-type"]
        for s in jobs["attest"]["steps"]
        if str(s.get("uses", "")).startswith("actions/attest@")
    }
    assert attested == {
        "https://cuda-gate.dev/attestation/gate-run/v1",
        "https://in-toto.io/attestation/test-result/v0.1",
    }
    provenance = [
        s["with"]
        for s in jobs["release"]["steps"]
        if str(s.get("uses", "")).startswith("actions/attest-build-provenance@")
    ]
    assert provenance == [
        {"subject-checksums": "${{ runner.temp }}/published/SHA256SUMS"},
        {"subject-path": "${{ runner.temp }}/dist/*.whl"},
    ]


def _steps_using(job: dict[str, Any], action: str) -> list[dict[str, Any]]:
    return [s for s in job.get("steps", []) if str(s.get("uses", "")).startswith(f"{action}@")]


def _runs(job: dict[str, Any]) -> str:
    return "\n".join(str(s.get("run", "")) for s in job.get("steps", []))


def test_the_release_builds_once_and_every_later_job_waits_for_it() -> None:
    jobs = _jobs(WORKFLOWS / "release.yml")
    assert jobs["cuda-gate"]["needs"] == "build"
    assert jobs["attest"]["needs"] == ["build", "cuda-gate"]
    assert jobs["release"]["needs"] == ["build", "cuda-gate", "attest"]
    build = jobs["build"]
    # GitHub-hosted and ephemeral, with nothing to leak: no environment, no OIDC, no secret.
    assert str(build["runs-on"]).startswith("ubuntu-")
    assert build["permissions"] == {"contents": "read"}
    assert "environment" not in build
    assert _SECRET_REFERENCE.search(yaml.safe_dump(build)) is None
    # Nothing else builds a release file: the only cmake and pip wheel are the build job's.
    for name, job in jobs.items():
        if name != "build":
            assert not re.search(r"cmake|pip wheel", _runs(job)), name


def test_the_gated_bytes_are_the_attested_and_the_published_ones() -> None:
    """One artifact, written once by the build job, is what the GPU job gates (--prebuilt
    with its SHA256SUMS), what the attest job attests (--published, the same list), and
    what the release publishes (checked against the list, and only the listed files)."""
    jobs = _jobs(WORKFLOWS / "release.yml")
    uploads = [(name, s["with"]) for name, job in jobs.items() for s in _steps_using(job, UPLOAD)]
    assert ("build", {**uploads[0][1], "name": "release-cuda"}) == uploads[0]
    assert uploads[0][1]["path"] == "${{ runner.temp }}/prebuilt.tar"
    assert [n for n, u in uploads if u["name"] == "release-cuda"] == ["build"]  # written once
    assert all(u.get("overwrite") is not True for _, u in uploads)
    build = _runs(jobs["build"])
    assert "sha256sum libkernels.so app > SHA256SUMS" in build
    assert 'tar -cf "$RUNNER_TEMP/prebuilt.tar" -C "$stage" SHA256SUMS libkernels.so app' in build
    # Gated: the reusable workflow unpacks that artifact where the configuration's
    # artifacts are, and runs the gate with --prebuilt on its list.
    called = jobs["cuda-gate"]["with"]
    assert called["prebuilt-artifact"] == "release-cuda"
    config = tomllib.loads((ROOT / "examples/dlopen-kernels/cuda-gate.toml").read_text())
    assert called["gate-args"] == "--config examples/dlopen-kernels/cuda-gate.toml"
    folder = Path(called["prebuilt-dir"]).relative_to("examples/dlopen-kernels")
    assert {a["path"] for a in config["artifact"]} == {
        f"{folder}/{n}" for n in ("libkernels.so", "app")
    }
    gate = _jobs(WORKFLOWS / "gate.yml")["gate"]
    [fetch] = [s for s in _steps_using(gate, DOWNLOAD) if "prebuilt" in s["name"]]
    assert fetch["with"] == {
        "name": "${{ inputs.prebuilt-artifact }}",
        "path": "${{ runner.temp }}/prebuilt",
    }
    assert fetch["if"] == "${{ inputs.prebuilt-artifact != '' }}"
    [unpack] = [s for s in gate["steps"] if "prebuilt.tar" in str(s.get("run", ""))]
    assert unpack["env"]["PREBUILT_DIR"] == "project/${{ inputs.prebuilt-dir }}"
    [step] = [s for s in gate["steps"] if s.get("uses") == "./cuda-gate"]
    assert "format('--prebuilt {0}/SHA256SUMS', inputs.prebuilt-dir)" in step["with"]["args"]
    order = [s.get("name") for s in gate["steps"]]
    assert order.index(unpack["name"]) < order.index(step["name"])
    # Attested: the same artifact, its list passed as --published, and the subjects
    # actions/attest signs are the file that command wrote from it.
    attest = jobs["attest"]
    assert [s["with"]["name"] for s in _steps_using(attest, DOWNLOAD)] == [
        "gate-evidence-${{ matrix.name }}",
        "release-cuda",
    ]
    assert '--published "$published/SHA256SUMS" --out "$RUNNER_TEMP/attest"' in _runs(attest)
    subjects = {s["with"]["subject-checksums"] for s in _steps_using(attest, "actions/attest")}
    assert subjects == {"${{ runner.temp }}/attest/subjects.sha256"}
    # Published: the same artifact, checked against its list, and only the listed files.
    release = jobs["release"]
    assert "release-cuda" in [s["with"]["name"] for s in _steps_using(release, DOWNLOAD)]
    runs = _runs(release)
    assert 'cd "$published" && sha256sum --check --strict SHA256SUMS' in runs
    assert 'done < "$published/SHA256SUMS"' in runs
    assert '"${assets[@]}" "$RUNNER_TEMP"/dist/*.whl' in runs
    assert runs.index("sha256sum --check") < runs.index("gh release create")


def test_forks_wait_for_approval_and_get_no_status_token() -> None:
    text = (WORKFLOWS / "pr.yml").read_text(encoding="utf-8")
    assert "'cuda-gate-fork'" in text
    assert (
        "post-status: ${{ github.event.pull_request.head.repo.full_name == github.repository }}"
        in text
    )
    assert "cancel-in-progress: true" in text
    assert "store" not in _jobs(WORKFLOWS / "pr.yml")["cuda-gate"]["with"]


def test_the_readme_adoption_names_the_commit_once() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "uses: OWNER/cuda-gate/.github/workflows/gate.yml@<commit sha>" in readme
    assert "uses: OWNER/cuda-gate@<commit sha>" in readme
    assert 'gate-package: "cuda-gate @ git+' not in readme


def _lint_module() -> Any:
    spec = importlib.util.spec_from_file_location("lint_workflows", ROOT / "ci/lint_workflows.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_only_the_listed_actionlint_gaps_are_excused() -> None:
    lint = _lint_module()
    gaps = [
        'x.yml:3:5: undefined variable "vars". available variables are "env" [expression]',
        'x.yml:4:7: unknown permission scope "attestations". all available [permissions]',
        'x.yml:5:9: property "workflow_sha" is not defined in object type {container: {id: x}}',
        'x.yml:6:3: label "ubuntu-24.04-arm" is unknown. available labels are "ubuntu-latest"',
    ]
    assert all(lint.known_gap(line) for line in gaps)
    real = [
        'x.yml:3:5: undefined variable "varz". available variables are "env" [expression]',
        'x.yml:4:7: unknown permission scope "attestation". all available [permissions]',
        'x.yml:5:9: property "workflow_shaa" is not defined in object type {container} [x]',
        "x.yml:6:1: shellcheck reported issue in this script: SC2086 [shellcheck]",
        'x.yml:7:3: label "ubuntu-24.04-armv9" is unknown. available labels are "ubuntu-latest"',
        'x.yml:8:3: label "gpu-box" is unknown. available labels are "ubuntu-latest"',
    ]
    assert not [line for line in real if lint.known_gap(line)]


# A step runs the project's code when it runs the gate (the composite action unless
# install-only, `cuda-gate run`, `nox -s gate`): its builds and entry points run there.
_RUNS_THE_GATE = re.compile(
    r"nox\b[^\n]*-s\s*gate\b|cuda-gate\"?\s+run\b|\$\{?CUDA_GATE\}?\"?\s+run\b"
)
_SECRET_REFERENCE = re.compile(r"secrets\.|github\.token")


# A release build runs the project's own build files (CMakeLists.txt, setup hooks) too.
_BUILDS_THE_PROJECT = re.compile(r"cmake\s+--build\b|pip\s+wheel\b")


def _runs_project_code(step: dict[str, Any]) -> bool:
    uses = str(step.get("uses", ""))
    if uses in ("./cuda-gate", "./") and step.get("with", {}).get("install-only") != "true":
        return True
    run = str(step.get("run", ""))
    return _RUNS_THE_GATE.search(run) is not None or _BUILDS_THE_PROJECT.search(run) is not None


def test_no_step_that_runs_project_code_sees_a_signing_key_or_store_credential() -> None:
    """Nothing that runs project code holds a secret: not its step, not its job, not the
    workflow (a build can read its step's shell's environment through /proc), and its
    job neither mints OIDC tokens (the runner gives every step the request token) nor
    exports cloud credentials for later steps."""
    from gate.guard.redact import GATE_SECRETS

    def clean(scope: object, where: str) -> None:
        text = yaml.safe_dump(scope)
        assert _SECRET_REFERENCE.search(text) is None, f"{where} references a secret"
        if isinstance(scope, dict):
            assert not set(scope) & GATE_SECRETS, f"{where} sets a gate secret"

    gated = 0
    for path in FILES:
        workflow = _load(path)
        for name, job in workflow["jobs"].items():
            steps = job.get("steps", [])
            if not any(_runs_project_code(s) for s in steps):
                continue
            gated += 1
            where = f"{path.name}: job {name}"
            clean(workflow.get("env", {}), f"{path.name}: the workflow's env")
            clean(job, where)  # every step, its env and inputs, the job's env
            assert job.get("permissions", {}).get("id-token") != "write", where
            assert not any("configure-aws-credentials" in str(s.get("uses")) for s in steps), where
    assert gated == 2  # gate.yml's GPU job, release.yml's build job
    for step in _load(ACTION)["runs"]["steps"]:
        if _RUNS_THE_GATE.search(str(step.get("run", ""))):
            clean(step, f"action.yml: step {step['name']}")
    # The key goes only to the sign job, on a control runner, which runs no project code.
    jobs = _jobs(WORKFLOWS / "gate.yml")
    holders = [n for n, j in jobs.items() if "secrets.CUDA_GATE_SIGNING_KEY" in yaml.safe_dump(j)]
    assert holders == ["sign"]
    sign = jobs["sign"]
    assert sign["runs-on"] == "${{ fromJSON(inputs.control-runs-on) }}"
    runs = "\n".join(str(s.get("run", "")) for s in sign["steps"])
    assert '"$CUDA_GATE" sign "$RUNNER_TEMP/evidence"' in runs
    checkouts = [s for s in sign["steps"] if str(s.get("uses", "")).startswith("actions/checkout")]
    assert [s["with"]["path"] for s in checkouts] == ["cuda-gate"]  # never the project
    assert jobs["store"]["needs"] == ["classes", "sign"]


def test_the_evidence_artifact_keeps_the_gates_marker() -> None:
    """upload-artifact leaves hidden files out by default; the marker is one."""
    for name, job in _jobs(WORKFLOWS / "gate.yml").items():
        for step in job.get("steps", []):
            if str(step.get("uses", "")).startswith("actions/upload-artifact@"):
                assert step["with"].get("include-hidden-files") is True, name


def test_the_release_compares_each_class_with_its_last_accepted_release() -> None:
    """The store is read where no project code runs; the GPU job gets a folder."""
    release = _jobs(WORKFLOWS / "release.yml")["cuda-gate"]
    assert release["with"]["baseline"] == "latest-accepted"
    jobs = _jobs(WORKFLOWS / "gate.yml")
    baseline = jobs["baseline"]
    assert baseline["if"] == "${{ inputs.baseline != '' }}"
    assert baseline["runs-on"] == "${{ fromJSON(inputs.control-runs-on) }}"
    checkouts = [s for s in baseline["steps"] if "actions/checkout" in str(s.get("uses"))]
    assert [s["with"]["path"] for s in checkouts] == ["cuda-gate"]  # never the project
    runs = "\n".join(str(s.get("run", "")) for s in baseline["steps"])
    assert '"$CUDA_GATE" evidence baseline "$BASELINE" --runner-class "$CLASS"' in runs
    assert '[ "$status" -eq 13 ]' in runs  # none stored yet: said, not failed
    [upload] = [s for s in baseline["steps"] if UPLOAD in str(s.get("uses"))]
    assert upload["with"]["name"] == "gate-baseline-${{ matrix.name }}"
    gate = jobs["gate"]
    assert gate["needs"] == ["classes", "baseline"]
    assert "'skipped'" not in gate["if"]
    assert '["success", "skipped"]' in gate["if"]  # runs when no baseline was asked for
    [download] = [
        s for s in gate["steps"] if DOWNLOAD in str(s.get("uses")) and "baseline" in s["name"]
    ]
    assert download["with"]["name"] == "gate-baseline-${{ matrix.name }}"
    [step] = [s for s in gate["steps"] if s.get("uses") == "./cuda-gate"]
    assert "${{ steps.baseline.outputs.args }}" in step["with"]["args"]
    [compare] = [s for s in gate["steps"] if s.get("id") == "baseline"]
    assert 'echo "args=--baseline $RUNNER_TEMP/gate-baseline/run"' in compare["run"]


def test_the_action_asks_for_the_file_attribute_the_github_reporters_read() -> None:
    """junit.xml leaves `file` out by default (Jenkins' xUnit plugin refuses it); the action
    feeds GitHub's reporters, which annotate that file, so it passes the flag, before the
    caller's own args, where --no-junit-file-attribute still wins."""
    import shlex

    from gate.cli import build_parser
    from gate.config.options import JUNIT_FILE_ATTRIBUTE, resolve

    [gate] = [s for s in _load(ACTION)["runs"]["steps"] if _RUNS_THE_GATE.search(s.get("run", ""))]
    [line] = [ln for ln in gate["run"].splitlines() if _RUNS_THE_GATE.search(ln)]
    words = shlex.split(line.partition("||")[0])
    assert words[1:] == [
        "run", "--evidence", "$EVIDENCE", "--junit-file-attribute", "${extra[@]}",
    ]  # fmt: skip
    parser = build_parser("run")

    def asked(*extra: str) -> bool:
        args = parser.parse_args(["run", *words[2:4], words[4], *extra])
        return bool(resolve(JUNIT_FILE_ATTRIBUTE, args).value)

    assert asked()
    assert not asked("--no-junit-file-attribute")
    assert not resolve(JUNIT_FILE_ATTRIBUTE, parser.parse_args(["run"])).value  # the default


def test_the_aarch64_tier_runs_the_nox_session_on_an_arm64_runner() -> None:
    (job,) = _jobs(WORKFLOWS / "aarch64.yml").values()
    assert job["runs-on"] == "ubuntu-24.04-arm"
    assert job["permissions"] == {"contents": "read"}
    assert ".venv/bin/nox -s aarch64" in job["steps"][-1]["run"]
    noxfile = (ROOT / "noxfile.py").read_text(encoding="utf-8")
    assert "def aarch64(session" in noxfile
