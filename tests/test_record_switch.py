"""When the runs go through the CUPTI launch recorder: asked for, or needed by require_launch."""

from __future__ import annotations

from pathlib import Path

import pytest

from gate.config import parse_text
from gate.errors import ConfigError
from gate.pipeline import RunOptions, records_launches

pytestmark = pytest.mark.unit

ARTIFACT = '[[artifact]]\npath = "build/app"\n'


@pytest.mark.parametrize(
    ("text", "flag", "records"),
    [
        ("", None, True),  # on by default
        ("", True, True),  # --record-launches
        ("", False, False),  # --no-record-launches
        ("record_launches = true\n", None, True),
        ("record_launches = true\n", False, False),  # the command line says no
        ("record_launches = false\n", None, False),
        ("record_launches = false\n", True, True),  # the command line asks for it
        (ARTIFACT, None, True),
        (ARTIFACT, False, False),
        (ARTIFACT + 'require_launch = ["scale"]\n', None, True),  # a requirement needs it
        (ARTIFACT + 'require_launch = "all"\n', False, True),
    ],
)
def test_the_recorder_runs_unless_turned_off(text: str, flag: bool | None, records: bool) -> None:
    config = parse_text(text, Path("/p/cuda-gate.toml"))
    assert records_launches(RunOptions(record_launches=flag), config) is records


def test_record_launches_is_a_flag() -> None:
    with pytest.raises(ConfigError, match="record_launches"):
        parse_text('record_launches = "yes"\n', Path("/p/cuda-gate.toml"))


def test_record_launches_false_beside_a_require_launch_is_one_error_line() -> None:
    text = "record_launches = false\n" + ARTIFACT + 'require_launch = ["scale"]\n'
    with pytest.raises(ConfigError) as e:
        parse_text(text, Path("/p/cuda-gate.toml"))
    assert str(e.value) == (
        "/p/cuda-gate.toml: record_launches: false, but artifact[0].require_launch needs the "
        "launch recorder"
    )


def test_no_record_launches_beside_a_require_launch_is_refused_before_anything_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from gate import cli

    (tmp_path / "cuda-gate.toml").write_text(ARTIFACT + 'require_launch = "all"\n')
    monkeypatch.chdir(tmp_path)
    status = cli.main(["run", "--no-record-launches", "--no-store", "--evidence", "ev"])
    assert status == 7  # a configuration error
    err = capsys.readouterr().err.strip().splitlines()
    said = (
        f"cuda-gate: error: --no-record-launches: {tmp_path / 'cuda-gate.toml'} asks for "
        "launches of build/app (require_launch), which needs the launch recorder"
    )
    assert err == [said]
    assert not (tmp_path / "ev").exists()  # refused before the run began


def test_launch_coverage_in_the_policy_needs_the_recorder() -> None:
    on = parse_text('[policy]\nlaunch_coverage = "warn"\n', Path("/p/cuda-gate.toml"))
    assert records_launches(RunOptions(record_launches=False), on)
    with pytest.raises(ConfigError, match=r"record_launches: false, but policy.launch_coverage"):
        parse_text(
            'record_launches = false\n[policy]\nlaunch_coverage = "fail"\n',
            Path("/p/cuda-gate.toml"),
        )
