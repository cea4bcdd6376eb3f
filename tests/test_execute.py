"""The execution paths, with real child processes (small scripts standing in for programs)."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from gate import proc
from gate.config import EntryPoint
from gate.rules.causes import ExecPath, RuntimeFailure
from gate.stages.runs import run_entry_point

pytestmark = pytest.mark.integration

ENV_PRINTER = """#!/bin/sh
echo "FORCE=${CUDA_FORCE_PTX_JIT-unset}"
echo "DISABLE=${CUDA_DISABLE_PTX_JIT-unset}"
echo "CACHE_DISABLE=${CUDA_CACHE_DISABLE-unset}"
echo "CACHE_PATH=${CUDA_CACHE_PATH-unset}"
echo "TILE_CACHE=${CUDA_TILE_CACHE_DIR-unset}"
echo PASS
"""


def script(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / name
    path.write_text(body, encoding="utf-8")
    path.chmod(0o755)
    return path


def values(output: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in output.splitlines() if "=" in line)


def test_native_path_disables_jit_and_isolates_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    warm = tmp_path / "warm-cache"
    warm.mkdir()
    # The user's shell has a warm cache and even forces JIT: none of it may reach the child.
    monkeypatch.setenv("CUDA_CACHE_PATH", str(warm))
    monkeypatch.setenv("CUDA_FORCE_PTX_JIT", "1")
    entry = EntryPoint("env", (str(script(tmp_path, "env.sh", ENV_PRINTER)),))
    native = run_entry_point(entry, ExecPath.NATIVE)
    seen = values(native.result.stdout)
    assert seen["FORCE"] == "unset"
    assert seen["DISABLE"] == "1"
    assert seen["CACHE_DISABLE"] == "1"
    assert seen["CACHE_PATH"] not in (str(warm), "unset")
    assert not Path(seen["CACHE_PATH"]).exists()  # fresh folder, removed afterwards
    assert native.passed
    assert os.environ["CUDA_FORCE_PTX_JIT"] == "1"  # the parent's environment is untouched


def test_jit_path_forces_jit_without_cache_and_each_run_is_fresh(tmp_path: Path) -> None:
    entry = EntryPoint("env", (str(script(tmp_path, "env.sh", ENV_PRINTER)),))
    native, jit = (run_entry_point(entry, path) for path in ExecPath)
    seen = values(jit.result.stdout)
    assert (seen["FORCE"], seen["DISABLE"], seen["CACHE_DISABLE"]) == ("1", "unset", "1")
    assert seen["CACHE_PATH"] != values(native.result.stdout)["CACHE_PATH"]
    assert (native.log_name, jit.log_name) == ("native.log", "ptx-jit.log")


def test_a_run_that_leaves_cache_state_fails(tmp_path: Path) -> None:
    body = '#!/bin/sh\necho junk > "$CUDA_CACHE_PATH/index"\necho PASS\n'
    run = run_entry_point(EntryPoint("dirty", (str(script(tmp_path, "d.sh", body)),)), ExecPath.JIT)
    assert not run.cache_clean
    assert not run.passed
    assert "JIT cache" in run.reason()


def test_each_run_gets_its_own_empty_cutile_cache_so_no_cached_cubin_stands_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # cuTile compiles at first launch and keeps the cubin in CUDA_TILE_CACHE_DIR: a
    # program that finds a cubin there skips tileiras. The user's warm cache, and what
    # one run compiled, must not reach another run.
    warm = tmp_path / "cutile-python"
    warm.mkdir()
    (warm / "kernel.cubin").write_text("cached\n")
    monkeypatch.setenv("CUDA_TILE_CACHE_DIR", str(warm))
    body = (
        '#!/bin/sh\nls -A "$CUDA_TILE_CACHE_DIR" | grep -q . && { echo "CACHED"; exit 1; }\n'
        'echo compiled > "$CUDA_TILE_CACHE_DIR/kernel.cubin"\n'
        'echo "TILE_CACHE=$CUDA_TILE_CACHE_DIR"\necho PASS\n'
    )
    entry = EntryPoint("tile", (str(script(tmp_path, "tile.sh", body)),))
    native, jit = (run_entry_point(entry, path) for path in ExecPath)
    assert native.passed, native.result.stdout
    assert jit.passed, jit.result.stdout
    folders = {values(run.result.stdout)["TILE_CACHE"] for run in (native, jit)}
    assert len(folders) == 2
    assert str(warm) not in folders
    assert not any(Path(folder).exists() for folder in folders)  # removed afterwards
    assert native.cache_clean  # cuTile's cache is not the driver's
    assert jit.cache_clean
    assert (warm / "kernel.cubin").read_text() == "cached\n"  # the user's is untouched


def test_exit_zero_without_pass_is_a_failure(tmp_path: Path) -> None:
    run = run_entry_point(
        EntryPoint("quiet", (str(script(tmp_path, "q.sh", "#!/bin/sh\nexit 0\n")),)),
        ExecPath.NATIVE,
    )
    assert not run.passed
    assert "expected output" in run.reason()


def test_runtime_error_text_is_classified(tmp_path: Path) -> None:
    body = (
        "#!/bin/sh\necho 'no kernel image is available for execution on the device' >&2\nexit 1\n"
    )
    run = run_entry_point(EntryPoint("k", (str(script(tmp_path, "k.sh", body)),)), ExecPath.JIT)
    assert run.failure is RuntimeFailure.NO_KERNEL_IMAGE
    assert "error 209" in run.reason()


def test_hung_program_and_its_children_are_killed(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    body = f"#!/bin/sh\nsleep 300 &\necho $! > {pidfile}\nsleep 300\n"
    start = time.monotonic()
    run = run_entry_point(
        EntryPoint("hang", (str(script(tmp_path, "h.sh", body)),), timeout=1.0), ExecPath.NATIVE
    )
    assert time.monotonic() - start < 15
    assert run.result.timed_out
    assert not run.passed
    assert run.reason() == "killed after 1 s"
    child = int(pidfile.read_text(encoding="utf-8"))
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and _alive(child):
        time.sleep(0.05)
    assert not _alive(child), "the grandchild survived the timeout"


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8")
    except OSError:
        return False
    return stat.split()[2] != "Z"  # a zombie is dead, only not yet reaped


def test_missing_program_is_a_one_line_tool_error(tmp_path: Path) -> None:
    from gate.errors import ToolError

    with pytest.raises(ToolError, match="not found"):
        proc.run([str(tmp_path / "absent")])


def test_command_line_records_environment_changes() -> None:
    result = proc.run(["true"], env_set={"A": "1 2"}, env_unset=("B",))
    assert result.command_line() == "env -u B 'A=1 2' true"


def test_the_smoke_program_run_ahead_gives_both_paths_and_claims_no_build_stray(
    tmp_path: Path,
) -> None:
    from gate.evidence import EvidenceDir
    from gate.stages.execute import SmokeAhead, smoke_entry

    evidence = EvidenceDir.create(tmp_path / "ev")
    smoke = script(tmp_path, "smoke", ENV_PRINTER.replace("echo PASS", "sleep 1\necho PASS"))
    # A build step that leaves a daemon of a session of its own behind while the smoke
    # program runs: the build's to claim when it ends, never the gate's smoke program's.
    marker = tmp_path / "daemon-survived"
    # ( ... & ): the subshell exits at once, so the daemon is an orphan the gate adopts.
    body = f"#!/bin/sh\nsleep 0.3\n( setsid sh -c 'sleep 2; touch {marker}' & )\nsleep 3\n"
    builds: dict[str, proc.Result] = {}
    build = threading.Thread(
        target=lambda: builds.update(r=proc.run([str(script(tmp_path, "b.sh", body))]))
    )
    build.start()
    time.sleep(0.1)
    ahead = SmokeAhead(smoke_entry(smoke, 60.0), evidence, lambda: None)
    native, jit = ahead.runs()  # they end while the daemon sleeps
    build.join()
    assert marker.exists()  # nothing of the build's was killed by the smoke program
    assert [native.path, jit.path] == [ExecPath.NATIVE, ExecPath.JIT]
    assert values(native.result.output())["DISABLE"] == "1"
    assert values(jit.result.output())["FORCE"] == "1"
    assert (native.log_name, jit.log_name) == ("native.log", "ptx-jit.log")
    assert native.passed
    assert jit.passed


def test_smoke_runs_ahead_of_a_stage_that_never_came_leave_no_files(tmp_path: Path) -> None:
    from gate.evidence import EvidenceDir
    from gate.stages.execute import SmokeAhead, smoke_entry

    evidence = EvidenceDir.create(tmp_path / "ev")
    smoke = script(tmp_path, "smoke", "#!/bin/sh\necho PASS\n")
    (tmp_path / "ev" / "launches" / "native").mkdir(parents=True)  # as a recorder leaves it
    ahead = SmokeAhead(smoke_entry(smoke, 60.0), evidence, lambda: None)
    ahead.discard()
    assert sorted(p.name for p in (tmp_path / "ev").iterdir()) == [".cuda-gate", "launches"]
    assert list((tmp_path / "ev" / "launches").iterdir()) == []
