"""Reading a wheel costs memory independent of its members' sizes: real processes, real rusage.

A wheel member is inflated into an unnamed temporary file and read mapped from it, as a
plain file is, so `cuda-gate inspect` of a wheel whose library is 300 MB peaks at what
reading the small library alone takes. The member is the golden nvcc-built
``libkernels.so`` padded at its end (bytes no section covers, as a real library's
tail can be) with data that deflates about 10:1, under the zip-bomb ratio.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import zipfile
from pathlib import Path

import pytest

from gate.errors import ExitCode
from tests.peak import run_measured

GOLDEN = Path(__file__).parent / "golden"
MB = 1 << 20
MEMBER = 300 * MB
# Far below the member: the whole member held in memory once is already 300 MB. Reading
# the golden library alone peaks at about 25 MB (Python and the gate's imports).
PEAK_BOUND = MEMBER // 4

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def padded_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A wheel holding ``pkg/libk.so``: the golden library padded to MEMBER bytes."""
    wheel = tmp_path_factory.mktemp("wheel") / "pkg-1.0-py3-none-linux_x86_64.whl"
    library = (GOLDEN / "libkernels.so").read_bytes()
    # One byte in 16 set, at random: deflate gets about 10:1, and no run repeats
    # within its 32 kB window (a 300 MB run of zeros would be refused as a zip bomb).
    block = os.urandom(16 * MB).translate(bytes(int(b < 16) for b in range(256)))
    with (
        zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as archive,
        archive.open("pkg/libk.so", "w", force_zip64=True) as member,
    ):
        member.write(library)
        left = MEMBER - len(library)
        while left > 0:
            member.write(block[:left])
            left -= len(block[:left])
    return wheel


def _inspect(*args: str, cwd: Path, prefix: tuple[str, ...] = ()) -> tuple[int, str, str, int]:
    """`cuda-gate inspect ARGS` as a process: exit code, stdout, stderr, its own peak RSS."""
    env = {**os.environ, "CUDA_GATE_CACHE_DIR": str(cwd / "cache")}
    gate = [sys.executable, "-m", "gate", "inspect", "--no-detect", *args]
    done, peak = run_measured([*prefix, *gate], cwd / "peak", cwd=cwd, env=env)
    return done.returncode, done.stdout, done.stderr, peak


@pytest.mark.parametrize("mode", [(), ("--names", "--no-cache")], ids=["headers", "names"])
def test_a_300_mb_member_is_read_in_a_fraction_of_its_size(
    padded_wheel: Path, tmp_path: Path, mode: tuple[str, ...]
) -> None:
    code, out, err, peak = _inspect(*mode, "--json", str(padded_wheel), cwd=tmp_path)
    assert code == 0, err
    (art,) = json.loads(out)["artifacts"]
    assert art["path"] == f"{padded_wheel}!pkg/libk.so"
    assert art["targets"]["sass"] == ["sm_80", "sm_120"]
    if mode:
        assert art["kernels"] == 3
    print(
        f"\n{' '.join(mode) or 'headers'}: peak {peak / MB:.0f} MB for a {MEMBER // MB} MB member"
    )
    assert peak < PEAK_BOUND, f"peak RSS {peak / MB:.0f} MB reading a {MEMBER // MB} MB member"


def test_a_temporary_folder_without_room_stops_the_wheel_in_one_line(
    padded_wheel: Path, tmp_path: Path
) -> None:
    # `ulimit -f` (64 MB): writing past it fails with EFBIG, as a full disk fails with
    # ENOSPC; Python ignores SIGXFSZ, so the write returns the error.
    limit = (shutil.which("bash") or "/bin/bash", "-c", 'ulimit -f 65536 && exec "$@"', "bash")
    code, _, err, _ = _inspect(str(padded_wheel), cwd=tmp_path, prefix=limit)
    assert code == ExitCode.BAD_INPUT
    lines = err.strip().splitlines()
    assert "Traceback" not in err
    assert lines[0] == (
        f"cuda-gate: error: {padded_wheel}!pkg/libk.so: cannot write the inflated member: "
        "File too large (a temporary file; TMPDIR chooses its folder)"
    )
