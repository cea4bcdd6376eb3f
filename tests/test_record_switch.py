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
        ("", False, False),  # off by default
        ("", True, True),  # --record-launches
        ("record_launches = true\n", False, True),
        ("record_launches = false\n", False, False),
        ("record_launches = false\n", True, True),  # the command line asks for it
        (ARTIFACT, False, False),
        (ARTIFACT + 'require_launch = ["scale"]\n', False, True),  # a requirement needs it
        (ARTIFACT + 'require_launch = "all"\n', False, True),
    ],
)
def test_the_recorder_runs_when_asked_for_or_needed(text: str, flag: bool, records: bool) -> None:
    config = parse_text(text, Path("/p/cuda-gate.toml"))
    assert records_launches(RunOptions(record_launches=flag), config) is records


def test_record_launches_is_a_flag() -> None:
    with pytest.raises(ConfigError, match="record_launches"):
        parse_text('record_launches = "yes"\n', Path("/p/cuda-gate.toml"))
