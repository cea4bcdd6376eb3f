"""Faults and bounds: a closed stdout keeps the exit status; hostile sizes fail fast, on one line.

Each case is a real input (a real pipe closed after one line, a sparse file past a bound,
a configuration nested a thousand deep) against the real reader or the real command.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gate import config, jsonutil
from gate.attest.manifest import ENVELOPE_FILE, MANIFEST_FILE, write_manifest
from gate.attest.signing import generate_key_pair, load_public_key, signer_from_pem
from gate.attest.verify import MAX_ENVELOPE_BYTES, Outcome, verify
from gate.config import values
from gate.config.shellsplit import split
from gate.errors import BadInputError, ConfigError, ExitCode
from gate.guard.redact import Redactor
from tests.manifest_evidence import make_evidence, matching_machine
from tests.peak import run_measured
from tests.work import bytes_read, hang_guard, peak_memory, python_lines

GOLDEN = Path(__file__).parent / "golden"
SIGPIPE_STATUS = 141  # 128 + SIGPIPE, as a shell reports a command SIGPIPE ended


def _gate_env() -> dict[str, str]:
    """The test's environment (its own HOME) without the CUDA variables of this machine."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("CUDA", "NVCC"))}


# --- stdout closed early (| head -1) -------------------------------------------------


def _inspect_then_close(tmp_path: Path, device: str) -> tuple[int, str, str]:
    """``cuda-gate inspect --require-device DEVICE`` on 200 objects, its stdout a pipe we
    close after the first line: (exit status, first line, stderr).

    The table (150 kB) is larger than a pipe holds, so the gate is still writing when the
    pipe closes: the failure is certain, not a race with the reader.
    """
    folder = tmp_path / "objects"
    folder.mkdir()
    data = (GOLDEN / "multi.o").read_bytes()
    for i in range(200):
        (folder / f"m{i:03}.o").write_bytes(data)
    argv = [sys.executable, "-m", "gate", "inspect", "--no-detect", "--require-device", device]
    stderr_path = tmp_path / "stderr.txt"
    with stderr_path.open("wb") as stderr:
        process = subprocess.Popen(
            [*argv, str(folder)], stdout=subprocess.PIPE, stderr=stderr, env=_gate_env()
        )
        assert process.stdout is not None
        first = process.stdout.readline().decode()
        process.stdout.close()
        status = process.wait(timeout=120)
    return status, first, stderr_path.read_text(encoding="utf-8")


@pytest.mark.integration
def test_closed_stdout_keeps_a_failing_checks_status(tmp_path: Path) -> None:
    status, first, stderr = _inspect_then_close(tmp_path, "7.5")  # multi.o has no code for 7.5
    assert first.startswith(str(tmp_path / "objects" / "m000.o"))
    assert status == ExitCode.NOT_ACCEPTED, stderr[-2000:]
    assert "Traceback" not in stderr
    assert "Exception ignored" not in stderr
    assert stderr.strip().splitlines()[-1] == (
        "cuda-gate: error: 200 artifact/device pairs without code for a required device (7.5)"
    )


@pytest.mark.integration
def test_closed_stdout_after_passing_checks_is_sigpipe_not_success(tmp_path: Path) -> None:
    # The output the command promised was not delivered: as `yes | head -1` reports it.
    status, _, stderr = _inspect_then_close(tmp_path, "12.0")
    assert status == SIGPIPE_STATUS, stderr[-2000:]
    assert "Traceback" not in stderr
    assert "Exception ignored" not in stderr
    assert stderr == ""


# --- verify: the envelope and manifest.json are read up to a bound ------------------


@pytest.mark.unit
def test_read_bounded_stops_one_byte_past_the_limit(tmp_path: Path) -> None:
    exact = tmp_path / "exact.json"
    exact.write_bytes(b"[1, 2, 3]\n")
    assert jsonutil.read_bounded(exact, 10) == b"[1, 2, 3]\n"
    over = tmp_path / "over.json"
    over.write_bytes(b"[1, 2, 3, 4]")
    with pytest.raises(BadInputError, match=r"over\.json: larger than 11 bytes"):
        jsonutil.read_bounded(over, 11)


@pytest.mark.integration
def test_oversized_envelope_fails_fast_in_little_memory(tmp_path: Path) -> None:
    pub = tmp_path / "k.pub"
    pub.write_bytes(generate_key_pair().public_pem)
    envelope = tmp_path / "manifest.dsse.json"
    with envelope.open("wb") as stream:  # sparse: 1 GiB that takes no disk
        stream.truncate(16 * MAX_ENVELOPE_BYTES)
    # Peak memory of the verifying process itself, measured from a small launcher (a
    # child of pytest would report pytest's own size as its peak).
    argv = [sys.executable, "-m", "gate", "verify", str(envelope), "--key", str(pub), "--offline"]
    started = time.monotonic()
    result, peak = run_measured(argv, tmp_path / "peak", env=_gate_env(), timeout=120)
    elapsed = time.monotonic() - started
    assert result.returncode == ExitCode.BAD_INPUT, result.stderr
    assert result.stderr == (
        f"cuda-gate: error: {envelope}: larger than {MAX_ENVELOPE_BYTES // 2**20} MiB, "
        "the most cuda-gate reads of it\n"
    )
    assert peak < 3 * MAX_ENVELOPE_BYTES, f"peak {peak >> 10} KiB"
    assert elapsed < 30


@pytest.mark.unit
def test_oversized_unsigned_manifest_differs_without_being_read_whole(tmp_path: Path) -> None:
    pair = generate_key_pair()
    ev = make_evidence(tmp_path, environ={})
    write_manifest(ev.folder, signer_from_pem(pair.private_pem, "test"), redactor=Redactor())
    unsigned = ev.folder / MANIFEST_FILE
    payload = unsigned.read_bytes()
    with unsigned.open("r+b") as stream:  # the signed payload, then 4 GiB of sparse zeros
        stream.truncate(4 * 2**30)
    pub = tmp_path / "k.pub"
    pub.write_bytes(pair.public_pem)
    with bytes_read() as read:
        result = verify(ev.folder / ENVELOPE_FILE, load_public_key(pub), machine=matching_machine())
    (evidence,) = (s for s in result.steps if s.title == "evidence")
    assert evidence.outcome is Outcome.FAILED
    assert f"{unsigned}: differs from the signed payload" in evidence.detail
    assert len(payload) < MAX_ENVELOPE_BYTES
    # The envelope, the evidence files, and the payload and one byte of the 4 GiB: ~100 kB.
    assert read.amount < 1 << 20, f"{read.amount} bytes read"


# --- configuration: nesting, NUL, long values ----------------------------------------


def _config_error(tmp_path: Path, text: str) -> str:
    """The one line ``config.load`` fails with on a cuda-gate.toml holding ``text``."""
    (tmp_path / "cuda-gate.toml").write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        config.load(tmp_path)
    assert info.value.exit_code is ExitCode.CONFIG
    line = info.value.one_line()
    assert "\n" not in line
    return line


DEEP = {
    "arrays": "targets = " + "[" * 1000 + "]" * 1000 + "\n",
    "inline tables": "store = " + "{ a = " * 1000 + "1" + " }" * 1000 + "\n",
    "dotted key": "store." + ".".join(["a"] * 20_000) + " = 1\n",
    "dotted key in a header": "[" + ".".join(["a"] * 20_000) + "]\n",
    "dotted key in an inline table": "store = { " + ".".join(["a"] * 20_000) + " = 1 }\n",
    "just past the bound": "store = " + "[" * config.MAX_DEPTH + "]" * config.MAX_DEPTH + "\n",
}


@pytest.mark.unit
@pytest.mark.parametrize("text", DEEP.values(), ids=DEEP.keys())
def test_deep_configuration_is_one_config_error(tmp_path: Path, text: str) -> None:
    with hang_guard("config.load"), peak_memory() as memory:
        line = _config_error(tmp_path, text)
    # tomllib keeps every prefix of a dotted key: 17 MB at 2,000 parts, gigabytes at 20,000.
    assert memory.amount < 32 << 20, f"{memory.amount} bytes at most"
    assert line == (
        f"{tmp_path / 'cuda-gate.toml'}: nested deeper than {config.MAX_DEPTH} levels "
        "(tables, arrays or dotted keys)"
    )


@pytest.mark.unit
def test_nesting_within_the_bound_is_read(tmp_path: Path) -> None:
    # The document and 63 nested arrays: 64 levels, read and judged as usual.
    inner = config.MAX_DEPTH - 1
    line = _config_error(tmp_path, "store = " + "[" * inner + "]" * inner + "\n")
    assert line.startswith(f"{tmp_path / 'cuda-gate.toml'}: store: expected a table, got [[[")


@pytest.mark.integration
def test_deep_configuration_exits_7_on_one_line(tmp_path: Path) -> None:
    path = tmp_path / "deep.toml"
    path.write_text(DEEP["arrays"], encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "gate", "run", "--config", str(path), "--no-store"],
        capture_output=True, text=True, env=_gate_env(), cwd=tmp_path, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == ExitCode.CONFIG, result.stderr[-2000:]
    assert result.stderr == (
        f"cuda-gate: error: {path}: nested deeper than {config.MAX_DEPTH} levels "
        "(tables, arrays or dotted keys)\n"
    )


NUL = {
    "command string": ('[[build]]\ncommand = "make a\\u0000b"\n', "build[0].command"),
    "command list": ('[[build]]\ncommand = ["make", "a\\u0000b"]\n', "build[0].command[1]"),
    "env value": ('[[build]]\ncommand = "make"\nenv = { X = "a\\u0000" }\n', "build[0].env.X"),
    "env name": ('[[build]]\ncommand = "make"\nenv = { "X\\u0000" = "1" }\n', "build[0].env.X"),
    "cwd": ('[[build]]\ncommand = "make"\ncwd = "sub\\u0000dir"\n', "build[0].cwd"),
    "entry point": ('[[entry_point]]\ncommand = ["./app\\u0000"]\n', "entry_point[0].command[0]"),
    "python": ('python = "/usr/bin/python3\\u0000"\n', "python"),
}


@pytest.mark.unit
@pytest.mark.parametrize(("text", "key"), NUL.values(), ids=NUL.keys())
def test_nul_in_a_command_is_a_config_error(tmp_path: Path, text: str, key: str) -> None:
    line = _config_error(tmp_path, text)
    assert line.startswith(f"{tmp_path / 'cuda-gate.toml'}: {key}")
    assert line.endswith("holds a NUL character (\\0)")


MEGABYTE = "x" * 1_000_000
LONG = {
    "host": f'host = "{MEGABYTE}"\n',
    "unknown key": f'"{MEGABYTE}" = 1\n',
    "name": f'[[build]]\nname = "{MEGABYTE}!"\ncommand = "make"\n',
    "placeholder": f'[[build]]\ncommand = "make {{{MEGABYTE}}}"\n',
    "env name": f'[[build]]\ncommand = "make"\nenv = {{ "{MEGABYTE}" = 1 }}\n',
    "target": f'targets = ["sm_{MEGABYTE}"]\n',
    "number": f"smoke = {'9' * 4000}\n",
}


@pytest.mark.unit
@pytest.mark.parametrize("text", LONG.values(), ids=LONG.keys())
def test_long_values_are_shortened_in_errors(tmp_path: Path, text: str) -> None:
    line = _config_error(tmp_path, text)
    assert len(line) < 400, line[:400]
    assert "xxxxxxxxxx" in line or "9999999999" in line


@pytest.mark.unit
def test_shortened_values_say_how_long_they_were() -> None:
    assert values.quote("sm_9O") == "'sm_9O'"
    assert values.quote("é" * 100) == repr("é" * values.SHOWN_CHARS) + "... (200 bytes)"
    assert values.clip("a" * 61) == "a" * 60 + "... (61 bytes)"
    assert values.clip("a" * 60) == "a" * 60


# --- a command string splits in linear time, into the words shlex gives ---------------

WORDS = {
    "": [],
    "  \t\n ": [],
    "make -j8": ["make", "-j8"],
    "a\tb\nc\rd": ["a", "b", "c", "d"],
    "cmake -DX='a b' \"-DY=c d\"": ["cmake", "-DX=a b", "-DY=c d"],
    "''": [""],
    'a "" b': ["a", "", "b"],
    "a''b": ["ab"],
    "'it'\\''s'": ["it's"],
    r"a\ b": ["a b"],
    r"a\\b": ["a\\b"],
    '"a\\"b"': ['a"b'],
    '"a\\\\b"': ["a\\b"],
    '"a\\$b\\nc"': ["a\\$b\\nc"],
    "'a\\\"b'": ['a\\"b'],
    "\\\n": ["\n"],
    "$HOME ${X} `y` # not a comment": ["$HOME", "${X}", "`y`", "#", "not", "a", "comment"],
    "é \u00a0 x": ["é", "\u00a0", "x"],
}


@pytest.mark.unit
@pytest.mark.parametrize(("text", "words"), WORDS.items(), ids=[repr(k) for k in WORDS])
def test_split_gives_the_words_shlex_gives(text: str, words: list[str]) -> None:
    assert split(text) == words
    assert shlex.split(text) == words


ERRORS = {
    "'open": "No closing quotation",
    '"open': "No closing quotation",
    '"open\\"': "No closing quotation",
    'a "b\\': "No escaped character",
    "a\\": "No escaped character",
    "'a' 'b": "No closing quotation",
}


@pytest.mark.unit
@pytest.mark.parametrize(("text", "message"), ERRORS.items(), ids=[repr(k) for k in ERRORS])
def test_split_fails_as_shlex_fails(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        split(text)
    with pytest.raises(ValueError, match=message):
        shlex.split(text)


@pytest.mark.unit
def test_four_megabyte_command_splits_in_linear_time() -> None:
    # The configuration refuses a command this long (65,536 characters at most, issue 45
    # item 4); the splitter itself stays linear.
    define = "x" * (4 * 2**20)
    command = f"nvcc '-DLONG={define}' -o out.o"
    # shlex grows a word a character at a time: four minutes for this one.
    with hang_guard("split"):
        words = split(command)
    assert words == ["nvcc", f"-DLONG={define}", "-o", "out.o"]
    # The words are matched in C: the Python work is the same for 4 bytes or 4 MB.
    with python_lines(limit=200) as lines:
        assert split(command) == words
    with python_lines(limit=200) as short:
        split("nvcc '-DLONG=x' -o out.o")
    assert abs(lines.amount - short.amount) <= 10, (lines.amount, short.amount)  # a tracer's few


SHORT_WORDS = '-I \'inc dir\' "-DA=\\"1\\"" '  # three words, 24 characters


def _lines_to_split(copies: int) -> int:
    """Lines of Python that split runs on ``copies`` times SHORT_WORDS."""
    with python_lines(limit=100_000) as lines:
        split(SHORT_WORDS * copies)
    return lines.amount


@pytest.mark.unit
def test_many_short_words_split_in_linear_time() -> None:
    with hang_guard("split"):
        words = split(SHORT_WORDS * 200_000)  # 4.8 MB, 600,000 words
    assert words[:3] == ["-I", "inc dir", '-DA="1"']
    assert len(words) == 600_000
    # The same Python work for every word (shlex runs ~145 lines per word here, a loop
    # per character): each 500 copies more cost the same lines more, within 1% (a tracer
    # such as mutmut's, or the collector, may add a few lines of its own).
    costs = [_lines_to_split(copies) for copies in (500, 1_000, 1_500)]
    first, second = costs[1] - costs[0], costs[2] - costs[1]
    assert abs(second - first) <= first // 100, costs
    assert max(first, second) <= 15 * 3 * 500, costs
