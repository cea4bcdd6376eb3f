"""What `diff` and `run --baseline` read of a run record: plain files, bounded, one line.

A baseline's result.json is read as evidence is (gate.record.read_result): a FIFO is
refused instead of waited on, a symbolic link (to /etc/passwd, to another run's record,
in place of the folder) is refused instead of followed, and a file past
gate.record.MAX_RESULT_BYTES is refused by its size before a byte of it is read. Each
refusal is one line naming the file, exit 6.

The commands run in-process, each in a thread joined with a timeout: the timeout only
guards against a hang (a FIFO opened without O_NONBLOCK waits for a writer forever);
a thread still waiting is let go by opening the FIFO's other end, then the test fails.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from gate import cli
from gate.baseline.resolve import from_folder
from gate.errors import ExitCode
from gate.jsonutil import MIB
from gate.record import MAX_RESULT_BYTES, RESULT_FILE
from tests.records import make_record, write_record

pytestmark = pytest.mark.unit

HANG_GUARD = 60.0  # seconds; a refusal takes milliseconds, a hang never ends
OVERSIZED = 300 * MIB  # the result.json, sparse: it takes no disk
CONFIG = '[[artifact]]\npath = "build/app"\n'  # what `run` needs to get as far as --baseline
LINKS = "evidence is plain files; links are never followed"


@dataclass(frozen=True)
class Outcome:
    """A command's exit status and what it printed."""

    status: int
    out: str
    err: str

    @property
    def err_lines(self) -> list[str]:
        return self.err.strip().splitlines()


def _gate(argv: list[str], capsys: pytest.CaptureFixture[str], fifo: Path | None = None) -> Outcome:
    """``cuda-gate ARGV`` in-process, in a thread joined with :data:`HANG_GUARD`.

    A thread still running then is blocked opening ``fifo``: a writer is opened and
    closed so that it returns, and the test fails.
    """
    capsys.readouterr()
    done: list[int] = []
    raised: list[BaseException] = []

    def call() -> None:
        try:
            done.append(cli.main(argv))
        except BaseException as e:  # noqa: BLE001 - handed to the test's thread
            raised.append(e)

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    thread.join(HANG_GUARD)
    if thread.is_alive():
        if fifo is not None:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))  # EOF to the waiting reader
            thread.join(HANG_GUARD)
        pytest.fail(f"cuda-gate {' '.join(argv)} still running after {HANG_GUARD:.0f} s")
    if raised:
        raise raised[0]
    out, err = capsys.readouterr()
    return Outcome(done[0], out, err)


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project folder to run in (its configuration gets `run` as far as --baseline),
    holding a good run ``new`` and a good run ``other``."""
    (tmp_path / "cuda-gate.toml").write_text(CONFIG, encoding="utf-8")
    write_record(tmp_path / "new", make_record())
    write_record(tmp_path / "other", make_record())
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(cli, "COMMANDS", ("diff", "run"))
    return tmp_path


# --- the bad baselines: how each is made, and the line that refuses it -----------------


@dataclass(frozen=True)
class Bad:
    """A baseline folder made bad, and the one line (after ``cuda-gate: error:``) for it."""

    folder: Path
    line: str
    fifo: Path | None = None


def _fifo(here: Path) -> Bad:
    folder = here / "old"
    folder.mkdir()
    os.mkfifo(folder / RESULT_FILE)
    result = folder / RESULT_FILE
    return Bad(folder, f"{result}: not a regular file (evidence is plain files)", result)


def _oversized(here: Path) -> Bad:
    assert OVERSIZED > MAX_RESULT_BYTES
    folder = here / "old"
    folder.mkdir()
    with (folder / RESULT_FILE).open("wb") as stream:
        stream.truncate(OVERSIZED)  # sparse: 300 MiB of zeros that take no disk
    return Bad(
        folder,
        f"{folder / RESULT_FILE}: larger than {MAX_RESULT_BYTES // MIB} MiB, "
        "the most cuda-gate reads of it",
    )


def _link_to_passwd(here: Path) -> Bad:
    folder = here / "old"
    folder.mkdir()
    (folder / RESULT_FILE).symlink_to("/etc/passwd")
    return Bad(folder, f"{folder / RESULT_FILE}: a symbolic link ({LINKS})")


def _link_to_another_run(here: Path) -> Bad:
    folder = here / "old"
    folder.mkdir()
    (folder / RESULT_FILE).symlink_to(here / "other" / RESULT_FILE)  # a good record
    return Bad(folder, f"{folder / RESULT_FILE}: a symbolic link ({LINKS})")


def _folder_linked_to_another_run(here: Path) -> Bad:
    folder = here / "old"
    folder.symlink_to(here / "other", target_is_directory=True)
    return Bad(folder, f"{folder}: the evidence folder is a symbolic link ({LINKS})")


CASES: dict[str, Callable[[Path], Bad]] = {
    "fifo": _fifo,
    "oversized": _oversized,
    "link-to-etc-passwd": _link_to_passwd,
    "link-to-another-runs-record": _link_to_another_run,
    "folder-linked-to-another-run": _folder_linked_to_another_run,
}


def _refused(outcome: Outcome, bad: Bad) -> None:
    """Exit 6 and exactly the one line naming the file and what is wrong with it."""
    assert outcome.status == ExitCode.BAD_INPUT, outcome.err
    assert outcome.err_lines == [f"cuda-gate: error: {bad.line}"]
    assert outcome.out == ""


@pytest.mark.parametrize("case", CASES)
def test_diff_refuses_a_bad_baseline_on_one_line(
    here: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    bad = CASES[case](here)
    _refused(_gate(["diff", str(bad.folder), str(here / "new")], capsys, bad.fifo), bad)


@pytest.mark.parametrize("case", CASES)
def test_diff_refuses_a_bad_run_to_judge_on_one_line(
    here: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    bad = CASES[case](here)
    _refused(_gate(["diff", str(here / "other"), str(bad.folder)], capsys, bad.fifo), bad)


@pytest.mark.parametrize("case", CASES)
def test_run_refuses_a_bad_baseline_before_anything_runs(
    here: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    bad = CASES[case](here)
    argv = ["run", "--no-store", "--quiet", "--evidence", "ev", "--baseline", str(bad.folder)]
    _refused(_gate(argv, capsys, bad.fifo), bad)
    assert not (here / "ev").exists()  # the baseline is read before the run begins


def _bytes_read() -> int:
    """What this process has read so far through read(2) and its kin (/proc/self/io)."""
    for line in Path("/proc/self/io").read_text(encoding="ascii").splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("/proc/self/io has no rchar")


def test_an_oversized_record_is_refused_by_its_size_before_a_byte_is_read(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = _oversized(here)
    argv = ["diff", str(bad.folder), str(here / "new")]
    _refused(_gate(argv, capsys), bad)  # once first: every module it needs is imported
    before = _bytes_read()
    _refused(_gate(argv, capsys), bad)
    # Not the whole file (300 MiB), nor the bound's worth (256 MiB) of it: none of it.
    assert _bytes_read() - before < MIB


# --- what is plain evidence still reads, once ----------------------------------------


def test_a_plain_baseline_still_diffs_and_its_digest_is_of_the_bytes_read(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outcome = _gate(["diff", str(here / "other"), str(here / "new")], capsys)
    assert outcome.status == ExitCode.OK, outcome.err
    found = from_folder(here / "other", "other")
    data = (here / "other" / RESULT_FILE).read_bytes()
    assert found.digest == hashlib.sha256(data).hexdigest()
    assert found.record == make_record()
