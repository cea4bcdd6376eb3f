"""``inspect --python-platform`` and ``--python-version``: a name gate.reader.locks.target
does not know is a usage error (exit 2) in its own words, before anything is read."""

from __future__ import annotations

import pytest

from gate.cli import main
from gate.errors import ExitCode

pytestmark = pytest.mark.unit


PLATFORMS = (
    "linux, macos, windows, x86_64|aarch64-unknown-linux-gnu, x86_64|aarch64-manylinux_2_N, "
    "-apple-darwin, -pc-windows-msvc"
)


@pytest.mark.parametrize(
    ("option", "value", "said"),
    [
        (
            "--python-platform",
            "linux/arm64",
            f"'linux/arm64': not a platform cuda-gate knows ({PLATFORMS})",
        ),
        ("--python-version", "three", "'three': not X.Y"),
        ("--python-version", "2.7", "'2.7': not 3.Y or 3.Y.Z"),
    ],
)
def test_an_unknown_target_is_a_usage_error_in_its_own_words(
    option: str, value: str, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["inspect", option, value, "--no-detect", __file__])
    assert stopped.value.code == ExitCode.USAGE
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line == f"cuda-gate inspect: error: argument {option}: {option} {said}"


@pytest.mark.parametrize(
    "argv",
    [
        ["--python-platform", "aarch64-unknown-linux-gnu"],
        ["--python-version", "3.12"],
        ["--python-platform", "windows", "--python-version", "3.11.4"],
    ],
)
def test_a_known_target_is_taken_as_typed(argv: list[str]) -> None:
    from gate.cli import build_parser

    args = build_parser("inspect").parse_args(["inspect", *argv, __file__])
    given = dict(zip(argv[::2], argv[1::2], strict=True))
    assert args.python_platform == given.get("--python-platform")
    assert args.python_version == given.get("--python-version")
