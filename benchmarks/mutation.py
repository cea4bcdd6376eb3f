"""Mutation-test the decision core with the unit tier; write the score and every survivor.

mutmut (``[tool.mutmut]`` in pyproject.toml) mutates the core (gate/rules: targets,
compatibility, routes, requirements, kernel names, causes, hosts, the verdict and the
test-result lists; gate/stages/predict.py; gate/attest/testresult.py) one change at a
time (a flipped comparison, a dropped condition, a swapped constant) and runs the unit
tests that reach the changed function. A mutant the tests do not kill survives: each one
left is either listed in benchmarks/mutation-survivors.toml with the reason no test can
tell it from the original (an equivalent mutant), or reported as unexplained.

    python benchmarks/mutation.py [--quick] [--max-children N] [--output FILE] [--no-write]

Writes benchmarks/MUTATION.md (score, counts per module, every survivor with its diff
and its explanation). ``--quick`` runs only the verdict and the causes (CI) and writes
nothing. Exits 1 when fewer than 95% are killed, or when a survivor is unexplained.
This script calls subprocess directly (not gate.proc): mutmut is a tool of the tests.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import re
import shutil
import subprocess
import sys
import time
import tomllib
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SURVIVORS = ROOT / "benchmarks" / "mutation-survivors.toml"
TARGET = 0.95
QUICK = ("gate.rules.verdict.*", "gate.rules.causes.*")
# mutmut's words for how a mutant ended: killed (by a test or a timeout) or not.
KILLED = {"killed", "timeout", "caught by type check"}
NOT_TESTED = {"skipped", "not checked"}
_RESULT = re.compile(r"^\s+(\S+__mutmut_\d+): (.+)$")


@dataclass(frozen=True)
class Survivor:
    name: str
    status: str
    diff: str
    why: str | None


def mutmut(*args: str) -> subprocess.CompletedProcess[str]:
    """Run mutmut in the project root, its output captured."""
    return subprocess.run(
        [sys.executable, "-m", "mutmut", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )


def run_mutmut(args: list[str], log: Path) -> int:
    """``mutmut run``, its spinner kept out of the console: the whole output goes to ``log``,
    and one progress line (mutants done, killed, survived) is printed a minute."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w", encoding="utf-8") as out:
        child = subprocess.Popen(
            [sys.executable, "-m", "mutmut", "run", *args],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        stream = child.stdout
        assert stream is not None
        last, shown = "", time.monotonic()
        for chunk in iter(lambda: stream.read(4096), ""):
            out.write(chunk)
            frames = [f for f in re.split(r"[\r\n]", chunk) if f.strip()]
            last = frames[-1] if frames else last
            if time.monotonic() - shown > 60:
                print(f"mutation: {last.strip()[:100]}", flush=True)
                shown = time.monotonic()
        return child.wait()


def module_of(name: str) -> str:
    """``gate.rules.routes.x_route__mutmut_3`` -> ``gate.rules.routes``."""
    head = name.split("__mutmut_", maxsplit=1)[0]
    return head.rsplit(".", 1)[0] if "." in head else head


def function_of(name: str) -> str:
    """``gate.rules.routes.x_route__mutmut_3`` -> ``gate.rules.routes.x_route``."""
    return name.split("__mutmut_", maxsplit=1)[0]


def explanations() -> list[dict[str, str]]:
    """The checked-in reasons, each for one function and one change in it."""
    data = tomllib.loads(SURVIVORS.read_text(encoding="utf-8"))
    found: list[dict[str, str]] = data.get("survivor", [])
    return found


def explain(name: str, diff: str, notes: list[dict[str, str]]) -> str | None:
    """The reason a survivor is equivalent, where benchmarks/mutation-survivors.toml gives one."""
    added = "\n".join(line[1:].strip() for line in diff.splitlines() if line.startswith("+ "))
    for note in notes:
        if function_of(name) == note["function"] and note["change"] in added:
            return note["why"]
    return None


def results() -> dict[str, str]:
    """Every mutant's name and how it ended."""
    done = mutmut("results", "--all", "true")
    found = {}
    for line in done.stdout.splitlines():
        match = _RESULT.match(line)
        if match:
            found[match.group(1)] = match.group(2).strip()
    return found


def write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def revision() -> str:
    head = ["git", "rev-parse", "--short", "HEAD"]
    done = subprocess.run(head, cwd=ROOT, capture_output=True, text=True, check=False)
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip() + (" (with uncommitted changes)" if dirty.stdout.strip() else "")


def report(found: dict[str, str], survivors: list[Survivor], seconds: float, command: str) -> str:
    """MUTATION.md's text."""
    tested = {n: s for n, s in found.items() if s not in NOT_TESTED}
    killed = sum(1 for s in tested.values() if s in KILLED)
    score = killed / len(tested) if tested else 0.0
    by_module: dict[str, Counter[str]] = {}
    for name, status in found.items():
        by_module.setdefault(module_of(name), Counter())[status] += 1
    lines = [
        "# Mutation testing of the decision core",
        "",
        (
            f"`nox -s mutation` on {datetime.date.today().isoformat()}, revision {revision()}, "
            f"{platform.machine()} ({os.cpu_count()} CPUs), Python {platform.python_version()}, "
            f"{seconds / 60:.1f} minutes: `{command}`."
        ),
        "",
        f"**{killed} of {len(tested)} mutants killed: {score:.1%}** (target {TARGET:.0%}); "
        f"{len(survivors)} survived, each explained below"
        + ("." if all(s.why for s in survivors) else " or marked UNEXPLAINED."),
        "",
        (
            "The core: gate/rules (targets, compatibility, routes, requirements, kernel names, "
            "causes, hosts, the verdict and the test-result lists), gate/stages/predict.py and "
            "gate/attest/testresult.py, mutated by mutmut and judged by the unit tier "
            "(`pytest -m unit`)."
        ),
        "",
        "| module | mutants | killed | survived | other |",
        "|---|---|---|---|---|",
    ]
    for module, counts in sorted(by_module.items()):
        total = sum(counts.values())
        dead = sum(n for s, n in counts.items() if s in KILLED)
        alive = counts["survived"]
        lines.append(f"| {module} | {total} | {dead} | {alive} | {total - dead - alive} |")
    lines += ["", "## Survivors", ""]
    if not survivors:
        lines.append("None.")
    for s in survivors:
        lines += [
            f"### {s.name} ({s.status})",
            "",
            f"Why: {s.why or 'UNEXPLAINED'}",
            "",
            "```diff",
            s.diff.strip(),
            "```",
            "",
        ]
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the verdict and causes only")
    parser.add_argument("--max-children", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--output", type=Path, default=ROOT / "benchmarks" / "MUTATION.md")
    parser.add_argument("--no-write", action="store_true", help="print the report only")
    args = parser.parse_args(argv)
    shutil.rmtree(ROOT / "mutants", ignore_errors=True)  # every run from scratch
    names = QUICK if args.quick else ()
    command = " ".join(["mutmut", "run", "--max-children", str(args.max_children), *names])
    began = time.monotonic()
    log = ROOT / "mutants" / "mutmut-run.log"
    status = run_mutmut(["--max-children", str(args.max_children), *names], log)
    seconds = time.monotonic() - began
    if status != 0:
        print(f"mutation: mutmut run exited {status} (its output: {log})", file=sys.stderr)
        return status
    found = results()
    if names:
        found = {n: s for n, s in found.items() if any(re.fullmatch(_glob(g), n) for g in names)}
    if not found:
        print("mutation: mutmut reported no mutants", file=sys.stderr)
        return 1
    notes = explanations()
    alive = [(n, s) for n, s in sorted(found.items()) if s not in KILLED and s not in NOT_TESTED]
    with ThreadPoolExecutor(max(1, args.max_children) * 2) as pool:
        diffs = list(pool.map(lambda item: mutmut("show", item[0]).stdout, alive))
    survivors = [
        Survivor(name, status, diff, explain(name, diff, notes))
        for (name, status), diff in zip(alive, diffs, strict=True)
    ]
    text = report(found, survivors, seconds, command)
    print(text)
    if not args.no_write and not args.quick:
        write(args.output, text)
    tested = [s for s in found.values() if s not in NOT_TESTED]
    score = sum(1 for s in tested if s in KILLED) / len(tested)
    unexplained = [s.name for s in survivors if not s.why]
    if score < TARGET or unexplained:
        print(
            f"mutation: {score:.1%} killed (target {TARGET:.0%}); "
            f"{len(unexplained)} unexplained survivor(s)",
            file=sys.stderr,
        )
        return 1
    return 0


def _glob(pattern: str) -> str:
    return re.escape(pattern).replace(r"\*", ".*")


if __name__ == "__main__":
    raise SystemExit(main())
