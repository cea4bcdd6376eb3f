"""benchmarks/bench_inspect.py rewrites only its own part of RESULTS.md."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "bench_inspect", ROOT / "benchmarks" / "bench_inspect.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_inspect"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.mark.unit
def test_a_new_run_replaces_the_last_one_and_keeps_everything_around_it() -> None:
    bench = _bench()
    kept = "## On the GPU machine\n\n| H200 | 0.861 s |\n\n## Runs on this VM\n\nhand-written\n"
    first = bench.merge("", "# run 1\n\n| names | 2.0 s |\n")
    # A file without the markers (as before they existed): the run goes first, all is kept.
    assert bench.merge(kept, "# run 1\n") == bench.merge("", "# run 1\n") + "\n" + kept
    with_kept = first + "\n" + kept
    second = bench.merge(with_kept, "# run 2\n\n| names | 1.9 s |\n")
    assert "run 1" not in second
    assert "| names | 1.9 s |" in second
    assert second.endswith(kept)
    assert second.count(bench.BEGIN) == second.count(bench.END) == 1
    # The same run written twice gives the same file.
    assert bench.merge(second, "# run 2\n\n| names | 1.9 s |\n") == second


@pytest.mark.unit
def test_the_checked_in_results_have_one_generated_part() -> None:
    bench = _bench()
    text = (ROOT / "benchmarks" / "RESULTS.md").read_text(encoding="utf-8")
    assert text.count(bench.BEGIN) == text.count(bench.END) == 1
    assert text.index(bench.BEGIN) < text.index(bench.END)


@pytest.mark.unit
def test_the_names_row_gives_the_default_and_the_like_for_like_ratio() -> None:
    bench = _bench()
    # libcublasLt cold on the device: the default read scans 260 MB more than cuobjdump.
    results = {
        ("libcublasLt.so.13", bench.COLD, bench.NAMES): (1.0, 56 << 10, 0),
        ("libcublasLt.so.13", bench.COLD, bench.NAMES_NO_SCAN): (0.5, 50 << 10, 0),
        ("libcublasLt.so.13", bench.COLD, bench.SYMBOLS): (2.1, 1664 << 10, 0),
    }
    row = bench._names_row(results, "libcublasLt.so.13", bench.COLD)
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[2:6] == ["1.000", "2.100", "2.10", "4.20"]
    assert cells[-2:] == ["**missed**", "met"]  # judged on the default read
    del results["libcublasLt.so.13", bench.COLD, bench.NAMES_NO_SCAN]
    row = bench._names_row(results, "libcublasLt.so.13", bench.COLD)
    assert [c.strip() for c in row.strip("|").split("|")][5] == "-"


@pytest.mark.integration
def test_a_variant_runs_the_gate_of_its_own_tree_from_the_checkout(tmp_path: Path) -> None:
    # `python -m gate` in the checkout imports the checkout's gate whatever PYTHONPATH
    # says; a variant must run its own tree's, from the folder the benchmark runs in.
    bench = _bench()
    tree = tmp_path / "before"
    (tree / "gate").mkdir(parents=True)
    (tree / "gate" / "__init__.py").write_text("")
    (tree / "gate" / "cli.py").write_text(
        "import sys\ndef entry():\n    print('before', sys.argv[1:])\n    return 7\n"
    )
    argv = bench.commands("cuobjdump", Path("x.so"), names_only=True, variants={"b": tree})
    # This checkout runs through the same stub, on a row of its own.
    assert argv[f"{bench.NAMES} (this tree)"][:4] == [
        sys.executable,
        "-c",
        bench.OTHER_TREE,
        str(ROOT),
    ]
    run = argv[f"{bench.NAMES} (b)"]
    done = subprocess.run(run, cwd=ROOT, capture_output=True, text=True, check=False, timeout=60)
    assert done.returncode == 7
    assert (
        done.stdout.strip() == "before ['inspect', '--no-detect', '--names', '--no-cache', 'x.so']"
    )
