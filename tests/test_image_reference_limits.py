"""Image references past the grammar's lengths are no references (issue 37, item 6).

distribution/reference (and containers/image, podman's parser) allow a repository name of
at most 255 characters (``NameTotalLengthMax``; counted here over the name as written,
registry host included) and a tag of at most 128. Longer is one line and exit 6, said
before any container runtime is asked: `run --image` with a 300-character name used to
reach the runtime, whose own refusal was a runtime error (exit 3).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from gate import proc
from gate.container.reference import NAME_MAX, TAG_MAX, parse
from gate.errors import BadInputError, ExitCode

HEX = "ab" * 32
HOST = "registry.example:5000/"


@pytest.mark.unit
@pytest.mark.parametrize(
    ("text", "name", "tag"),
    [
        ("a" * NAME_MAX, "a" * NAME_MAX, None),
        ("localhost/" + "a" * (NAME_MAX - 10), "localhost/" + "a" * (NAME_MAX - 10), None),
        (HOST + "a" * (NAME_MAX - len(HOST)), HOST + "a" * (NAME_MAX - len(HOST)), None),
        # The tag and the pin are not the name's: a 255-character name keeps both.
        ("a" * NAME_MAX + ":1", "a" * NAME_MAX, "1"),
        (f"{'a' * NAME_MAX}:1@sha256:{HEX}", "a" * NAME_MAX, "1"),
        ("app:" + "t" * TAG_MAX, "app", "t" * TAG_MAX),
    ],
)
def test_a_name_of_255_and_a_tag_of_128_characters_are_references(
    text: str, name: str, tag: str | None
) -> None:
    ref = parse(text)
    assert (ref.name, ref.tag) == (name, tag)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("a" * (NAME_MAX + 1), "is not a repository name: 256 characters, more than the 255"),
        ("a" * 300, "is not a repository name: 300 characters, more than the 255"),
        ("localhost/" + "a" * (NAME_MAX - 9), "256 characters, more than the 255"),
        (HOST + "a" * (NAME_MAX - len(HOST) + 1), "256 characters, more than the 255"),
        (f"{'a' * 300}@sha256:{HEX}", "300 characters, more than the 255"),
        ("app:" + "t" * (TAG_MAX + 1), "is not a tag: 129 characters, more than the 128"),
        ("app:" + "t" * 300, "is not a tag: 300 characters, more than the 128"),
    ],
)
def test_a_longer_name_or_tag_is_one_short_line_naming_the_reference(text: str, said: str) -> None:
    with pytest.raises(BadInputError) as raised:
        parse(text)
    message = str(raised.value)
    assert said in message
    assert "\n" not in message
    assert message.startswith(f"image '{text[:117]}...': ")  # the reference, cut
    assert len(message) < 400  # and the part too: never repeated whole


@pytest.mark.unit
def test_a_long_bad_name_or_tag_is_cut_in_the_line_too() -> None:
    for text in ("A_" * 100 + "/x", "app:" + "é" * 100):
        with pytest.raises(BadInputError) as raised:
            parse(text)
        assert len(str(raised.value)) < 300, str(raised.value)
    with pytest.raises(BadInputError, match="is not a tag"):
        parse("app:é")  # a tag's \w is ASCII's, as Go's


def _fake_runtime(folder: Path) -> Path:
    """A `podman` that logs each call and refuses the name as podman 4 does (exit 125)."""
    folder.mkdir()
    log = folder / "calls.log"
    podman = folder / "podman"
    podman.write_text(
        "#!/bin/sh\n"
        f'echo "$*" >> {log}\n'
        'if [ "$1" = --version ]; then echo "podman version 4.3.1"; exit 0; fi\n'
        'echo "Error: repository name must not be more than 255 characters" >&2\n'
        "exit 125\n",
        encoding="utf-8",
    )
    podman.chmod(0o755)
    return log


@pytest.mark.integration
@pytest.mark.parametrize("where", ["--image", "config"])
def test_run_with_a_300_character_image_name_is_exit_6_before_any_runtime(
    tmp_path: Path, where: str
) -> None:
    name = "a" * 300
    project = tmp_path / "project"
    project.mkdir()
    config = 'smoke = true\n[[entry_point]]\nname = "e"\ncommand = ["true"]\n'
    if where == "config":
        config = f'image = "{name}"\n' + config
    (project / "cuda-gate.toml").write_text(config, encoding="utf-8")
    log = _fake_runtime(tmp_path / "bin")
    argv = [sys.executable, "-m", "gate", "run", "--no-store", "--evidence", str(tmp_path / "ev")]
    ran = proc.run(
        [*argv, *(("--image", name) if where == "--image" else ())],
        env_set={"PATH": f"{log.parent}{os.pathsep}{os.environ['PATH']}"},
        cwd=project,
        timeout=120,
    )
    assert ran.returncode == ExitCode.BAD_INPUT, ran.output()
    errors = [line for line in ran.stderr.splitlines() if line.startswith("cuda-gate: error:")]
    cut = f"{name[:117]}..."
    said = f"image '{cut}': '{cut}' is not a repository name: 300 characters, more than the 255"
    assert errors == [f"cuda-gate: error: {said} a reference allows"], ran.output()
    assert not log.exists(), log.read_text(encoding="utf-8")  # the runtime was never asked
