"""Output while it runs: logs that grow as a step prints, the live line, inspect's count."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gate import proc
from gate.config import Config, EntryPoint
from gate.evidence import EvidenceDir
from gate.guard.redact import REDACTED, Redactor, StreamRedactor
from gate.render.live import CLEAR, Counter, LiveLine, fit
from gate.rules.targets import Capability
from gate.stages import execute

GOLDEN = Path(__file__).parent / "golden"


class _Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _terminal() -> tuple[io.TextIOWrapper, int]:
    """A real pseudo-terminal: the end a program writes to, and the end to read it from."""
    leader, follower = os.openpty()
    return open(follower, "w", encoding="utf-8", closefd=True), leader  # noqa: PTH123


def _drain(fd: int) -> str:
    os.set_blocking(fd, False)
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", "replace")


@pytest.mark.unit
def test_the_live_line_fits_the_width_and_carries_no_escape_codes_of_its_own() -> None:
    line = "[3/8] build 0m12s cmake --build: \x1b[32m[ 45%]\x1b[0m Building CUDA object\tk.cu"
    assert fit(line, 200) == "[3/8] build 0m12s cmake --build: [ 45%] Building CUDA object k.cu"
    cut = fit(line, 30)
    assert cut == "[3/8] build 0m12s cmake --..."
    assert len(cut) == 29  # one column spare: a full last column makes terminals wrap
    # Wide characters take two columns each.
    assert fit("编译" * 20, 11) == "编译编..."
    assert fit("x" * 5, 2) == "x"


@pytest.mark.unit
def test_the_live_line_is_drawn_only_on_a_terminal() -> None:
    log = io.StringIO()
    not_a_terminal = LiveLine(log, environ={"COLUMNS": "40"})
    not_a_terminal.show("[3/8] build 0m01s make: compiling")
    not_a_terminal.clear()
    assert log.getvalue() == ""
    stream, leader = _terminal()
    try:
        dumb = LiveLine(stream, environ={"TERM": "dumb"})
        dumb.show("hidden")
        live = LiveLine(stream, environ={"COLUMNS": "40", "TERM": "xterm", "NO_COLOR": "1"})
        live.show("[3/8] build 0m01s make -j8: compiling the kernels of the project")
        live.show("[3/8] build 0m02s make -j8: linking")
        live.clear()
        live.clear()  # nothing shown: nothing written
        drawn = _drain(leader)
    finally:
        stream.close()
        os.close(leader)
    assert drawn == (
        f"{CLEAR}[3/8] build 0m01s make -j8: compilin..."
        f"{CLEAR}[3/8] build 0m02s make -j8: linking{CLEAR}"
    )
    assert "hidden" not in drawn


@pytest.mark.unit
def test_a_count_is_silent_for_a_short_read_and_occasional_in_a_log() -> None:
    said: list[str] = []
    clock = _Clock()
    count = Counter("inspect", say=said.append, every=10.0, clock=clock)
    for i in range(50):  # a short read: nothing
        clock.now += 0.1
        count(i, 15970, f"lib{i}.so")
    assert said == []
    clock.now = 110.0
    count(120, 15970, "libtorch_cuda.so")
    clock.now = 115.0
    count(121, 15970, "libc10.so")
    clock.now = 120.5
    count(122, 15970, "libnccl.so")
    assert said == [
        "inspect: 120/15970 files (libtorch_cuda.so)",
        "inspect: 122/15970 files (libnccl.so)",
    ]


@pytest.mark.unit
def test_a_count_on_a_terminal_is_the_live_line() -> None:
    said: list[str] = []
    clock = _Clock()
    stream, leader = _terminal()
    try:
        live = LiveLine(stream, environ={"COLUMNS": "80"})
        count = Counter("inspect", say=said.append, live=live, every=10.0, clock=clock)
        count(0, 3, "a.so")  # at once: a short read shows nothing
        clock.now += 0.6
        count(1, 3, "b.so")
        count.clear()
        drawn = _drain(leader)
    finally:
        stream.close()
        os.close(leader)
    assert drawn == f"{CLEAR}inspect: 1/3 files (b.so){CLEAR}"
    assert said == []


@pytest.mark.unit
@pytest.mark.parametrize("piece", [1, 2, 3, 7, 100])
def test_a_secret_split_across_pieces_never_reaches_a_streamed_log(piece: int) -> None:
    redactor = Redactor.from_environment({"MY_API_TOKEN": "s3cr3t-t0ken-value"})
    text = "token=s3cr3t-t0ken-value\npartial s3cr3t-t0ken done s3cr3t-t0ken-value!\n"
    stream = StreamRedactor(redactor)
    out = [stream.feed(text[i : i + piece]) for i in range(0, len(text), piece)]
    written = "".join(out) + stream.end()
    assert written == redactor.text(text)
    assert "s3cr3t-t0ken-value" not in written
    assert written.count(REDACTED) == 2


def _gate_run(project: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "gate", "run", "--target", "sm_90", "--no-store",
         "--stop-after", "build", "--evidence", "ev", "--build-dir", str(project / "b")],
        cwd=project, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip


def _wait_for_text(path: Path, text: str, gate: subprocess.Popen[str]) -> str:
    deadline = time.monotonic() + 300  # the probe compiles a program first
    while time.monotonic() < deadline and gate.poll() is None:
        if path.is_file() and text in (seen := path.read_text(encoding="utf-8")):
            return seen
        time.sleep(0.1)
    raise AssertionError(f"{path} never showed {text!r} while the step ran")


@pytest.mark.integration
def test_a_build_step_s_log_shows_its_output_while_it_runs(tmp_path: Path) -> None:
    if shutil.which("nvcc") is None and os.environ.get("CI") != "true":
        pytest.skip("nvcc is not installed (the probe stage needs it)")
    # The step prints, then waits for the test: the line must be in the log before it ends.
    script = (
        'echo "compiling kernels.cu token=$MY_API_TOKEN"; '
        "while [ ! -e release ]; do sleep 0.1; done; echo linked"
    )
    (tmp_path / "cuda-gate.toml").write_text(
        f'smoke = true\n[[build]]\nname = "slow"\ncommand = ["sh", "-c", \'{script}\']\n',
        encoding="utf-8",
    )
    env = {**os.environ, "MY_API_TOKEN": "s3cr3t-t0ken-value"}
    gate = _gate_run(tmp_path, env)
    log = tmp_path / "ev" / "build-slow.log"
    try:
        seen = _wait_for_text(log, "\ncompiling kernels.cu", gate)
        assert gate.poll() is None  # the step still runs
        assert "\nlinked" not in seen
        assert "compiling kernels.cu token=[redacted]" in seen
        assert "s3cr3t" not in seen
    finally:
        (tmp_path / "release").touch()
        _out, err = gate.communicate(timeout=300)
    assert "[3/8] build done" in err, err
    final = log.read_text(encoding="utf-8")
    assert final.splitlines()[2:] == ["compiling kernels.cu token=[redacted]", "linked"]
    assert "# running" not in final  # the whole log replaced the growing one


@pytest.mark.integration
def test_a_streamed_log_keeps_the_output_bound(tmp_path: Path) -> None:
    got: list[str] = []
    script = "head -c 5000 /dev/zero | tr '\\0' 'x'; echo; echo tail-line"
    result = proc.run(["sh", "-c", script], output_limit=1000, sink=got.append, timeout=60)
    streamed = "".join(got)
    assert streamed.startswith("x" * 1000)
    assert "x" * 1001 not in streamed
    assert "tail-line" not in streamed
    assert streamed.endswith(
        "[cuda-gate: output past 1000 bytes is not shown while the command runs; "
        "the log is completed when it ends]\n"
    )
    assert result.cut
    assert result.stdout.endswith("tail-line\n")  # the whole log still has its end


@pytest.mark.integration
def test_a_failed_entry_point_quotes_its_error_line_and_names_its_log(tmp_path: Path) -> None:
    # A wrapper that prints an epilogue after the error, as launch scripts do.
    imports = f"{sys.executable} -c 'import nonexistent_mod'; echo 'cleaning up'; exit 1"
    cuda = (
        "echo 'launching write_value'; "
        "echo 'CUDA error at kernels.cu:12: no kernel image is available for execution on the "
        "device' >&2; echo 'Done.'; exit 1"
    )
    points = [
        EntryPoint("imports", ("sh", "-c", imports), timeout=60),
        EntryPoint("kernel", ("sh", "-c", cuda), timeout=60),
    ]
    evidence = EvidenceDir.create(tmp_path / "ev")
    try:
        ran = execute.run(
            evidence,
            config=Config(project_dir=tmp_path),
            points=points,
            artifacts=[],
            capability=Capability(9, 0),
            driver_cuda=None,
            use_cache=False,
        )
    finally:
        evidence.release()
    messages = {c.name: c.message for c in ran.checks}
    log = tmp_path / "ev" / "entry-imports.native.log"
    assert messages["imports [native]"] == (
        "native SASS (PTX JIT disabled): exit status 1: "
        f"ModuleNotFoundError: No module named 'nonexistent_mod' (log: {log})"
    )
    assert "cleaning up" in log.read_text(encoding="utf-8")
    assert messages["kernel [jit]"] == (
        "forced PTX JIT: CUDA error at kernels.cu:12: no kernel image is available for "
        f"execution on the device (error 209) (log: {tmp_path / 'ev' / 'entry-kernel.ptx-jit.log'})"
    )


@pytest.mark.integration
def test_inspect_of_many_files_says_how_far_it_is_in_a_log(tmp_path: Path) -> None:
    folder = tmp_path / "libs"
    folder.mkdir()
    for i in range(40):
        shutil.copyfile(GOLDEN / "libkernels.so", folder / f"lib{i:02d}.so")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CUDA", "NVCC"))}

    def inspect(**extra: str) -> proc.Result:
        return proc.run(
            [sys.executable, "-m", "gate", "inspect", "--no-detect", str(folder)],
            base_env={**env, **extra},
            timeout=120,
        )

    quick = inspect()
    assert quick.returncode == 0, quick.stderr
    assert "inspect:" not in quick.stderr  # a short read says nothing
    often = inspect(CUDA_GATE_HEARTBEAT="0.000001")
    assert often.returncode == 0, often.stderr
    counts = [line for line in often.stderr.splitlines() if line.startswith("inspect: ")]
    assert counts, often.stderr
    assert counts[-1] == f"inspect: 39/40 files ({folder / 'lib39.so'})"
    assert "\r" not in often.stderr
    assert "\x1b" not in often.stderr
    assert often.stdout == quick.stdout  # the table is untouched


@pytest.mark.unit
def test_overlapping_secrets_never_reach_a_streamed_log() -> None:
    redactor = Redactor.from_environment({"A_TOKEN": "abcdefghij", "B_KEY": "fghijklmno"})
    text = "xx abcdefghijklmno yy fghijklmno zz\n"
    for piece in range(1, len(text) + 1):
        stream = StreamRedactor(redactor)
        pieces = [stream.feed(text[i : i + piece]) for i in range(0, len(text), piece)]
        written = "".join(pieces) + stream.end()
        assert "abcdefghij" not in written
        assert "fghijklmno" not in written
        assert written.endswith(" zz\n")


@pytest.mark.gpu
def test_a_configured_entry_point_that_fails_to_import_says_so_in_the_verdict(
    tmp_path: Path,
) -> None:
    (tmp_path / "cuda-gate.toml").write_text(
        'smoke = true\n[[entry_point]]\nname = "imports"\n'
        f'command = ["sh", "-c", "{sys.executable} -c \'import nonexistent_mod\'; '
        "echo 'cleaning up'; exit 1\"]\n",
        encoding="utf-8",
    )
    done = subprocess.run(
        [sys.executable, "-m", "gate", "run", "--no-store", "--evidence", "ev",
         "--build-dir", str(tmp_path / "b")],
        cwd=tmp_path, capture_output=True, text=True, timeout=1200, check=False,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    log = Path("ev") / "entry-imports.native.log"
    said = f"exit status 1: ModuleNotFoundError: No module named 'nonexistent_mod' (log: {log})"
    assert said in " ".join(done.stdout.split())  # the console table, wrapped between words
    record = json.loads((tmp_path / "ev" / "result.json").read_text(encoding="utf-8"))
    [check] = [c for c in record["checks"] if c["name"] == "imports [native]"]
    assert check["message"] == f"native SASS (PTX JIT disabled): {said}"
    assert said in " ".join(done.stdout.split())  # the verdict's headline, once
    assert "cleaning up" not in done.stderr
    assert "cleaning up" in (tmp_path / log).read_text(encoding="utf-8")
