"""A failed step says where to look: the line that carries the error, and the log file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gate.proc import Result

PIP = """\
Processing ./ext
  Preparing metadata (pyproject.toml): started
  error: subprocess-exited-with-error
  x Preparing metadata (pyproject.toml) did not run successfully.
  │ exit code: 1
  ╰─> [6 lines of output]
      Traceback (most recent call last):
        File "<string>", line 2, in <module>
      ModuleNotFoundError: No module named 'torch'
      [end of output]
  note: This error originates from a subprocess, and is likely not a problem with pip.
error: metadata-generation-failed
hint: See above for details.
"""
NVCC = """\
[1/2] Building CUDA object kernels.cu.o
FAILED: kernels.cu.o
kernels.cu(12): error: identifier "undefined_thing" is undefined
1 error detected in the compilation of "kernels.cu".
ninja: build stopped: subcommand failed.
"""
CMAKE = """\
-- The CXX compiler identification is GNU 12.2.0
CMake Error at CMakeLists.txt:3 (project):
  No CMAKE_CUDA_COMPILER could be found.
-- Configuring incomplete, errors occurred!
"""
LINK = """\
/usr/bin/ld: main.o: in function `main':
main.cc:(.text+0x12): undefined reference to `launch_kernel'
collect2: error: ld returned 1 exit status
"""
# A toolkit installed from NVIDIA's wheels: its libraries are in lib/, nvcc looks in lib64/.
NO_LIB = """\
/usr/bin/ld: cannot find -lcudart_static: No such file or directory
/usr/bin/ld: cannot find -lcudadevrt: No such file or directory
collect2: error: ld returned 1 exit status
"""
NO_OUTPUT = """\
/usr/bin/ld: cannot open output file build/libmyk.so: No such file or directory
collect2: error: ld returned 1 exit status
"""
SETUPTOOLS = """\
/usr/local/cuda/bin/nvcc -c k.cu -o build/k.o
k.cu(3): error: expected a ";"
1 error detected in the compilation of "k.cu".
error: command '/usr/local/cuda/bin/nvcc' failed with exit code 1
"""
TORCH = """\
FAILED: /tmp/b/k.cuda.o
k.cu(7): error: identifier "blockIdx_x" is undefined
1 error detected in the compilation of "k.cu".
ninja: build stopped: subcommand failed.
Traceback (most recent call last):
subprocess.CalledProcessError: Command '['ninja', '-v']' returned non-zero exit status 1.
RuntimeError: Error compiling objects for extension
"""
MAKE = """\
nvcc -c k.cu
k.cu:1:10: fatal error: missing.h: No such file or directory
compilation terminated.
make: *** [Makefile:3: k.o] Error 1
"""
# nvcc (CUDA 13.0) where PATH has no gcc.
NO_GCC = """\
gcc: No such file or directory
nvcc fatal   : Failed to preprocess host compiler properties.
"""


@pytest.mark.unit
@pytest.mark.parametrize(
    ("output", "line"),
    [
        (PIP, "ModuleNotFoundError: No module named 'torch'"),
        (NVCC, 'kernels.cu(12): error: identifier "undefined_thing" is undefined'),
        (
            CMAKE,
            "CMake Error at CMakeLists.txt:3 (project): No CMAKE_CUDA_COMPILER could be found.",
        ),
        (LINK, "main.cc:(.text+0x12): undefined reference to `launch_kernel'"),
        (NO_LIB, "/usr/bin/ld: cannot find -lcudadevrt: No such file or directory"),
        (
            NO_OUTPUT,
            "/usr/bin/ld: cannot open output file build/libmyk.so: No such file or directory",
        ),
        (SETUPTOOLS, 'k.cu(3): error: expected a ";"'),
        (TORCH, 'k.cu(7): error: identifier "blockIdx_x" is undefined'),
        (MAKE, "k.cu:1:10: fatal error: missing.h: No such file or directory"),
        (
            "collect2: error: ld returned 1 exit status\n",
            "collect2: error: ld returned 1 exit status",
        ),
        ("compiling\nsomething odd happened\n", "something odd happened"),
        ("", ""),
    ],
)
def test_the_error_line_is_the_one_that_says_what_went_wrong(output: str, line: str) -> None:
    result = Result(("tool",), 1, output, "", 0.1)
    assert result.error_line() == line
    described = result.describe_failure("build step 'x'", log="ev/build-x.log")
    assert described == (
        f"build step 'x' failed with exit status 1: {line or 'no output'} (log: ev/build-x.log)"
    )


@pytest.mark.integration
def test_a_failed_build_step_names_its_error_and_its_log(tmp_path: Path) -> None:
    (tmp_path / "fail.sh").write_text(f"cat <<'OUT'\n{PIP}OUT\nexit 1\n", encoding="utf-8")
    (tmp_path / "cuda-gate.toml").write_text(
        'smoke = true\n[[build]]\nname = "wheel"\ncommand = ["sh", "fail.sh"]\n',
        encoding="utf-8",
    )
    done = subprocess.run(
        [sys.executable, "-m", "gate", "run", "--target", "sm_90", "--no-store",
         "--evidence", "ev", "--build-dir", str(tmp_path / "b")],
        cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 3, done.stderr
    log = tmp_path / "ev" / "build-wheel.log"
    expected = (
        f"build step 'wheel' ({tmp_path / 'cuda-gate.toml'}: build[0]) failed with exit status 1: "
        "ModuleNotFoundError: "
        f"No module named 'torch' (log: {Path('ev') / 'build-wheel.log'})"
    )
    record = json.loads((tmp_path / "ev" / "result.json").read_text(encoding="utf-8"))
    [check] = [c for c in record["checks"] if c["name"] == "build wheel"]
    assert check["message"].endswith(
        ": build[0] failed with exit status 1: ModuleNotFoundError: No module named 'torch' "
        f"(log: {Path('ev') / 'build-wheel.log'})"
    )
    assert f"Verdict: not accepted: {expected}" in done.stdout.splitlines()
    assert log.is_file()
    assert "hint: See above" not in done.stderr


@pytest.mark.integration
def test_a_long_build_step_shows_a_heartbeat_with_its_last_line(tmp_path: Path) -> None:
    import os

    (tmp_path / "cuda-gate.toml").write_text(
        'smoke = true\n[[build]]\nname = "slow"\n'
        'command = ["sh", "-c", "echo compiling kernels.cu; sleep 3; echo done"]\n',
        encoding="utf-8",
    )
    done = subprocess.run(
        [sys.executable, "-m", "gate", "run", "--target", "sm_90", "--no-store",
         "--stop-after", "build", "--evidence", "ev", "--build-dir", str(tmp_path / "b")],
        cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False,
        env={**os.environ, "CUDA_GATE_HEARTBEAT": "1"},
    )  # fmt: skip
    beats = [line for line in done.stderr.splitlines() if line.startswith("[3/8] build: sh")]
    assert beats, done.stderr
    assert beats[0].startswith("[3/8] build: sh -c 'echo compiling kernels.cu; sleep 3; echo")
    assert beats[0].endswith(": compiling kernels.cu")
    assert " running 0m01s" in beats[0]


@pytest.mark.unit
@pytest.mark.parametrize(
    ("output", "hinted"),
    [
        (NO_GCC, True),
        ("gcc: fatal error: cannot execute 'as': execvp: No such file or directory\n", True),
        ("gcc: fatal error: cannot execute 'cc1plus': execvp: No such file or directory\n", True),
        (NVCC, False),
    ],
)  # fmt: skip
def test_an_nvcc_without_a_host_compiler_is_told_to_install_one(output: str, hinted: bool) -> None:
    from gate.system.machine import HOST_COMPILER_HINT, nvcc_failure_hint

    assert nvcc_failure_hint(output) == (HOST_COMPILER_HINT if hinted else None)


@pytest.mark.integration
def test_a_machine_without_gxx_hears_that_nvcc_needs_it(tmp_path: Path) -> None:
    """A fresh Debian with python3, venv and git but no g++ (tests/test_readme_in_container):
    nvcc's own words alone do not say what is missing."""
    import os
    import shutil

    nvcc = shutil.which("nvcc")
    assert nvcc is not None, "nvcc is needed (the CI machine has it)"
    done = subprocess.run(
        [sys.executable, "-m", "gate", "run", "--target", "sm_90", "--no-store",
         "--stop-after", "build", "--evidence", "ev", "--build-dir", str(tmp_path / "b")],
        cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False,
        env={**os.environ, "PATH": str(tmp_path), "CUDA_GATE_NVCC": nvcc},
    )  # fmt: skip
    assert done.returncode == 3, done.stderr
    assert done.stdout.splitlines()[-2] == (
        "Verdict: not accepted: building the probe failed with exit status 1: nvcc fatal : "
        "Failed to preprocess host compiler properties. (nvcc found no working host C++ compiler: "
        "it runs gcc/g++ from PATH (or -ccbin, NVCC_CCBIN); install g++ (Debian/Ubuntu: apt "
        "install g++))"
    )
