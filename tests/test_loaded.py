"""gate.loaded: the shared objects a real process mapped, dlopen and child processes included."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gate import proc
from gate.stages.loaded import LoadedLibrary, loader_env, parse_loaded

# Loads the library named by argv[1] with dlopen, calls answer(), prints it; then runs
# argv[2] (if given) as a child process through execv after fork.
MAIN_C = r"""
#include <dlfcn.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>
int main(int argc, char **argv) {
  void *h = dlopen(argv[1], RTLD_NOW);
  if (!h) { fprintf(stderr, "%s\n", dlerror()); return 1; }
  int (*answer)(void) = (int (*)(void))dlsym(h, "answer");
  printf("answer=%d\n", answer());
  fflush(stdout);
  if (argc > 3) {
    pid_t pid = fork();
    if (pid == 0) { execv(argv[2], argv + 2); return 127; }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
  }
  return 0;
}
"""

LIB_C = "int helper(void);\nint answer(void) { return 40 + helper(); }\n"
HELPER_C = "int helper(void) { return 2; }\n"
OTHER_C = "int answer(void) { return 7; }\n"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """main, libanswer.so (needs libhelper.so, found via LD_LIBRARY_PATH), libother.so."""
    if shutil.which("gcc") is None:
        pytest.skip("gcc not found")
    folder = tmp_path_factory.mktemp("loaded")
    (folder / "deps").mkdir()
    for name, text in (("main.c", MAIN_C), ("lib.c", LIB_C), ("helper.c", HELPER_C)):
        (folder / name).write_text(text, encoding="utf-8")
    (folder / "other.c").write_text(OTHER_C, encoding="utf-8")
    steps = [
        ["gcc", "-shared", "-fPIC", "-o", "deps/libhelper.so", "helper.c"],
        ["gcc", "-shared", "-fPIC", "-o", "libanswer.so", "lib.c", "-Ldeps", "-lhelper"],
        ["gcc", "-shared", "-fPIC", "-o", "libother.so", "other.c"],
        ["gcc", "-o", "main", "main.c", "-ldl"],
    ]
    for argv in steps:
        proc.run_checked(argv, cwd=folder)
    (folder / "liblink.so").symlink_to("libanswer.so")
    return folder


def run_logged(folder: Path, argv: list[str], log: Path) -> proc.Result:
    env = {**loader_env(log), "LD_LIBRARY_PATH": str(folder / "deps")}
    result = proc.run(argv, env_set=env, cwd=folder, timeout=60)
    assert result.ok, result.output()
    return result


@pytest.mark.integration
def test_a_dlopened_library_and_its_dependency_are_recorded(built: Path, tmp_path: Path) -> None:
    result = run_logged(built, ["./main", "./liblink.so"], tmp_path)
    # The loader log goes to files: the program's own output is untouched.
    assert result.stdout == "answer=42\n"
    assert result.stderr == ""
    loaded = parse_loaded(tmp_path, cwd=built)
    paths = [lib.path for lib in loaded]
    # Through the symlink, relative to the child's working folder, resolved to the file.
    assert (built / "libanswer.so").resolve() in paths
    assert (built / "liblink.so") not in paths
    # Found by a search of LD_LIBRARY_PATH ("trying file=").
    assert (built / "deps" / "libhelper.so").resolve() in paths
    assert any(p.name.startswith("libc.so") for p in paths)
    assert len(paths) == len(set(paths))
    assert len({lib.pid for lib in loaded}) == 1
    # The program itself is recorded too: it is code the run executed.
    assert (built / "main").resolve() in paths


@pytest.mark.integration
def test_programs_a_wrapper_script_runs_are_recorded(built: Path, tmp_path: Path) -> None:
    run_logged(built, ["sh", "-c", "./main ./liblink.so"], tmp_path)
    paths = [lib.path for lib in parse_loaded(tmp_path, cwd=built)]
    assert (built / "main").resolve() in paths  # started as ./main, relative to the cwd
    assert (built / "libanswer.so").resolve() in paths


@pytest.mark.integration
def test_a_child_process_is_covered_with_its_own_pid(built: Path, tmp_path: Path) -> None:
    argv = ["./main", str(built / "libanswer.so"), str(built / "main"), str(built / "libother.so")]
    result = run_logged(built, argv, tmp_path)
    assert result.stdout == "answer=42\nanswer=7\n"
    loaded = parse_loaded(tmp_path, cwd=built)
    by_path = {lib.path: lib for lib in loaded}
    parent = by_path[(built / "libanswer.so").resolve()]
    child = by_path[(built / "libother.so").resolve()]
    assert parent.pid != child.pid
    assert parent.pid == loaded[0].pid
    # Order of first load: the parent's libraries come before the child's.
    order = [lib.path for lib in loaded]
    assert order.index(parent.path) < order.index(child.path)
    assert len(list(tmp_path.glob("ld.*"))) == 2


@pytest.mark.integration
def test_nothing_is_recorded_without_the_loader_variables(built: Path, tmp_path: Path) -> None:
    result = proc.run(
        ["./main", "./libother.so"], cwd=built, env_set={"LD_LIBRARY_PATH": str(built / "deps")}
    )
    assert result.ok
    assert parse_loaded(tmp_path, cwd=built) == ()


@pytest.mark.unit
def test_loader_env_names_an_absolute_log_prefix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    env = loader_env(Path("logs"))
    assert env == {"LD_DEBUG": "libs", "LD_DEBUG_OUTPUT": str(tmp_path.resolve() / "logs" / "ld")}


@pytest.mark.unit
def test_a_failed_try_is_not_a_load_and_the_last_found_one_is(tmp_path: Path) -> None:
    real = tmp_path / "b" / "libx.so"
    real.parent.mkdir()
    real.write_bytes(b"x")
    log = (
        "       12:\tfind library=libx.so [0]; searching\n"
        f"       12:\t search path={tmp_path}/a:{tmp_path}/b\t\t(LD_LIBRARY_PATH)\n"
        f"       12:\t  trying file={tmp_path}/a/libx.so\n"
        f"       12:\t  trying file={real}\n"
        "       12:\t\n"
        "       12:\tfind library=libmissing.so [0]; searching\n"
        f"       12:\t  trying file={tmp_path}/a/libmissing.so\n"
        "       12:\t\n"
        "       12:\tcalling init: /lib/x86_64-linux-gnu/libc.so.6\n"
        "       12:\tcalling fini:  [0]\n"
    )
    (tmp_path / "ld.12").write_text(log, encoding="utf-8")
    (tmp_path / "ld.notapid").write_text("calling init: /nope.so\n", encoding="utf-8")
    found = parse_loaded(tmp_path)
    assert found[0] == LoadedLibrary(real.resolve(), 12)
    assert [lib.path for lib in found][1:] == [Path("/lib/x86_64-linux-gnu/libc.so.6").resolve()]


@pytest.mark.unit
def test_processes_are_read_in_pid_order(tmp_path: Path) -> None:
    (tmp_path / "ld.100").write_text("     100:\tcalling init: /x/b.so\n", encoding="utf-8")
    (tmp_path / "ld.99").write_text(
        "      99:\tcalling init: /x/a.so\n      99:\tcalling init: /x/b.so\n", encoding="utf-8"
    )
    found = parse_loaded(tmp_path)
    assert found == (LoadedLibrary(Path("/x/a.so"), 99), LoadedLibrary(Path("/x/b.so"), 99))
