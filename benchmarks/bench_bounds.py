"""How fast the reader and the configuration loader get through hostile inputs: the timings
the unit tier no longer asserts.

    python benchmarks/bench_bounds.py [--runs 3]

The unit tests of these cases (named in the table) bound the work instead: lines of
Python, bytes read, memory, each under a generous hang guard; a limit in seconds failed
on a loaded 2-CPU machine (issue 38). Here each case runs in this process, untraced, and
its best time of ``--runs`` is set against the limit its test used to assert. Run it on a
quiet machine; the exit status is 1 when a case misses its limit.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gate import config, jsonutil  # noqa: E402
from gate.attest.manifest import ENVELOPE_FILE, MANIFEST_FILE, write_manifest  # noqa: E402
from gate.attest.signing import generate_key_pair, load_public_key, signer_from_pem  # noqa: E402
from gate.attest.verify import verify  # noqa: E402
from gate.cli import main as cli_main  # noqa: E402
from gate.config.shellsplit import split  # noqa: E402
from gate.errors import ConfigError  # noqa: E402
from gate.guard.redact import Redactor  # noqa: E402
from gate.reader.cubin import read_ptx  # noqa: E402
from tests.manifest_evidence import make_evidence, matching_machine  # noqa: E402

REPRO = ROOT / "tests" / "repro"
# jsonutil.dumps against json.dumps(indent=2) on the same listing: at most this share.
JSON_SHARE = 0.9


@dataclass(frozen=True)
class Case:
    """One timed call, the test that bounds its work, and the seconds that test asserted."""

    name: str
    test: str
    limit: float
    call: Callable[[], object]


def _load(folder: Path, text: str) -> Callable[[], object]:
    """``config.load`` of a cuda-gate.toml holding ``text`` (its ConfigError, if any)."""
    folder.mkdir()
    (folder / "cuda-gate.toml").write_text(text, encoding="utf-8")

    def load() -> object:
        try:
            return config.load(folder)
        except ConfigError as e:
            return e

    return load


def _inspect(*args: str) -> Callable[[], object]:
    """``cuda-gate inspect ARGS`` in this process, uncached, its output discarded."""

    def run() -> object:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            code = cli_main(["inspect", "--no-detect", "--no-cache", *args])
        if code != 0:  # a refusal would be timed instead of the reading
            raise SystemExit(f"cuda-gate inspect {' '.join(args)}: exit status {code}")
        return code

    return run


def _verify(folder: Path) -> Callable[[], object]:
    """``verify`` of signed evidence whose unsigned manifest.json goes on for 4 GiB."""
    pair = generate_key_pair()
    ev = make_evidence(folder, environ={})
    write_manifest(ev.folder, signer_from_pem(pair.private_pem, "bench"), redactor=Redactor())
    with (ev.folder / MANIFEST_FILE).open("r+b") as stream:  # sparse: no disk
        stream.truncate(4 * 2**30)
    (folder / "k.pub").write_bytes(pair.public_pem)
    key = load_public_key(folder / "k.pub")
    return lambda: verify(ev.folder / ENVELOPE_FILE, key, machine=matching_machine())


def _ptx(text: bytes) -> Callable[[], object]:
    return lambda: read_ptx(text, 0, len(text), "x")


def _listing(entries: int) -> dict[str, Any]:
    """A run record's listing of one library with ``entries`` entries (torch's come to
    tens of thousands)."""
    rows: list[dict[str, Any]] = [
        {"kind": "SASS", "target": f"sm_{90 + i % 3}", "size": i, "ptx_isa": None, "kernels": []}
        for i in range(entries)
    ]
    return {"version": 1, "libraries": [{"path": "libx.so", "entries": rows}]}


DEEP = {
    "arrays": "targets = " + "[" * 1000 + "]" * 1000 + "\n",
    "inline tables": "store = " + "{ a = " * 1000 + "1" + " }" * 1000 + "\n",
    "dotted key": "store." + ".".join(["a"] * 20_000) + " = 1\n",
    "dotted key in a header": "[" + ".".join(["a"] * 20_000) + "]\n",
    "dotted key in an inline table": "store = { " + ".".join(["a"] * 20_000) + " = 1 }\n",
}


def cases(folder: Path) -> Iterator[Case]:
    """Every timed case, with the files it needs written under ``folder``."""
    bounds = "test_faults_bounds.py::test_"
    command = f"nvcc '-DLONG={'x' * (4 * 2**20)}' -o out.o"
    yield Case("split: a 4 MB word", f"{bounds}four_megabyte_*", 3, lambda: split(command))
    yield Case(
        "config.load: a 4 MB build command",
        f"{bounds}four_megabyte_*",
        3,
        _load(folder / "long", f'[[build]]\ncommand = "{command}"\n'),
    )
    words = '-I \'inc dir\' "-DA=\\"1\\"" ' * 200_000
    yield Case("split: 600,000 short words", f"{bounds}many_short_*", 5, lambda: split(words))
    for i, (what, text) in enumerate(DEEP.items()):
        yield Case(
            f"config.load: nested too deep ({what})",
            f"{bounds}deep_configuration_*",
            5,
            _load(folder / f"deep{i}", text),
        )
    yield Case(
        "verify: a 4 GiB unsigned manifest",
        f"{bounds}oversized_unsigned_*",
        5,
        _verify(folder / "evidence"),
    )
    for runs in (20_000, 80_000):
        blanks = b"\n" * runs + b" \t" * runs + b".entry" + b"\n" * runs + b"tail\n"
        yield Case(
            f"read_ptx: runs of {runs:,} newlines",
            "test_ptx_scan.py::test_runs_of_newlines_*",
            1,
            _ptx(blanks),
        )
    yield Case(
        "read_ptx: 32 MiB of y",
        "test_ptx_scan.py::test_a_text_full_of_y_*",
        2,
        _ptx(b"y" * (32 << 20) + b".entry k\n"),
    )
    for name in ("ptx_newlines_zstd_4M.fatbin", "ptx_newlines_100000.fatbin", "hang_artifact.o"):
        yield Case(
            f"inspect --names {name}",
            "test_repro.py::test_runs_of_newlines_*",
            3,
            _inspect(str(REPRO / name), "--names", "--json"),
        )
    bomb = str(REPRO / "bomb_zstd_40x256M_ptx.fatbin")
    yield Case(
        "inspect --names the 40 x 256 MB bomb",
        "test_repro.py::test_bomb_reads_*",
        5,
        _inspect(bomb, "--names", "--max-ratio", "100000", "--json"),
    )


def best(call: Callable[[], object], runs: int) -> float:
    """The least wall time of ``runs`` calls, after one uncounted (imports, first use)."""
    call()
    times = []
    for _ in range(runs):
        began = time.perf_counter()
        call()
        times.append(time.perf_counter() - began)
    return min(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--runs", type=int, default=3, help="timed calls per case (the best counts)"
    )
    args = parser.parse_args()
    print(f"Load average {os.getloadavg()[0]:.2f} at the start; best of {args.runs} runs.\n")
    print("| case | s | limit s | | the test that bounds its work (tests/) |")
    print("|---|---:|---:|---|---|")
    missed = []
    with tempfile.TemporaryDirectory(prefix="bench-bounds-") as folder:
        for case in cases(Path(folder)):
            seconds = best(case.call, args.runs)
            met = seconds < case.limit
            if not met:
                missed.append(case.name)
            print(
                f"| {case.name} | {seconds:.3f} | {case.limit} | {'met' if met else '**missed**'} "
                f"| {case.test} |",
                flush=True,
            )
    listing = _listing(40_000)
    ours = best(lambda: jsonutil.dumps(listing), args.runs)
    theirs = best(lambda: json.dumps(listing, indent=2, sort_keys=True), args.runs)
    share = ours / theirs
    if share >= JSON_SHARE:
        missed.append("jsonutil.dumps")
    print(
        f"\njsonutil.dumps on 40,000 entries: {ours:.3f} s, json.dumps(indent=2) {theirs:.3f} s: "
        f"{share:.2f} of it (target < {JSON_SHARE}: {'missed' if share >= JSON_SHARE else 'met'}; "
        "test_jsonutil.py::test_a_large_listing_*)"
    )
    if missed:
        print(f"missed: {', '.join(missed)}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
