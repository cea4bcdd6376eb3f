"""Each path of issue 45 item 6 ends with the status README "Exit statuses" gives it.

Real files and real `cuda-gate run` processes: a FIFO made by os.mkfifo and a link to
/dev/zero as an [[artifact]], a local store on a full tmpfs mounted for the test (root
only), a build that fills a tmpfs. No device here: a clean run is exit 4.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gate import proc
from gate.errors import ExitCode
from tests.test_exit_statuses import git_checkout

pytestmark = pytest.mark.integration


def gate(cwd: Path, *args: str, env: dict[str, str] | None = None) -> proc.Result:
    """`cuda-gate ARGS` as a real process in ``cwd`` (HOME and XDG are the test's own)."""
    merged = {**os.environ, **(env or {})}
    return proc.run([sys.executable, "-m", "gate", *args], cwd=cwd, base_env=merged, timeout=300)


def verdict(result: proc.Result) -> str:
    """The run's one verdict line."""
    (line,) = [line for line in result.stdout.splitlines() if line.startswith("Verdict: ")]
    return line


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs mounted for the test and filled to the last block; unmounted after."""
    if os.geteuid() != 0:
        pytest.skip("needs root to mount a tmpfs")
    mount = tmp_path / "full"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"needs root to mount a tmpfs (mount said: {done.stderr.strip()})")
    try:
        fd = os.open(mount / "fill", os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            while os.write(fd, b"\0" * 4096):
                pass
        except OSError:
            pass  # ENOSPC: full to the last block
        finally:
            os.close(fd)
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def _special(path: Path, kind: str) -> None:
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")


@pytest.mark.parametrize(("kind", "said"), [("fifo", "a FIFO"), ("dev-zero", "a character device")])
def test_a_fifo_or_a_link_to_dev_zero_as_an_artifact_is_a_bad_input(
    tmp_path: Path, kind: str, said: str
) -> None:
    (tmp_path / "build").mkdir()
    artifact = tmp_path / "build" / "lib.so"
    _special(artifact, kind)
    (tmp_path / "cuda-gate.toml").write_text('[[artifact]]\npath = "build/lib.so"\n')
    run = gate(tmp_path, "run", "--no-store", "--target", "sm_90")  # would block if opened
    assert run.returncode == ExitCode.BAD_INPUT, run.stdout + run.stderr  # was 7
    assert verdict(run) == (
        f"Verdict: not accepted: {tmp_path / 'cuda-gate.toml'}: artifact[0].path: "
        f"{artifact}: not a regular file ({said})"
    )
    inspected = gate(tmp_path, "inspect", "--device", "9.0", "build/lib.so")
    assert inspected.returncode == ExitCode.BAD_INPUT, inspected.stderr


def test_a_full_local_store_after_a_run_without_a_device_is_exit_20(
    tmp_path: Path, full_disk: Path
) -> None:
    checkout = git_checkout(tmp_path / "checkout")
    run = gate(checkout, "run", "--store", str(full_disk / "store"))
    # Not 4: that says "no CUDA device, and nothing else wrong".
    assert run.returncode == ExitCode.STORAGE, run.stdout + run.stderr  # was 4
    assert verdict(run).startswith("Verdict: not accepted: no CUDA device was usable")
    (error,) = [line for line in run.stderr.splitlines() if "error:" in line]
    assert error.startswith(f"cuda-gate: error: cannot write {full_disk / 'store'}/")
    assert "No space left on device; the evidence is kept in the spool" in error


APP = "__global__ void k(int *p) { *p = 1; }\nint main() { k<<<1, 1>>>(nullptr); return 0; }\n"


def _project(folder: Path, build: str) -> Path:
    folder.mkdir(exist_ok=True)
    (folder / "app.cu").write_text(APP)
    (folder / "cuda-gate.toml").write_text(f'{build}\n[[artifact]]\npath = "out/app"\n')
    return folder


def test_a_build_whose_temporary_folder_is_full_names_that_file_system(
    tmp_path: Path, full_disk: Path
) -> None:
    # nvcc with a full TMPDIR says only "Failed to preprocess host compiler properties":
    # statvfs of the step's temporary folder names the cause.
    project = _project(
        tmp_path / "p",
        '[[build]]\ncommand = "nvcc {gencode} -o out/app app.cu"\n'
        f'env = {{ TMPDIR = "{full_disk}" }}',
    )
    (project / "out").mkdir()
    run = gate(project, "run", "--no-store", "--target", "sm_90")
    assert run.returncode == ExitCode.TOOL, run.stdout + run.stderr
    line = verdict(run)
    assert "nvcc fatal" in line
    assert line.endswith(
        f"(the file system of {full_disk} (mounted at {full_disk}) is full: 0 bytes free)"
    )


def test_a_build_that_filled_its_output_folder_says_no_space(tmp_path: Path) -> None:
    # ld removes its partial output, so the disk is not full afterwards: its ENOSPC line
    # in the build's output is what says it (the last line is only collect2's epilogue).
    if os.geteuid() != 0:
        pytest.skip("needs root to mount a tmpfs")
    project = _project(tmp_path / "p", '[[build]]\ncommand = "nvcc {gencode} -o out/app app.cu"')
    out = project / "out"
    out.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(out)], check=True)
    try:
        run = gate(project, "run", "--no-store", "--target", "sm_90")
    finally:
        subprocess.run(["umount", str(out)], check=True)
    assert run.returncode == ExitCode.TOOL, run.stdout + run.stderr
    assert verdict(run).endswith(
        "(the build's output says No space left on device: a file system it wrote to was full)"
    )
