"""The dlopen-kernels example: a real CMake + nvcc build from its cuda-gate config, inspected.

Built once per configuration in a temp copy, for sm_90 through the {cmake_archs}
placeholder, as the gate would. The good build carries every kernel as sm_90 SASS and
compute_90 PTX; the DROP_ARCH build (the arch-list bug) silently lacks sm_90, and the
inspection checks say so naming the artifact and the missing target.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gate import config, proc
from gate.evidence import EvidenceDir
from gate.reader.listing import Kind
from gate.rules.causes import ExecPath, RuntimeFailure
from gate.rules.require import Requirement
from gate.rules.targets import Target
from gate.stages import inspect as inspection
from gate.stages import probe, runs
from gate.stages.loaded import loader_env, parse_loaded
from gate.system import machine as environment

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "dlopen-kernels"
SM90 = Target.parse("sm_90")
KERNELS = ("scale_f32", "scale_f64", "sum_f32")


def build(tmp: Path, config_name: str, target: Target = SM90) -> config.Config:
    """Copy the example, run its configured build commands for ``target``, return its config."""
    for tool in ("cmake", "nvcc"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} not found")
    project = tmp / "dlopen-kernels"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns("build", "build-*"))
    loaded = config.load(project, project / config_name)
    for step in loaded.builds:
        command = step.render(loaded.required_targets(target), {"nvcc": environment.nvcc_path()})
        result = proc.run(
            command.argv, env_set=dict(command.env), cwd=command.cwd, timeout=command.timeout
        )
        assert result.ok, f"{command.name}: {result.output()[-2000:]}"
    return loaded


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> config.Config:
    return build(tmp_path_factory.mktemp("good"), "cuda-gate.toml")


@pytest.fixture(scope="module")
def dropped(tmp_path_factory: pytest.TempPathFactory) -> config.Config:
    return build(tmp_path_factory.mktemp("dropped"), "cuda-gate-drop-arch.toml")


def inspect(path: Path, tmp_path: Path) -> inspection.Inspected:
    return inspection.inspect_artifact(path, EvidenceDir.create(tmp_path / "evidence"))


@pytest.mark.integration
def test_the_arch_comes_from_the_placeholder_and_cmake_refuses_to_guess(
    good: config.Config, tmp_path: Path
) -> None:
    cache = (good.project_dir / "build" / "CMakeCache.txt").read_text(encoding="utf-8")
    assert "CMAKE_CUDA_ARCHITECTURES:UNINITIALIZED=90\n" in cache
    refused = proc.run(["cmake", "-S", str(good.project_dir), "-B", str(tmp_path / "b")])
    assert refused.returncode != 0
    assert "set CMAKE_CUDA_ARCHITECTURES (cuda-gate passes {cmake_archs})" in refused.output()


@pytest.mark.integration
def test_the_artifacts_resolve_and_the_library_carries_every_kernel_for_sm_90(
    good: config.Config, tmp_path: Path
) -> None:
    resolved = config.resolve_artifact_specs(good)
    assert [a.path.name for a in resolved] == ["libkernels.so", "app"]
    library = resolved[0]
    assert library.kernels == KERNELS
    artifact = inspect(library.path, tmp_path)
    assert artifact.listing.targets(Kind.SASS) == (SM90,)
    assert artifact.listing.targets(Kind.PTX) == (SM90.as_ptx(),)
    assert set(artifact.listing.kernels_for(Kind.SASS, SM90)) == set(KERNELS)
    assert set(artifact.listing.kernels_for(Kind.PTX, SM90.as_ptx())) == set(KERNELS)
    found = inspection.listing_checks(
        artifact.name, artifact.listing, Requirement.of_target(SM90), library.kernels
    )
    assert all(c.ok for c in found), [c.message for c in found if not c.ok]


@pytest.mark.integration
def test_the_app_is_not_linked_against_the_library_and_has_no_device_code(
    good: config.Config, tmp_path: Path
) -> None:
    app = inspect(good.project_dir / "build" / "app", tmp_path)
    assert "libkernels.so" not in {d.name for d in app.dependencies}
    assert app.listing.entries == ()


@pytest.mark.integration
def test_running_the_app_records_the_dlopened_library(good: config.Config, tmp_path: Path) -> None:
    """No GPU here: the app fails with the runtime's own error, after loading libkernels.so."""
    entry = good.entry_points[0].entry_point()
    env = {**dict(entry.env), **loader_env(tmp_path)}
    result = proc.run(entry.argv, env_set=env, cwd=entry.cwd, timeout=entry.timeout)
    loaded = {lib.path for lib in parse_loaded(tmp_path, cwd=Path(entry.cwd or "."))}
    assert (good.project_dir / "build" / "libkernels.so").resolve() in loaded
    if not result.ok:
        assert result.returncode == 1, result.output()
        assert "scale_f32 failed: CUDA error" in result.stderr


@pytest.mark.integration
def test_the_dropped_arch_build_lacks_sm_90_and_the_checks_name_it(
    dropped: config.Config, tmp_path: Path
) -> None:
    library = config.resolve_artifact_specs(dropped)[0]
    assert library.path == (dropped.project_dir / "build-drop-arch" / "libkernels.so").resolve()
    artifact = inspect(library.path, tmp_path)
    assert SM90 not in artifact.listing.targets(Kind.SASS)
    assert SM90.as_ptx() not in artifact.listing.targets(Kind.PTX)
    assert artifact.listing.targets(Kind.SASS) == (Target.parse("sm_80"),)
    failed = [
        c
        for c in inspection.listing_checks(
            artifact.name, artifact.listing, Requirement.of_target(SM90), library.kernels
        )
        if not c.ok
    ]
    names = {c.name for c in failed}
    assert "libkernels.so: SASS for sm_90" in names
    assert "libkernels.so: PTX for compute_90" in names
    assert any("no SASS for sm_90 (needs sm_90); SASS targets: sm_80" in c.message for c in failed)


@pytest.fixture(scope="module")
def device_target(tmp_path_factory: pytest.TempPathFactory) -> Target:
    """The detected device's target, read by the gate's own probe."""
    binary, _ = probe.build_probe(environment.nvcc_path(), tmp_path_factory.mktemp("probe"))
    capability, _ = probe.run_probe(binary)
    return capability.sm()


@pytest.mark.gpu
def test_every_entry_point_passes_both_paths_on_the_device(
    device_target: Target, tmp_path: Path
) -> None:
    built = build(tmp_path, "cuda-gate.toml", device_target)
    library = (built.project_dir / "build" / "libkernels.so").resolve()
    for spec in built.entry_points:
        for path in ExecPath:
            run = runs.run_entry_point(spec.entry_point(), path)
            assert run.passed, f"{spec.name} [{run.path.value}]: {run.reason()}"
            assert library in run.loaded


@pytest.mark.gpu
def test_the_dropped_arch_build_fails_natively_and_passes_only_through_jit(
    device_target: Target, tmp_path: Path
) -> None:
    """sm_80 SASS cannot run on the device; its compute_80 PTX still JIT-compiles there."""
    if device_target.number == 80:
        pytest.skip("the dropped-arch build is the device's own target here")
    built = build(tmp_path, "cuda-gate-drop-arch.toml", device_target)
    entry = built.entry_points[0].entry_point()
    native, jit = (runs.run_entry_point(entry, path) for path in ExecPath)
    assert not native.passed
    assert native.failure in {
        RuntimeFailure.NO_KERNEL_IMAGE,
        RuntimeFailure.JIT_DISABLED,
    }, native.result.output()
    assert jit.passed, jit.reason()
