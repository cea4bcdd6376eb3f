"""Every word of the verdict exact: the false passes of issue 20, end to end, without a GPU.

Real nvcc builds, the real `cuda-gate run` and `cuda-gate inspect`: an arch-specific
target met only by its own code, kernels matched by whole names, checks that saw nothing
failing, stale artifacts named, the host a device ships on, and the test-result
attestation holding every check in exactly one list, never a check that did not run as
passed. (The gpu tier runs the ones that need a device: tests/test_gpu_decisions.py.)
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import gpu_unavailable_reason
from tests.decision_builds import isa_too_new

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(gpu_unavailable_reason() is None, reason="a CUDA device is visible here"),
]

SOURCE = """
__global__ void scale_f32_fast1(float *p) { *p *= 2.0f; }
__global__ void write_value(int *p) { *p = 7; }
"""


def nvcc() -> str:
    found = shutil.which("nvcc")
    assert found is not None, "nvcc is needed (the CI machine has it)"
    return found


def gate(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gate", *args],
        cwd=cwd,
        env=os.environ.copy(),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def result_of(evidence: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((evidence / "result.json").read_text(encoding="utf-8"))
    return data


@pytest.fixture(scope="module")
def plain_sm90(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A shared library with plain sm_90 SASS and compute_90 PTX only."""
    folder = tmp_path_factory.mktemp("plain-sm90")
    (folder / "k.cu").write_text(SOURCE, encoding="utf-8")
    subprocess.run(
        [nvcc(), "-shared", "-Xcompiler", "-fPIC", "-o", "libk.so", "k.cu",
         "-gencode", "arch=compute_90,code=[sm_90,compute_90]"],
        cwd=folder, check=True, capture_output=True,
    )  # fmt: skip
    return folder / "libk.so"


def project(tmp_path: Path, library: Path, config: str) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    shutil.copy2(library, folder / library.name)
    (folder / "cuda-gate.toml").write_text(config, encoding="utf-8")
    return folder


def checks_of(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in result["checks"]}


def test_a_required_arch_specific_target_is_not_met_by_plain_code(
    tmp_path: Path, plain_sm90: Path
) -> None:
    folder = project(tmp_path, plain_sm90, 'targets = ["sm_90a"]\n[[artifact]]\npath = "libk.so"\n')
    done = gate("run", "--target", "sm_90", "--no-store", "--evidence", "ev", cwd=folder)
    assert done.returncode == 1, done.stderr
    checks = checks_of(result_of(folder / "ev"))
    sass = checks["libk.so: SASS for sm_90a"]
    assert sass["state"] == "failed"
    assert sass["message"].startswith("no SASS for sm_90a: sm_90 present, but sm_90a needs sm_90a")
    assert checks["libk.so: PTX for compute_90a"]["state"] == "failed"
    # The plain target is met by the same file: the difference is the form alone.
    assert checks["libk.so: SASS for sm_90"]["state"] == "passed"


def test_target_sm_90a_on_the_command_line_needs_sm_90a_code(
    tmp_path: Path, plain_sm90: Path
) -> None:
    folder = project(tmp_path, plain_sm90, '[[artifact]]\npath = "libk.so"\n')
    done = gate("run", "--target", "sm_90a", "--no-store", "--evidence", "ev", cwd=folder)
    assert done.returncode == 1, done.stderr
    result = result_of(folder / "ev")
    checks = checks_of(result)
    assert checks["libk.so: SASS for sm_90a"]["state"] == "failed"
    assert checks["smoke: SASS for sm_90a"]["state"] == "passed"  # built as asked
    probe = checks["sm_90a supported by the toolkit"]
    assert "sm_90a is accepted by nvcc" in probe["message"]  # asked of nvcc, not sm_90's row
    assert result["requirements"] == [{"target": "sm_90a", "form": "arch"}]


def test_a_kernel_is_matched_by_its_whole_name_and_the_match_is_named(
    tmp_path: Path, plain_sm90: Path
) -> None:
    config = '[[artifact]]\npath = "libk.so"\nkernels = ["scale", "write_value"]\n'
    folder = project(tmp_path, plain_sm90, config)
    gate("run", "--target", "sm_90", "--no-store", "--evidence", "ev", cwd=folder)
    checks = checks_of(result_of(folder / "ev"))
    missing = checks["libk.so: kernel scale in sm_90 SASS"]
    assert missing["state"] == "failed"
    assert missing["message"] == (
        "scale missing from sm_90 SASS (kernels named like it: scale_f32_fast1(float*))"
    )
    found = checks["libk.so: kernel write_value in compute_90 PTX"]
    assert found["state"] == "passed"
    assert found["message"] == ("write_value present in compute_90 PTX as write_value(int*)")


def test_a_stale_artifact_is_a_warning_and_with_the_switch_a_failure(
    tmp_path: Path, plain_sm90: Path
) -> None:
    config = '[[build]]\ncommand = ["true"]\n[[artifact]]\npath = "libk.so"\n'
    folder = project(tmp_path, plain_sm90, config)
    hour_ago = time.time() - 3600
    os.utime(folder / "libk.so", (hour_ago, hour_ago))  # `make` said "up to date"
    gate("run", "--target", "sm_90", "--no-store", "--evidence", "ev", cwd=folder)
    stale = checks_of(result_of(folder / "ev"))["libk.so: written by this run's build"]
    assert stale["state"] == "warned"
    assert "not written by this run's build: last modified" in stale["message"]
    (folder / "cuda-gate.toml").write_text('stale_artifacts = "fail"\n' + config, encoding="utf-8")
    done = gate("run", "--target", "sm_90", "--no-store", "--evidence", "ev2", cwd=folder)
    assert done.returncode == 1
    result = result_of(folder / "ev2")
    assert result["verdict"]["cause"] == "stale-artifact"
    assert result["verdict"]["statement"].startswith(
        "not accepted: libk.so: written by this run's build: not written by this run's build"
    )
    # Rebuilt (written after the build started): fresh.
    config = '[[build]]\ncommand = ["touch", "libk.so"]\n[[artifact]]\npath = "libk.so"\n'
    (folder / "cuda-gate.toml").write_text('stale_artifacts = "fail"\n' + config, encoding="utf-8")
    gate("run", "--target", "sm_90", "--no-store", "--evidence", "ev3", cwd=folder)
    fresh = checks_of(result_of(folder / "ev3"))["libk.so: written by this run's build"]
    assert fresh["state"] == "passed"


def test_a_static_run_for_an_aarch64_only_device_checks_the_artifact_against_aarch64(
    tmp_path: Path, plain_sm90: Path
) -> None:
    folder = project(tmp_path, plain_sm90, '[[artifact]]\npath = "libk.so"\n')
    gate("run", "--target", "sm_121", "--no-store", "--evidence", "ev", cwd=folder)
    checks = checks_of(result_of(folder / "ev"))
    host = checks["libk.so: host ELF machine"]
    assert host["state"] == "failed"
    assert host["cause"] == "wrong-host-arch"
    assert host["message"] == (
        "x86-64 does not run on aarch64 (12.1 devices ship on aarch64 hosts only "
        "(GB10 (DGX Spark and other GB10 systems)))"
    )
    # The smoke program never ships: the machine in front is its host.
    assert checks["smoke: host ELF machine"]["state"] == "passed"
    # A config naming a host the device never ships with is a failure, not a choice.
    (folder / "cuda-gate.toml").write_text(
        'host = "x86_64"\n[[artifact]]\npath = "libk.so"\n', encoding="utf-8"
    )
    gate("run", "--target", "sm_121", "--no-store", "--evidence", "ev2", cwd=folder)
    named = checks_of(result_of(folder / "ev2"))["libk.so: host ELF machine"]
    assert named["message"].endswith(
        "the config says host x86_64, but 12.1 devices ship on aarch64 only"
    )


def test_no_device_attestation_lists_the_unrun_runs_as_failed(tmp_path: Path) -> None:
    done = gate("run", "--target", "sm_90", "--no-store", "--evidence", "ev", cwd=tmp_path)
    assert done.returncode == 4, done.stderr
    ev = tmp_path / "ev"
    statement = json.loads((ev / "test-result.json").read_text(encoding="utf-8"))
    predicate = statement["predicate"]
    assert predicate["result"] == "FAILED"
    assert "default.gate.execute.native::smoke [native]" in predicate["failedTests"]
    assert "default.gate.execute.jit::smoke [jit]" in predicate["failedTests"]
    every = predicate["passedTests"] + predicate["warnedTests"] + predicate["failedTests"]
    assert len(every) == len(set(every)) == len(result_of(ev)["checks"])  # one list each
    # The spec's policy example, for the device this run was for: all its tests passed or
    # warned. A run that never executed anything must not meet it.
    device_tests = [t for t in every if ".gate.execute." in t]
    passed_or_warned = set(predicate["passedTests"]) | set(predicate["warnedTests"])
    assert device_tests
    assert not all(t in passed_or_warned for t in device_tests)


def test_each_state_means_the_same_in_result_json_junit_and_both_statements(
    tmp_path: Path,
) -> None:
    gate("run", "--target", "sm_90", "--no-store", "--evidence", "ev", cwd=tmp_path)
    ev = tmp_path / "ev"
    record = {c["name"]: c["state"] for c in result_of(ev)["checks"]}
    assert set(record.values()) >= {"passed", "warned", "not-run"}
    manifest = json.loads((ev / "manifest.json").read_text(encoding="utf-8"))["predicate"]
    assert {c["name"]: c["state"] for c in manifest["checks"]} == record
    lists = json.loads((ev / "test-result.json").read_text(encoding="utf-8"))["predicate"]
    in_list = {
        test.split("::", 1)[1]: key
        for key in ("passedTests", "warnedTests", "failedTests")
        for test in lists[key]
    }
    expected_list = {
        "passed": "passedTests",
        "warned": "warnedTests",
        "failed": "failedTests",
        "not-run": "failedTests",
    }
    assert in_list == {name: expected_list[state] for name, state in record.items()}
    junit: dict[str, str] = {}
    for case in ET.parse(ev / "junit.xml").getroot().iter("testcase"):  # noqa: S314
        if case.find("skipped") is not None:
            junit[str(case.get("name"))] = "not-run"
        elif case.find("failure") is not None or case.find("error") is not None:
            junit[str(case.get("name"))] = "failed"
        elif str(case.findtext("system-out") or "").startswith("WARNING: "):
            junit[str(case.get("name"))] = "warned"
        else:
            junit[str(case.get("name"))] = "passed"
    assert junit == record


def test_inspect_fails_on_what_has_nothing_to_check(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    zero = tmp_path / "libzero.so"
    zero.write_bytes(b"")
    (tmp_path / "k.cu").write_text(SOURCE, encoding="utf-8")
    subprocess.run(
        [nvcc(), "-c", "-dc", "-gencode", "arch=compute_90,code=lto_90", "-o", "k.o", "k.cu"],
        cwd=tmp_path, check=True, capture_output=True,
    )  # fmt: skip
    subprocess.run(["ar", "rcs", "libk.a", "k.o"], cwd=tmp_path, check=True)
    for path, code, words in (
        (empty, 6, "no file to inspect"),
        (zero, 6, "empty file"),
        (tmp_path / "libk.a", 1, "LTO IR only (lto_90): it runs nowhere until it is device-linked"),
    ):
        done = gate("inspect", "--no-detect", "--require-device", "9.0", str(path), cwd=tmp_path)
        assert done.returncode == code, (path, done.stderr)
        assert words in done.stderr, done.stderr
        assert "Traceback" not in done.stderr


def test_ptx_of_an_isa_newer_than_the_driver_is_read_with_the_driver_it_needs(
    tmp_path: Path,
) -> None:
    # The gpu tier runs this program (tests/test_gpu_decisions.py); here its reading.
    app = isa_too_new(tmp_path / "isa")
    done = gate("inspect", "--no-detect", "--names", "--device", "9.0", str(app), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "1 kernel through PTX JIT (compute_90, ISA 9.2, driver >= 13.2)\n" in done.stdout
    assert "SASS   sm_80" in done.stdout


def test_a_library_judged_as_a_whole_by_default_and_per_kernel_with_strict(
    tmp_path: Path,
) -> None:
    # Like cuBLAS: kernels for several devices, each in the builds for its own. On 12.1:
    # 'generic' runs from sm_120 SASS, 'hopper' exists only in sm_90a (not expected there),
    # 'ampere' only in sm_80 SASS (expected, and has nothing there).
    sources = {
        "generic.cu": ("generic", "arch=compute_120,code=[sm_120,compute_120]"),
        "hopper.cu": ("hopper", "arch=compute_90a,code=sm_90a"),
        "ampere.cu": ("ampere", "arch=compute_80,code=sm_80"),
    }
    objects = []
    for name, (kernel, gencode) in sources.items():
        (tmp_path / name).write_text(
            f'extern "C" __global__ void {kernel}(int *p) {{ *p = 1; }}\n', encoding="utf-8"
        )
        obj = name.replace(".cu", ".o")
        subprocess.run(
            [nvcc(), "-c", "-Xcompiler", "-fPIC", "-gencode", gencode, "-o", obj, name],
            cwd=tmp_path, check=True, capture_output=True,
        )  # fmt: skip
        objects.append(obj)
    subprocess.run(
        [nvcc(), "-shared", "-o", "libv.so", *objects],
        cwd=tmp_path,
        check=True,
        capture_output=True,
    )
    lib = str(tmp_path / "libv.so")
    base = ("inspect", "--no-detect", "--require-device", "12.1")
    whole = gate(*base, "--names", lib, cwd=tmp_path)
    assert whole.returncode == 0, whole.stderr  # something in it runs there, as in the run
    assert (
        "device 12.1: no code for 1 of 2 kernels (ampere); 1 kernel only for other devices: "
        "1 kernel from compatible SASS (sm_120)\n"
    ) in whole.stdout
    headers = gate(*base, lib, cwd=tmp_path)
    assert headers.returncode == 0, headers.stderr  # the same answer without names
    strict = gate(*base, "--strict", lib, cwd=tmp_path)
    assert strict.returncode == 1
    assert (
        f"{lib}: on 12.1: no code for 1 of 2 kernels (ampere); 1 kernel only for other devices"
        in strict.stderr
    )
    # The same library as a distribution's, in an environment: the audit judges it by the
    # same rule, as a whole by default and per kernel with --strict.
    site = tmp_path / "env" / "lib" / "python3.12" / "site-packages"
    (site / "vlib").mkdir(parents=True)
    shutil.copyfile(lib, site / "vlib" / "libv.so")
    info = site / "vlib-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: vlib\nVersion: 1.0\n")
    (info / "RECORD").write_text("vlib/libv.so,,\nvlib-1.0.dist-info/METADATA,,\n")
    env = str(tmp_path / "env")
    audit = gate(*base, env, cwd=tmp_path)
    assert audit.returncode == 0, audit.stderr
    audit_strict = gate(*base, "--strict", "--json", env, cwd=tmp_path)
    assert audit_strict.returncode == 1
    # Its kernels were counted: the line names the one without code (of all 3 counted, as
    # the distribution's line counts them).
    assert (
        "vlib 1.0: does not run on 12.1: no code for 1 of 3 kernels (ampere) in vlib/libv.so"
    ) in audit_strict.stderr
    (part,) = json.loads(audit_strict.stdout)["distributions"][0]["devices"][0]["parts"]
    assert part["reason"].endswith(
        "libv.so: on 12.1: no code for 1 of 2 kernels (ampere); 1 kernel only for other devices"
    )


def test_a_host_only_library_built_by_nvcc_needs_no_device(tmp_path: Path) -> None:
    # nvcc gives host-only code a kernel-less cubin per target (libcufftw.so: sm_52). By
    # its target alone the distribution could not run on 12.1; its cubins are read whole
    # even without --names, it needs no device, and the library beside it decides.
    (tmp_path / "k.cu").write_text('extern "C" __global__ void k(int *p) { *p = 1; }\n')
    (tmp_path / "w.cu").write_text("int wrap(int x) { return x + 1; }\n")
    site = tmp_path / "env" / "lib" / "python3.12" / "site-packages"
    (site / "fft").mkdir(parents=True)
    for src, lib, arch in (("k.cu", "libk.so", "sm_120"), ("w.cu", "libw.so", "sm_80")):
        subprocess.run(
            [nvcc(), "-shared", "-Xcompiler", "-fPIC", "-o", str(site / "fft" / lib), src,
             "-gencode", f"arch=compute_{arch[3:]},code={arch}"],
            cwd=tmp_path, check=True, capture_output=True,
        )  # fmt: skip
    info = site / "fft-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fft\nVersion: 1.0\n")
    (info / "RECORD").write_text("fft/libk.so,,\nfft/libw.so,,\nfft-1.0.dist-info/METADATA,,\n")
    env = str(tmp_path / "env")
    base = ("inspect", "--no-detect", "--no-cache", "--require-device", "12.1")
    for mode, verdict in (
        ((), "compatible SASS (sm_120); by target only (--names: per kernel)"),
        (("--names",), "compatible SASS (sm_120) for its 1 kernel"),
    ):
        done = gate(*base, *mode, env, cwd=tmp_path)
        assert done.returncode == 0, (mode, done.stderr)
        row = next(line for line in done.stdout.splitlines() if line.startswith("fft "))
        assert row.endswith(f"12.1    {verdict}"), (mode, row)
    listed = gate(
        "inspect", "--no-detect", "--no-cache", str(site / "fft" / "libw.so"), cwd=tmp_path
    )
    assert "SASS   sm_80" in listed.stdout
    assert "0 kernels" in listed.stdout  # read whole, though no --names was given
