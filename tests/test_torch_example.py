"""The torch-extension example: its configs, the target lists they render, and the gate on it.

The unit tests read the two configurations and the sources (no torch, no GPU). The
integration tests run `cuda-gate run --target sm_90` on a copy where a CUDA build of torch
is installed but no GPU is visible (build and inspect only); the gpu tests run the gate
end to end on the device. Both need the Python that has torch (tests/torchenv.py finds it)
and hand it to the gate as CUDA_GATE_PYTHON.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gate import config
from gate.config import placeholders
from gate.rules.require import Requirement
from gate.rules.targets import Capability, Target
from tests.conftest import gpu_unavailable_reason
from tests.torchenv import needs_torch

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "torch-extension"
GOOD, DROPPED = "cuda-gate.toml", "cuda-gate-drop-arch.toml"
KERNELS = ("rms_norm_kernel", "silu_and_mul_kernel", "silu_and_mul_vec_kernel")
DTYPES = ("float32", "float64", "float16", "bfloat16")  # AT_DISPATCH_FLOATING_TYPES_AND2
GLOBAL_RE = re.compile(r"__global__\s+void\s+(\w+)\s*\(")


def load(name: str, project: Path = EXAMPLE) -> config.Config:
    return config.load(project, project / name)


def arch_list(loaded: config.Config, target: str) -> str:
    """TORCH_CUDA_ARCH_LIST of the wheel build, rendered for ``target`` as the gate renders it."""
    (wheel,) = [b for b in loaded.builds if b.name == "wheel"]
    value = dict(wheel.env)["TORCH_CUDA_ARCH_LIST"]
    return placeholders.substitute(value, loaded.required_targets(Target.parse(target)))


def torch_arch(target: Target) -> str:
    """How TORCH_CUDA_ARCH_LIST names a target: 9.0, 12.1, 9.0a."""
    sass = target.as_sass()
    return f"{sass.major}.{sass.minor}{sass.variant.value}"


@pytest.mark.unit
@pytest.mark.parametrize("name", [GOOD, DROPPED])
def test_the_configs_load_with_a_wheel_artifact_and_one_check_per_dtype(name: str) -> None:
    loaded = load(name)
    assert [b.name for b in loaded.builds] == ["clean", "wheel", "install"]
    (artifact,) = loaded.artifacts
    assert artifact.pattern.endswith("/*.whl")
    assert artifact.kernels == KERNELS
    assert [e.name for e in loaded.entry_points] == [f"check-{d}" for d in DTYPES]
    for entry, dtype in zip(loaded.entry_points, DTYPES, strict=True):
        assert entry.command == ("{python}", "-m", "torch_ext_example.check", dtype)
        assert dict(entry.env)["PYTHONPATH"] == "build/site"
        assert entry.expected_output == f"(?m)^{dtype}: PASS$"


@pytest.mark.unit
@pytest.mark.parametrize(
    ("target", "expected"),
    [("sm_90", "9.0+PTX"), ("sm_121", "12.1+PTX"), ("sm_90a", "9.0a+PTX"), ("sm_120", "12.0+PTX")],
)
def test_the_good_build_asks_torch_for_sass_and_ptx_of_the_target(
    target: str, expected: str
) -> None:
    assert arch_list(load(GOOD), target) == expected


@pytest.mark.unit
@pytest.mark.parametrize("target", ["sm_90", "sm_121", "sm_90a", "sm_100", "sm_120"])
def test_the_dropped_build_has_neither_sass_nor_ptx_for_the_target(target: str) -> None:
    entries = arch_list(load(DROPPED), target).split(";")
    assert entries == ["8.0"]
    assert torch_arch(Target.parse(target)) not in {e.removesuffix("+PTX") for e in entries}
    assert not any(e.endswith("+PTX") for e in entries)  # no PTX: nothing to JIT either


@pytest.mark.unit
def test_the_variants_differ_only_in_the_arch_list_and_their_output_folder() -> None:
    good, dropped = load(GOOD), load(DROPPED)

    def same(text: str) -> str:
        return text.replace("dist-drop-arch", "dist")

    for a, b in zip(good.builds, dropped.builds, strict=True):
        assert a.command == tuple(same(arg) for arg in b.command)
        env_a, env_b = dict(a.env), dict(b.env)
        env_a.pop("TORCH_CUDA_ARCH_LIST", None)
        env_b.pop("TORCH_CUDA_ARCH_LIST", None)
        assert env_a == env_b
    assert [a.pattern for a in good.artifacts] == [same(a.pattern) for a in dropped.artifacts]
    assert [replace(e, key="") for e in good.entry_points] == [
        replace(e, key="") for e in dropped.entry_points
    ]


@pytest.mark.unit
def test_the_configured_kernels_are_exactly_the_kernels_in_the_sources() -> None:
    sources = sorted((EXAMPLE / "csrc").glob("*.cu"))
    found = {k for path in sources for k in GLOBAL_RE.findall(path.read_text(encoding="utf-8"))}
    assert found == set(KERNELS)
    for name in (GOOD, DROPPED):
        doc = tomllib.loads((EXAMPLE / name).read_text(encoding="utf-8"))
        assert [a.get("kernels") for a in doc["artifact"]] == [list(KERNELS)]
    for path in sources:  # and each is dispatched over the types the entry points check
        assert "AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16," in path.read_text(
            encoding="utf-8"
        )


@pytest.mark.unit
def test_the_build_outputs_are_ignored_by_git() -> None:
    ignored = (EXAMPLE / ".gitignore").read_text(encoding="utf-8").splitlines()
    assert {"build/", "dist/", "dist-drop-arch/", "*.egg-info/"} <= set(ignored)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    copy = tmp_path / "torch-extension"
    shutil.copytree(EXAMPLE, copy, ignore=shutil.ignore_patterns("build", "dist*", "*.egg-info"))
    return copy


def ready(project: Path, name: str) -> None:
    """Skip without a CUDA torch; the config must load here before the gate is run on it."""
    needs_torch()
    load(name, project)


def gate(project: Path, name: str, *args: str) -> tuple[subprocess.CompletedProcess[str], Any]:
    """`cuda-gate run` on the copy; caches the builds could write go to the temp folder."""
    cache_dir = project.parent / "cache"
    env = {
        **os.environ,
        "CUDA_GATE_PYTHON": needs_torch(),
        "XDG_CACHE_HOME": str(cache_dir),
        "PIP_CACHE_DIR": str(cache_dir / "pip"),
        "TORCH_HOME": str(cache_dir / "torch"),
        "TRITON_CACHE_DIR": str(cache_dir / "triton"),
    }
    evidence = project.parent / "ev"
    command = [sys.executable, "-m", "gate", "run", "--no-store", "--evidence", str(evidence)]
    done = subprocess.run(
        [*command, "--config", str(project / name), *args],
        cwd=project.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
    )
    path = evidence / "result.json"
    return done, json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def failed(result: Any) -> dict[str, str]:
    return {c["name"]: c["message"] for c in result["checks"] if c["state"] == "failed"}


def extension_checks(result: Any) -> dict[str, str]:
    """Failed checks of the wheel's _C extension, by name without the file name."""
    return {
        name.split(": ", 1)[1]: message
        for name, message in failed(result).items()
        if name.startswith("_C.") and ": " in name
    }


@pytest.mark.integration
@pytest.mark.skipif(gpu_unavailable_reason() is None, reason="a CUDA device is visible here")
def test_the_wheel_builds_for_sm_90_with_every_kernel_as_sass_and_ptx(project: Path) -> None:
    ready(project, GOOD)
    done, result = gate(project, GOOD, "--target", "sm_90")
    commands = (project.parent / "ev" / "commands.txt").read_text(encoding="utf-8")
    assert "TORCH_CUDA_ARCH_LIST=9.0+PTX" in commands, done.stdout + done.stderr
    assert failed(result) == {}  # a clean static run: only the missing device stands in the way
    assert done.returncode == 4
    assert [a["name"] for a in result["artifacts"]][1:] == [
        next(project.glob("build/site/torch_ext_example/_C.*.so")).name
    ]


@pytest.mark.integration
def test_the_dropped_arch_wheel_is_refused_naming_the_missing_sass_and_ptx(project: Path) -> None:
    ready(project, DROPPED)
    done, result = gate(project, DROPPED, "--target", "sm_90")
    assert done.returncode != 0
    problems = extension_checks(result)
    assert problems["SASS for sm_90"] == ("no SASS for sm_90 (needs sm_90); SASS targets: sm_80")
    assert problems["PTX for compute_90"].startswith("no PTX for compute_90")
    for kernel in KERNELS:
        assert f"kernel {kernel} in sm_90 SASS" in problems


@pytest.mark.gpu
def test_the_example_is_accepted_on_the_device_on_both_paths(project: Path) -> None:
    ready(project, GOOD)
    done, result = gate(project, GOOD)
    assert done.returncode == 0, done.stdout + done.stderr
    assert result["verdict"]["accepted"] is True
    runs = {(e["entry_point"], e["path"]): e["passed"] for e in result["executions"]}
    checks = {c["name"]: c for c in result["checks"]}
    for dtype in DTYPES:
        assert runs[(f"check-{dtype}", "native")], dtype
        # The whole program passed forced JIT, or it failed as predicted (torch ships no
        # PTX) and is a warning, because the extension's own PTX loaded.
        jit = checks[f"check-{dtype} [jit]"]
        assert jit["state"] in ("passed", "warned"), jit["message"]
    libraries = {Path(lib["path"]).name: lib for lib in result["loaded_libraries"]}
    extension = [lib for name, lib in libraries.items() if name.startswith("_C.")]
    assert extension, libraries.keys()
    assert extension[0]["declared"]
    torch_cuda = libraries["libtorch_cuda.so"]
    assert torch_cuda["runs"]
    assert torch_cuda["route"].startswith("exact SASS")
    proofs = [c for c in result["checks"] if c["name"].endswith("loads under forced JIT")]
    assert proofs
    assert all(c["state"] == "passed" for c in proofs), proofs
    if result["launches"] is not None:
        # The recorder saw every kernel of the extension launched from JIT output on the
        # forced-JIT path: that proves its PTX; no module is loaded again.
        coverage = {(c["artifact"], c["path"]): c for c in result["launches"]["coverage"]}
        own = extension[0]["path"].rsplit("/", 1)[-1]
        for path in ("native", "jit"):
            assert coverage[(own, path)]["never"] == [], coverage[(own, path)]
        jit_routes = {k["route"] for k in coverage[(own, "jit")]["launched"]}
        assert all("JIT-compiled" in route for route in jit_routes), jit_routes
        assert all("(launch recorder)" in c["message"] for c in proofs), proofs
        assert all(
            "recorded forced-JIT launches" in p for p in result["paths_proved"] if "check-" in p
        ), result["paths_proved"]
    # torch ships no PTX: the report says so of libtorch_cuda.so, and why whole-program
    # forced JIT can only pass by luck (lazy loading) names the libraries that block it.
    cap = result["device"]["capability"]
    said = " ".join(done.stdout.split())  # the report wraps long lines
    # The console counts torch's libraries in one line; the evidence file lists each.
    assert re.search(rf"\d+ other libraries run here: .* ships? no PTX for {cap} \(", said), said
    assert "(loaded-libraries.txt lists each)" in said
    listed = (project.parent / "ev" / "loaded-libraries.txt").read_text(encoding="utf-8")
    sass = f"sm_{cap.replace('.', '')}"
    assert re.search(
        rf"/libtorch_cuda\.so  \[device code: runs from exact SASS \({sass}\); no PTX for {cap}: ",
        listed,
    ), listed
    assert all(f"no PTX for {cap}" in p for p in result["paths_proved"] if "check-" in p), result[
        "paths_proved"
    ]
    print(f"\nsummary table (torch extension):\n{done.stdout}")


@pytest.mark.gpu
def test_the_dropped_arch_example_is_refused_statically_and_fails_on_the_device(
    project: Path,
) -> None:
    ready(project, DROPPED)
    done, result = gate(project, DROPPED)
    target = result["device"]["target"]
    if target.startswith("sm_8"):
        pytest.skip(f"sm_80 SASS runs on this device ({target})")
    assert done.returncode != 0
    assert result["verdict"]["accepted"] is False
    problems = extension_checks(result)
    device = Requirement.of_device(Capability.parse(result["device"]["capability"]))
    label = device.sass_label()  # the probed device: code built for it, in any form
    needs = " or ".join(str(t) for t in device.accepted(ptx=False))
    assert problems[f"SASS for {label}"] == (
        f"no SASS for {label} (needs {needs}); SASS targets: sm_80"
    )
    runs = [e for e in result["executions"] if e["entry_point"].startswith("check-")]
    assert runs
    assert not any(e["passed"] for e in runs)
    no_image = "no kernel image is available for execution on the device"
    assert all(e["failure"] == no_image for e in runs if e["path"] == "native"), runs
