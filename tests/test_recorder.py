"""The launch recorder builds with nvcc and CUPTI, and writes a valid record (no GPU needed).

Without a driver CUPTI cannot subscribe; the recorder still writes its record, saying
so, which is what the execute stage reports as "could not observe". The no-CUPTI path
and a user's own injection library are said, never a crash.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from gate.launch import recorder
from gate.launch.log import read_folder

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = json.loads((ROOT / "gate/schemas/launches.schema.json").read_text(encoding="utf-8"))


def nvcc() -> str:
    found = shutil.which("nvcc")
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail("nvcc is missing in CI: the recorder must build there")
        pytest.skip("nvcc not on PATH")
    return found


def cupti(tool: str) -> recorder.Cupti:
    found = recorder.find_cupti(tool)
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail("no CUPTI in CI: the test extra installs nvidia-cuda-cupti")
        pytest.skip("no CUPTI (toolkit extras/CUPTI or the nvidia-cuda-cupti wheel)")
    return found


def test_recorder_builds_is_cached_and_writes_a_record_without_a_device(tmp_path: Path) -> None:
    tool = nvcc()
    where = cupti(tool)
    built = recorder.build(tool, tmp_path / "a", cupti=where, folder=tmp_path / "cache")
    assert built.library is not None, built.note
    assert where.source in built.note
    again = recorder.build(tool, tmp_path / "b", cupti=where, folder=tmp_path / "cache")
    assert again.build is not None
    assert again.build.reused  # kept like the probe
    # Loaded into every process of every run, it must carry no device code of its own (the
    # static runtime would bring an sm_75 cubin the run then judges as a loaded library).
    from gate.reader.read import read_artifact

    assert read_artifact(built.library).listing.entries == ()
    out = tmp_path / "launches"
    out.mkdir()
    env, note = built.env_for(out, {}, environ={})
    assert note == ""
    # The driver calls InitializeInjection at cuInit; here a process calls it directly.
    load = f"import ctypes; print(ctypes.CDLL({str(built.library)!r}).InitializeInjection())"
    done = subprocess.run(
        [sys.executable, "-c", load],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "1"  # never fails the process it is injected into
    (record,) = read_folder(out)
    jsonschema.validate(json.loads(record.path.read_text(encoding="utf-8")), SCHEMA)
    assert record.complete  # written again at exit
    assert record.kernels == ()


def test_the_recorder_and_its_cupti_are_not_counted_as_what_the_program_loaded(
    tmp_path: Path,
) -> None:
    """In a recorded run the loader log shows the recorder and the CUPTI it links (the
    driver loads them at cuInit); they are the gate's, never judged as the program's."""
    from gate.config import EntryPoint
    from gate.evidence import EvidenceDir
    from gate.rules.causes import ExecPath
    from gate.stages.runs import run_entry_point

    tool = nvcc()
    built = recorder.build(tool, tmp_path / "r", cupti=cupti(tool), folder=tmp_path / "cache")
    assert built.library is not None, built.note
    assert built.cupti is not None
    # Without a driver nothing loads the recorder, so the program loads it itself, as the
    # driver would: the recorder brings its CUPTI with it.
    load = f"import ctypes; ctypes.CDLL({str(built.library)!r})"
    entry = EntryPoint("loads", (sys.executable, "-c", load), expected_output="")
    plain = run_entry_point(entry, ExecPath.NATIVE)
    assert plain.result.ok, plain.result.output()
    ours = built.objects()
    assert ours == {built.library.resolve(), built.cupti.resolve()}
    assert ours <= set(plain.loaded)  # the loader log does show them
    evidence = EvidenceDir(tmp_path / "ev")
    evidence.root.mkdir()
    recorded = run_entry_point(entry, ExecPath.NATIVE, evidence=evidence, instrument=built)
    assert recorded.result.ok, recorded.result.output()
    assert recorded.launch_folder is not None
    assert not ours & set(recorded.loaded)
    assert Path(sys.executable).resolve() in recorded.loaded  # the program's own stay


def test_without_cupti_the_run_goes_on_and_says_so(tmp_path: Path) -> None:
    toolkit = tmp_path / "toolkit/bin"
    toolkit.mkdir(parents=True)
    fake = toolkit / "nvcc"
    fake.write_text("#!/bin/sh\nexit 0\n", encoding="utf-8")
    fake.chmod(0o755)
    assert recorder.find_cupti(str(fake), search_wheels=False) is None
    built = recorder.build(str(fake), tmp_path, cupti=None, search_wheels=False)
    assert built.library is None
    assert "no CUPTI found" in built.note
    assert built.env_for(tmp_path, {}, environ={}) == ({}, built.note)


def test_a_users_injection_library_is_kept(tmp_path: Path) -> None:
    mine = recorder.Recorder(tmp_path / "liblaunchrec.so", "recorded")
    env, note = mine.env_for(tmp_path, {}, environ={"CUDA_INJECTION64_PATH": "/opt/nsight/lib.so"})
    assert env == {}
    assert "already set (/opt/nsight/lib.so)" in note
    env, note = mine.env_for(tmp_path, {"CUDA_INJECTION64_PATH": "/x.so"}, environ={})
    assert env == {}
    assert "/x.so" in note


@pytest.mark.parametrize(
    ("wheel", "toolkit", "said"),
    [
        (
            (13, 5),
            (13, 0),
            "the nvidia-cuda-cupti wheel is CUDA 13.5, newer than the toolkit (CUDA 13.0)",
        ),
        ((13, 0), (13, 0), None),
        ((12, 8), (13, 0), None),  # an older CUPTI's headers build with a newer toolkit
        ((13, 1), (13, 0), "pip install 'nvidia-cuda-cupti~=13.0.0'"),
        (None, (13, 0), None),  # a toolkit's own CUPTI: always its own release
        ((13, 5), None, None),  # a toolkit that does not say: build and see
    ],
)
def test_a_cupti_wheel_newer_than_the_toolkit_is_said_not_built(
    wheel: tuple[int, int] | None, toolkit: tuple[int, int] | None, said: str | None
) -> None:
    found = recorder.Cupti(Path("/i"), Path("/l/libcupti.so.13"), "nvidia-cuda-cupti wheel", wheel)
    note = recorder.mismatch(found, toolkit)
    assert (note is None) == (said is None)
    if said is not None:
        assert note is not None
        assert said in note
        assert note.startswith("kernel launches not recorded")


def test_the_toolkit_version_is_the_release_nvcc_names() -> None:
    version = recorder.toolkit_version(nvcc())
    done = subprocess.run([nvcc(), "--version"], capture_output=True, text=True, check=True)
    assert version is not None
    assert f"release {version[0]}.{version[1]}," in done.stdout


CUBIN_SOURCE = """
template <typename T> __global__ void scale(T *x, T by) { x[threadIdx.x] *= by; }
template __global__ void scale<float>(float *, float);
template __global__ void scale<double>(double *, double);
__device__ int helper(int v) { return v + 1; }
__global__ void add_one(int *x) { x[0] = helper(x[0]); }
"""


def describe(library: Path, data: bytes) -> tuple[int, str, tuple[str, ...]]:
    """What the recorder's own cubin reader (cuda_gate_describe_cubin) says of ``data``."""
    import ctypes

    lib = ctypes.CDLL(str(library))
    fn = lib.cuda_gate_describe_cubin
    fn.restype = ctypes.c_size_t
    fn.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t]
    need = fn(data, len(data), None, 0)
    out = ctypes.create_string_buffer(need)
    assert fn(data, len(data), out, need) == need
    arch, digest, *kernels = out.value.decode().splitlines()
    return int(arch), digest, tuple(kernels)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a", "sm_120"])
def test_the_recorders_cubin_reader_agrees_with_the_gates_on_nvcc_cubins(
    tmp_path: Path, arch: str
) -> None:
    import hashlib

    from gate.reader.cubin import read_cubin

    tool = nvcc()
    built = recorder.build(tool, tmp_path / "r", cupti=cupti(tool), folder=tmp_path / "cache")
    assert built.library is not None, built.note
    (tmp_path / "k.cu").write_text(CUBIN_SOURCE, encoding="utf-8")
    subprocess.run(
        [tool, "-cubin", f"-arch={arch}", "-o", "k.cubin", "k.cu"],
        cwd=tmp_path,
        check=True,
        timeout=300,
    )
    data = (tmp_path / "k.cubin").read_bytes()
    ours = read_cubin(data, 0, len(data), "k.cubin")
    number, digest, kernels = describe(built.library, data)
    assert number == ours.arch == int(arch[3:].rstrip("a"))
    assert digest == hashlib.sha256(data).hexdigest()
    assert kernels == ours.kernels
    assert sorted(kernels) == ["_Z5scaleIdEvPT_S0_", "_Z5scaleIfEvPT_S0_", "_Z7add_onePi"]
    # Cut short or with its section table pointed past the end, it names no kernel and
    # never reads outside the image (a crash here would kill the program it observes).
    assert describe(built.library, data[:200])[2] == ()
    bent = bytearray(data)
    bent[0x28:0x30] = (len(data) - 8).to_bytes(8, "little")
    assert describe(built.library, bytes(bent))[2] == ()
    assert describe(built.library, b"\x7fELF")[0] == -1
