"""A CUDA toolkit installed from NVIDIA's wheels (issue 40): found, linked, and what it lacks
said by name.

The wheels unpack into site-packages/nvidia/cu13 with their libraries in lib/, where
nvcc.profile never looks (it adds lib64/): without the gate's help every link fails with
``cannot find -lcudart_static``. The unit part builds the layouts in a temporary folder; the
integration part installs the real 13.0 wheels (about 104 MB, cached in .work/wheels) and
gates a one-kernel project with them.
"""

from __future__ import annotations

import os
import platform
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from gate import proc
from gate.errors import ExitCode, ToolError
from gate.system import toolkit
from tests.pypi_wheels import fetch, folder
from tests.pypi_wheels import toolkit as toolkit_wheels

PARTS = {part: name for name, part in toolkit.PARTS}


def _touch(path: Path, *, executable: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"")
    if executable:
        path.chmod(path.stat().st_mode | stat.S_IXUSR)


def wheel_layout(site: Path, *, major: int = 13, leave_out: tuple[str, ...] = ()) -> Path:
    """site/nvidia/cuMAJOR as the five wheels leave it, less the parts ``leave_out`` names;
    returns its nvcc."""
    root = site / "nvidia" / f"cu{major}"
    _touch(root / "bin" / "nvcc", executable=True)
    for part in PARTS:
        if part not in leave_out:
            _touch(root / part)
    (site / f"nvidia_cuda_nvcc-{major}.0.88.dist-info").mkdir(parents=True, exist_ok=True)
    return root / "bin" / "nvcc"


@pytest.mark.unit
def test_a_complete_wheel_toolkit_links_from_lib_and_lacks_nothing(tmp_path: Path) -> None:
    nvcc = wheel_layout(tmp_path)
    found = toolkit.of(str(nvcc))
    root = tmp_path / "nvidia" / "cu13"
    assert (found.root, found.from_wheels, found.libraries, found.missing) == (
        root,
        True,
        root / "lib",
        (),
    )
    assert found.link_flags() == [f"-L{root / 'lib'}"]
    assert found.missing_hint() is None
    assert found.described() == f"from NVIDIA's wheels at {root}"


@pytest.mark.unit
@pytest.mark.parametrize(
    ("left_out", "wheel"),
    [
        ("nvvm/bin/cicc", "nvidia-nvvm"),
        ("include/crt/host_config.h", "nvidia-cuda-crt"),
        ("include/cuda_runtime.h", "nvidia-cuda-runtime"),
        ("lib/libcudart_static.a", "nvidia-cuda-runtime"),
        ("include/cccl/cuda/std/version", "nvidia-cuda-cccl"),
    ],
)
def test_each_missing_wheel_is_named_with_the_release_of_nvcc(
    tmp_path: Path, left_out: str, wheel: str
) -> None:
    nvcc = wheel_layout(tmp_path, leave_out=(left_out,))
    found = toolkit.of(str(nvcc))
    assert found.missing == (f"{wheel}==13.0.*",)
    hint = found.missing_hint()
    assert hint is not None
    assert f"lacks {wheel}: pip install '{wheel}==13.0.*' into the same environment" in hint
    assert toolkit.failure_hint(str(nvcc), "anything") == hint


@pytest.mark.unit
def test_a_runtime_wheel_missing_is_named_once_for_its_two_parts(tmp_path: Path) -> None:
    nvcc = wheel_layout(
        tmp_path, leave_out=("include/cuda_runtime.h", "lib/libcudart_static.a", "nvvm/bin/cicc")
    )
    found = toolkit.of(str(nvcc))
    assert found.missing == ("nvidia-nvvm==13.0.*", "nvidia-cuda-runtime==13.0.*")
    assert found.libraries is None  # nothing to link against: not passed


@pytest.mark.unit
def test_an_installed_toolkit_is_left_as_its_profile_says(tmp_path: Path) -> None:
    root = tmp_path / "cuda-13.0"
    _touch(root / "bin" / "nvcc", executable=True)
    _touch(root / "lib64" / "libcudart_static.a")
    _touch(root / "lib" / "libcudart_static.a")  # a lib folder beside lib64 changes nothing
    found = toolkit.of(str(root / "bin" / "nvcc"))
    assert (found.from_wheels, found.libraries, found.missing) == (False, None, ())
    assert found.link_flags() == []
    assert found.build_environment(str(root / "bin" / "nvcc"), {"PATH": "/usr/bin"}) == {}
    assert toolkit.failure_hint(str(root / "bin" / "nvcc"), "cannot find -lcudart") is None


@pytest.mark.unit
def test_a_project_build_gets_the_library_folder_and_this_nvcc_first(tmp_path: Path) -> None:
    nvcc = str(wheel_layout(tmp_path))
    lib = tmp_path / "nvidia" / "cu13" / "lib"
    bin_ = tmp_path / "nvidia" / "cu13" / "bin"
    other = tmp_path / "other"
    _touch(other / "nvcc", executable=True)
    found = toolkit.of(nvcc)
    assert found.build_environment(nvcc, {"PATH": f"{other}:/usr/bin"}) == {
        "LIBRARY_PATH": str(lib),
        "PATH": f"{bin_}:{other}:/usr/bin",
    }
    # The user's LIBRARY_PATH is kept after it; a PATH that already finds this nvcc stays.
    assert found.build_environment(nvcc, {"PATH": f"{bin_}", "LIBRARY_PATH": "/x"}) == {
        "LIBRARY_PATH": f"{lib}:/x"
    }


@pytest.mark.unit
def test_the_shared_runtime_the_wheels_do_not_carry_is_said(tmp_path: Path) -> None:
    nvcc = str(wheel_layout(tmp_path))
    said = toolkit.failure_hint(nvcc, "/usr/bin/ld: cannot find -lcudart: No such file")
    assert said is not None
    assert "-l:libcudart.so.<major>" in said
    assert toolkit.failure_hint(nvcc, "/usr/bin/ld: cannot find -lcudart_static") is None


@pytest.mark.unit
def test_the_newest_major_is_found_first_then_the_first_folder(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    wheel_layout(a, major=12)
    newest = wheel_layout(b, major=13)
    assert toolkit.wheel_nvcc([a, b]) == str(newest)
    first = wheel_layout(a, major=13)
    assert toolkit.wheel_nvcc([a, b]) == str(first)
    assert toolkit.wheel_nvcc([tmp_path / "none"]) is None
    Path(first).chmod(0o644)  # not executable: not an nvcc
    assert toolkit.wheel_nvcc([a]) == str(Path(a) / "nvidia" / "cu12" / "bin" / "nvcc")


@pytest.mark.unit
def test_a_project_interpreter_adds_its_environment(tmp_path: Path) -> None:
    site = tmp_path / "venv" / "lib" / "python3.12" / "site-packages"
    site.mkdir(parents=True)
    folders = toolkit.search_folders(str(tmp_path / "venv" / "bin" / "python3"))
    assert folders[-1] == site
    assert folders[: len(folders) - 1] == toolkit.search_folders(None)


# The real wheels -------------------------------------------------------------------------

SOURCE = "__global__ void scale(float *x) { x[threadIdx.x] *= 2; }\nint main() { return 0; }\n"
CONFIG = """\
[[build]]
name = "app"
command = ["{nvcc}", "{gencode}", "k.cu", "-o", "app"]

[[artifact]]
path = "app"
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The five 13.0 wheels installed by pip into a folder of their own."""
    wheels = []
    for wheel in toolkit_wheels(platform.machine()):
        try:
            wheels.append(fetch(wheel, folder()))
        except ToolError as e:
            pytest.fail(f"cannot download {wheel.requirement}: {e.one_line()}")
    target = tmp_path_factory.mktemp("toolkit") / "site-packages"
    proc.run_checked(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index",
         "--disable-pip-version-check", "--target", str(target), *map(str, wheels)],
        what="pip install", timeout=600,
    )  # fmt: skip
    return target


def _gate(project: Path, nvcc: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("LIBRARY_PATH", "CUDA_HOME")}
    env["CUDA_GATE_NVCC"] = str(nvcc)
    return subprocess.run(
        [sys.executable, "-m", "gate", "run", "--target", "sm_90", "--no-store", "-v", *args],
        cwd=project, env=env, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip


def _project(tmp_path: Path, command: str | None = None) -> Path:
    (tmp_path / "k.cu").write_text(SOURCE, encoding="utf-8")
    config = CONFIG if command is None else CONFIG.replace('"k.cu", "-o", "app"', command)
    (tmp_path / "cuda-gate.toml").write_text(config, encoding="utf-8")
    return tmp_path


@pytest.mark.integration
def test_a_project_builds_and_passes_its_static_checks_with_the_wheel_toolkit(
    site: Path, tmp_path: Path
) -> None:
    nvcc = site / "nvidia" / "cu13" / "bin" / "nvcc"
    project = _project(tmp_path)
    done = _gate(project, nvcc)
    out = done.stdout + done.stderr
    # Clean, but never run on a device (exit 4): every static check passed, none failed.
    assert done.returncode == ExitCode.NO_DEVICE, out
    assert "FAIL" not in out
    summary = (project / "gate-evidence" / "summary.md").read_text(encoding="utf-8")
    assert f"from NVIDIA's wheels at {site / 'nvidia' / 'cu13'} |" in summary
    assert "SASS for sm_90 present" in summary
    lib = site / "nvidia" / "cu13" / "lib"
    smoke_log = (project / "gate-evidence" / "build.log").read_text(encoding="utf-8")
    assert f"-L{lib}" in smoke_log.splitlines()[0]
    app_log = (project / "gate-evidence" / "build-app.log").read_text(encoding="utf-8")
    assert f"LIBRARY_PATH={lib}" in app_log.splitlines()[0]


@pytest.mark.integration
def test_a_missing_wheel_is_named_before_and_after_the_failed_build(
    site: Path, tmp_path: Path
) -> None:
    copy = tmp_path / "site-packages"
    shutil.copytree(site / "nvidia", copy / "nvidia", symlinks=True)
    for record in site.glob("nvidia_cuda_nvcc-*.dist-info"):
        shutil.copytree(record, copy / record.name)
    shutil.rmtree(copy / "nvidia" / "cu13" / "nvvm")
    (tmp_path / "p").mkdir()
    project = _project(tmp_path / "p")
    done = _gate(project, copy / "nvidia" / "cu13" / "bin" / "nvcc")
    out = done.stdout + done.stderr
    assert done.returncode != 0, out
    said = "lacks nvidia-nvvm: pip install 'nvidia-nvvm==13.0.*' into the same environment"
    verdict = [line for line in done.stdout.splitlines() if line.startswith("Verdict:")]
    assert len(verdict) == 1, out
    assert said in verdict[0], out
    assert [line for line in out.splitlines() if line.startswith("WARN") and "toolkit" in line]


@pytest.mark.integration
def test_a_shared_runtime_link_says_what_the_wheels_carry(site: Path, tmp_path: Path) -> None:
    project = _project(tmp_path, '"-cudart", "shared", "k.cu", "-o", "app"')
    done = _gate(project, site / "nvidia" / "cu13" / "bin" / "nvcc")
    out = done.stdout + done.stderr
    assert done.returncode != 0, out
    assert "-l:libcudart.so.<major>" in out, out
