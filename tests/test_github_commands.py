"""``cuda-gate github``: status, annotate, summary and runner-matrix on real evidence folders."""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from gate.commands import github as command
from gate.errors import BadInputError, ConfigError
from gate.github.runners import github_matrix, load_runner_classes, schema, select
from gate.record import RunInfo
from gate.rules.causes import Cause, ExecPath
from gate.rules.verdict import Check, CheckState
from gate.system.git import SourceInfo
from tests.githubserver import fake_github
from tests.records import both, execution, make_record, write_record

TOKEN = "ghs_AnotherSecretTokenForCommands0000"
SHA = "fedcba9876543210fedcba9876543210fedcba98"
ROOT = Path(__file__).resolve().parent.parent
SPARK_LABELS = ["self-hosted", "linux", "arm64", "cuda-gate", "dgx-spark"]


def _run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    command.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["github", *argv])
    return int(args.handler(args))


def _record(folder: Path, *, accepted: bool, checks: list[Check]) -> Path:
    if accepted:
        executions = both("check")
    else:
        executions = (
            execution("check", ExecPath.NATIVE, passed=False),
            execution("check", ExecPath.JIT),
        )
    record = make_record(
        checks,
        executions=executions,
        run=RunInfo("r1", "spark-01", "dgx-spark"),
        source=SourceInfo(SHA, False, "acme/kernels"),
    )
    return write_record(folder, record)


FAILED = Check(
    "native-check",
    "gate.execute.native",
    CheckState.FAILED,
    "exit 1\n::add-mask::gotcha, 100% bad",
    cause=Cause.EXIT_STATUS,
)
PASSED = Check("sass-present", "gate.inspect", CheckState.PASSED, "")


@pytest.mark.integration
def test_status_posts_the_verdict_of_the_evidence(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    evidence = _record(tmp_path / "ev", accepted=False, checks=[FAILED, PASSED])
    with fake_github() as gh:
        monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
        monkeypatch.setenv("GITHUB_API_URL", gh.url)
        monkeypatch.setenv("GITHUB_REPOSITORY", "acme/kernels")
        monkeypatch.setenv("GITHUB_SERVER_URL", "https://github.example")
        monkeypatch.setenv("GITHUB_RUN_ID", "42")
        assert _run(["status", "--evidence", str(evidence), "--context", "cuda-gate/x"]) == 0
    [req] = gh.requests
    assert req.path == f"/repos/acme/kernels/statuses/{SHA}"
    assert req.body["state"] == "failure"
    assert req.body["context"] == "cuda-gate/x"
    assert req.body["description"].startswith("not accepted: native-check: exit 1")
    assert req.body["target_url"] == "https://github.example/acme/kernels/actions/runs/42"
    out, err = capsys.readouterr()
    assert "cuda-gate/x: failure on fedcba987654" in out
    assert TOKEN not in out + err + caplog.text


@pytest.mark.integration
def test_status_without_evidence_posts_an_error_on_the_given_revision(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = "1" * 40
    with fake_github() as gh:
        monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
        monkeypatch.setenv("GITHUB_API_URL", gh.url)
        argv = ["status", "--evidence", str(tmp_path / "none"), "--context", "cuda-gate/y"]
        argv += ["--repository", "acme/kernels", "--revision", other, "--target-url", "https://e/x"]
        assert _run(argv) == 0
    [req] = gh.requests
    assert req.path == f"/repos/acme/kernels/statuses/{other}"
    assert req.body["state"] == "error"
    assert req.body["description"].startswith("no usable evidence:")
    assert req.body["target_url"] == "https://e/x"


@pytest.mark.unit
def test_status_needs_a_repository(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GITHUB_REPOSITORY", raising=False)
    with pytest.raises(ConfigError, match="no repository"):
        _run(["status", "--evidence", str(tmp_path), "--context", "c"])


@pytest.mark.unit
def test_annotate_escapes_untrusted_text_into_one_line_per_failure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    evidence = _record(tmp_path / "ev", accepted=False, checks=[FAILED, PASSED])
    assert _run(["annotate", "--evidence", str(evidence), "--title", "cuda-gate/dgx-spark"]) == 0
    lines = capsys.readouterr().out.splitlines()
    verdict = "::error title=cuda-gate/dgx-spark%3A verdict::"
    failure = "::error title=cuda-gate/dgx-spark%3A gate.execute.native.native-check::"
    assert lines == [
        verdict + "not accepted: native-check: exit 1%0A::add-mask::gotcha, 100%25 bad",
        failure + "exit 1%0A::add-mask::gotcha, 100%25 bad",
    ]


@pytest.mark.unit
def test_annotate_prints_nothing_for_an_accepted_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    evidence = _record(tmp_path / "ev", accepted=True, checks=[PASSED])
    assert _run(["annotate", "--evidence", str(evidence)]) == 0
    assert capsys.readouterr().out == ""


@pytest.mark.unit
def test_annotate_falls_back_to_junit_without_a_run_record(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "junit.xml").write_text(
        '<testsuites><testsuite name="gate">'
        '<testcase classname="gate.execute.jit" name="check" time="0.1">'
        '<failure message="CUDA_ERROR_NO_BINARY_FOR_GPU">log</failure></testcase>'
        '<testcase classname="gate.inspect" name="ok" time="0.0"/>'
        '<testcase classname="gate.build" name="smoke" time="0.0">'
        "<error>nvcc died</error></testcase>"
        "</testsuite></testsuites>",
        encoding="utf-8",
    )
    assert _run(["annotate", "--evidence", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("::error title=cuda-gate%3A no run record::")
    assert lines[1:] == [
        "::error title=cuda-gate%3A gate.execute.jit.check::CUDA_ERROR_NO_BINARY_FOR_GPU",
        "::error title=cuda-gate%3A gate.build.smoke::nvcc died",
    ]


@pytest.mark.unit
def test_annotate_reports_a_broken_run_record_as_an_annotation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "result.json").write_text('{"version": 1}', encoding="utf-8")
    assert _run(["annotate", "--evidence", str(tmp_path)]) == 0
    [line] = capsys.readouterr().out.splitlines()
    assert line.startswith("::error title=cuda-gate%3A no run record::")
    assert line.endswith(
        "result.json: not a cuda-gate run record: 'tool' is missing or not an object"
    )


@pytest.mark.unit
def test_summary_appends_with_a_heading(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "step-summary.md"
    target.write_text("before\n", encoding="utf-8")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(target))
    (tmp_path / "ev").mkdir()
    (tmp_path / "ev" / "summary.md").write_text("| a | b |\n", encoding="utf-8")
    assert _run(["summary", "--evidence", str(tmp_path / "ev"), "--heading", "dgx-spark"]) == 0
    assert _run(["summary", "--evidence", str(tmp_path / "missing")]) == 0
    text = target.read_text(encoding="utf-8")
    assert text.startswith("before\n## dgx-spark\n\n| a | b |\n")
    assert "No summary:" in text


@pytest.mark.unit
def test_runner_matrix_writes_step_outputs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    output = tmp_path / "out"
    monkeypatch.setenv("GITHUB_OUTPUT", str(output))
    assert _run(["runner-matrix", "--file", str(ROOT / "ci" / "runner-classes.json")]) == 0
    lines = output.read_text(encoding="utf-8").splitlines()
    assert lines[1] == "classes=dgx-spark"
    matrix = json.loads(lines[0].removeprefix("matrix="))
    assert matrix["include"][0]["name"] == "dgx-spark"
    assert matrix["include"][0]["labels"] == SPARK_LABELS
    # The repository's class names its runner group: runs-on becomes {group, labels}.
    assert matrix["include"][0]["runs_on"] == {"group": "cuda-gate-gpu", "labels": SPARK_LABELS}


DIGEST = "sha256:" + "ab" * 32


def _classes_file(tmp_path: Path, classes: list[dict[str, Any]]) -> Path:
    path = tmp_path / "runner-classes.json"
    path.write_text(json.dumps({"version": 1, "classes": classes}), encoding="utf-8")
    return path


@pytest.mark.unit
def test_runner_classes_select_and_matrix(tmp_path: Path) -> None:
    path = _classes_file(
        tmp_path,
        [
            {"name": "dgx-spark", "labels": ["self-hosted", "dgx-spark"]},
            {
                "name": "h200",
                "labels": ["self-hosted", "h200"],
                "required": False,
                "container": f"ghcr.io/acme/app@{DIGEST}",
                "timeout_minutes": 30,
                "group": "gpu-release",
            },
        ],
    )
    classes = load_runner_classes(path)
    assert [c.name for c in select(classes, required_only=True)] == ["dgx-spark"]
    assert [c.name for c in select(classes, ["h200"])] == ["h200"]
    entry = github_matrix(select(classes, ["h200"]))["include"][0]
    assert entry == {
        "name": "h200",
        "labels": ["self-hosted", "h200"],
        "group": "gpu-release",
        "runs_on": {"group": "gpu-release", "labels": ["self-hosted", "h200"]},
        "required": False,
        "container": f"ghcr.io/acme/app@{DIGEST}",
        "image_digest": DIGEST,
        "timeout_minutes": 30,
    }
    first = github_matrix(classes)["include"][0]
    assert first["container"] == ""
    # Without a group, runs-on is the labels alone.
    assert (first["group"], first["runs_on"]) == ("", ["self-hosted", "dgx-spark"])
    with pytest.raises(ConfigError, match="unknown runner class gb200"):
        select(classes, ["gb200"])


@pytest.mark.unit
@pytest.mark.parametrize(
    ("classes", "problem"),
    [
        ([{"name": "Spark!", "labels": ["x"]}], "classes/0/name"),
        ([{"name": "a", "labels": ["x"], "container": "ghcr.io/acme/app:latest"}], "container"),
        ([{"name": "a", "labels": []}], "labels"),
        ([{"name": "a", "labels": ["x"], "group": " gpu"}], "group"),
        ([{"name": "a", "labels": ["x"], "group": ""}], "group"),
        ([{"name": "a", "labels": ["x"]}, {"name": "a", "labels": ["y"]}], "named twice: a"),
        ([], "classes"),
    ],
)
def test_bad_runner_classes_name_the_file_and_field(
    tmp_path: Path, classes: list[dict[str, Any]], problem: str
) -> None:
    path = _classes_file(tmp_path, classes)
    with pytest.raises(BadInputError, match=problem) as info:
        load_runner_classes(path)
    assert str(path) in info.value.one_line()


@pytest.mark.unit
def test_the_repositorys_runner_classes_match_the_schema() -> None:
    data = json.loads((ROOT / "ci" / "runner-classes.json").read_text(encoding="utf-8"))
    jsonschema.validate(data, schema())
    assert data["version"] == 1


@pytest.mark.unit
def test_annotate_writes_at_most_ten_errors_the_top_ranked_first_then_how_many_more(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 24 exit-status failures, then the one cause that explains most (missing SASS).
    checks = [
        Check(
            f"run {i}",
            "gate.execute.native",
            CheckState.FAILED,
            f"exit {i}",
            cause=Cause.EXIT_STATUS,
        )
        for i in range(24)
    ]
    checks.append(
        Check(
            "libk.so: SASS for sm_90",
            "gate.inspect",
            CheckState.FAILED,
            "no SASS for sm_90",
            cause=Cause.MISSING_SASS,
        )
    )
    evidence = _record(tmp_path / "ev", accepted=False, checks=checks)
    assert _run(["annotate", "--evidence", str(evidence)]) == 0
    lines = capsys.readouterr().out.splitlines()
    errors = [line for line in lines if line.startswith("::error")]
    # GitHub shows 10 error annotations per step: the verdict and the 9 top-ranked checks.
    assert len(errors) == 10
    assert errors[0].startswith("::error title=cuda-gate%3A verdict::not accepted: libk.so")
    assert errors[1] == (
        "::error title=cuda-gate%3A gate.inspect.libk.so%3A SASS for sm_90::no SASS for sm_90"
    )
    assert errors[2:] == [
        f"::error title=cuda-gate%3A gate.execute.native.run {i}::exit {i}" for i in range(8)
    ]
    # 25 failed checks and the verdict: 26 errors, 16 of them not annotated.
    notice = "::notice title=cuda-gate%3A 16 more::16 more error(s) than the 10 annotated: "
    assert lines[10:] == [f"{notice}see the job summary and {evidence / 'junit.xml'}"]


@pytest.mark.unit
def test_annotate_max_sets_the_cap_and_must_be_positive(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    checks = [
        Check(f"run {i}", "gate.execute.native", CheckState.FAILED, "x", cause=Cause.EXIT_STATUS)
        for i in range(3)
    ]
    evidence = _record(tmp_path / "ev", accepted=False, checks=checks)
    assert _run(["annotate", "--evidence", str(evidence), "--max", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split("::")[1].split(" ")[0] for line in lines] == ["error", "error", "notice"]
    assert "2 more error(s) than the 2 annotated" in lines[2]
    with pytest.raises(SystemExit):
        _run(["annotate", "--evidence", str(evidence), "--max", "0"])
    assert "expected a whole number of at least 1, got '0'" in capsys.readouterr().err
